// OIDC discovery: an identity provider's key set found from its issuer URL, and refreshed when
// tokens start naming a key the server has not seen (key rotation).
//
// `{issuer}/.well-known/openid-configuration` is read over HTTPS (verified against `ca_file`, or
// the system's trust store when it is empty); its `issuer` must equal the configured one exactly
// (OpenID Connect Discovery 1.0, section 4.3) and its `jwks_uri` names the JWKS document, which is
// read the same way and must be https on any host. Plain http is accepted only for loopback
// issuers (tests). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "api/oidc.h"
#include "core/status.h"

namespace fabrica {

// GETs `url` (https://host[:port]/path, or http for loopback hosts) and returns the body of a 200
// answer; any other status, a transport or TLS failure, or a body over 1 MiB is an error naming
// the URL.
Result<std::string> FetchUrl(const std::string& url, const std::string& ca_file,
                             int timeout_seconds = 10);

// The JWKS document of `issuer`, through its discovery document.
Result<std::string> DiscoverJwks(const std::string& issuer, const std::string& ca_file);

// A verifier whose keys come from discovery: built at start (a failure is an error then), and
// rebuilt when a token names an unknown key id, at most once per `min_refresh_seconds` (so a
// flood of tokens with made-up key ids cannot make the server hammer the provider).
class DiscoveredOidcVerifier {
 public:
  static Result<std::shared_ptr<DiscoveredOidcVerifier>> Create(OidcConfig config,
                                                                std::string ca_file,
                                                                int64_t min_refresh_seconds = 60);
  Result<OidcIdentity> Verify(const std::string& jwt, int64_t now_epoch_seconds);
  int64_t refreshes() const;

 private:
  DiscoveredOidcVerifier(OidcConfig config, std::string ca_file, int64_t min_refresh_seconds)
      : config_(std::move(config)),
        ca_file_(std::move(ca_file)),
        min_refresh_seconds_(min_refresh_seconds) {}
  Status Refresh();

  const OidcConfig config_;
  const std::string ca_file_;
  const int64_t min_refresh_seconds_;
  mutable std::mutex mu_;
  std::shared_ptr<OidcVerifier> verifier_;
  int64_t last_refresh_ = 0;  // epoch seconds of the last refetch tried on an unknown kid
  int64_t refreshes_ = 0;
};

}  // namespace fabrica
