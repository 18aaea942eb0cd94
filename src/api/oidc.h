// OidcVerifier: checks OpenID Connect ID tokens (compact JWS, RS256 or ES256) against a fixed
// JWKS and maps a valid token to a username and groups, the way kube-apiserver's OIDC
// authenticator does (exact `iss`, `aud` containing the client id, `exp`/`nbf`/`iat` with a
// clock skew, a username claim with an optional prefix, a groups claim).
//
// The verifier never talks to the identity provider: the JWKS document is given as text when it
// is created (see FetchJwksFromFile). Discovery and refetching the key set when a token names an
// unknown key id are api/oidc_discovery.h's, which builds a new verifier and swaps it in.
//
// Only asymmetric algorithms are accepted, and only those two: "none", HS256 (whose secret an
// attacker could take from a published RSA key) and every other alg are refused, and keys embedded
// in the token header (`jwk`, `jku`, `x5u`, `x5c`) are ignored.
//
// Immutable after Create; Verify may be called from any number of threads at once. The class is
// movable, not copyable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct OidcConfig {
  std::string issuer;     // the `iss` a token must carry, compared exactly
  std::string audience;   // the client id; `aud` (a string or an array) must contain it
  std::string jwks_json;  // the JWKS document text: {"keys": [...]}
  std::string username_claim = "sub";
  std::string username_prefix;          // prepended to the claim's value, e.g. "oidc:"
  std::string groups_claim = "groups";  // "" means groups are not read from tokens
  int64_t clock_skew_seconds = 60;
};

struct OidcIdentity {
  std::string username;  // with the prefix
  std::vector<std::string> groups;
  int64_t expires_at = 0;  // the token's `exp`, in seconds since the epoch
};

class OidcVerifier {
 public:
  // Parses the JWKS and builds its keys once. Keys of type RSA (from "n" and "e"; at least 2048
  // bits) and EC on P-256 (from "crv", "x" and "y") are kept, with their "kid" and "alg". Keys the
  // verifier cannot use are skipped: other key types and curves, "use" other than "sig", "alg"
  // other than RS256 or ES256. A malformed key of a kept type, a repeated kid, or a document left
  // with no usable key is kInvalidArgument, as is an empty issuer, audience or username claim or
  // a negative clock skew.
  static Result<OidcVerifier> Create(OidcConfig config);

  // The identity in `jwt`, or kUnauthenticated with a message naming what failed ("token expired
  // at ...", "issuer 'x' is not 'y'", "unknown key id 'k'", "signature does not verify",
  // "unsupported alg 'HS256'", ...). `now_epoch_seconds` is the caller's clock, so that tests and
  // the simulator can pass their own.
  //
  // The key is the JWKS key whose kid the header names; without a kid, the only key of the alg's
  // type. A key's own "alg", where it has one, must match the token's. The claims are read only
  // after the signature verifies: `iss` and `aud` must match; `exp` is required and must be later
  // than now - skew; `nbf` and `iat`, where present, must not be later than now + skew. The
  // username claim must be a non-empty string (for "email", a present `email_verified` must be
  // true); the groups claim may be absent or null, a string, or an array of strings.
  Result<OidcIdentity> Verify(const std::string& jwt, int64_t now_epoch_seconds) const;

  OidcVerifier(OidcVerifier&&) noexcept = default;
  OidcVerifier& operator=(OidcVerifier&&) noexcept = default;
  OidcVerifier(const OidcVerifier&) = delete;
  OidcVerifier& operator=(const OidcVerifier&) = delete;
  ~OidcVerifier();

  // The number of keys kept from the JWKS.
  size_t key_count() const;

 private:
  struct KeySet;  // the parsed keys, holding OpenSSL objects; defined in oidc.cc

  OidcVerifier(OidcConfig config, std::shared_ptr<const KeySet> keys);

  OidcConfig config_;
  // Shared and const so that concurrent Verify calls only read it.
  std::shared_ptr<const KeySet> keys_;
};

// The text of a JWKS file, e.g. one an operator saved from the provider's `jwks_uri`.
// kNotFound when the file cannot be opened, kInvalidArgument when it is empty or larger than 1 MiB.
Result<std::string> FetchJwksFromFile(const std::string& path);

}  // namespace fabrica
