// OidcVerifier: JWKS parsing into OpenSSL 3 keys, and JWS signature and claim checks.
//
// Keys are built with EVP_PKEY_fromdata and checked with EVP_PKEY_public_check once, in Create;
// Verify only reads them (OpenSSL allows concurrent read-only use of an EVP_PKEY) and makes its
// own EVP_MD_CTX per call. Every OpenSSL failure path clears the thread's error queue, because the
// TLS code running on the same handler thread reads that queue after its own calls.
#include "api/oidc.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

namespace fabrica {
namespace {

using json = nlohmann::json;

// Bounds on untrusted input: a bearer token, and the work one RSA verification may cost.
constexpr size_t kMaxTokenBytes = size_t{64} * 1024;
constexpr size_t kMaxJwksBytes = size_t{1024} * 1024;
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 8192;
constexpr size_t kP256CoordinateBytes = 32;
constexpr size_t kEs256SignatureBytes = 2 * kP256CoordinateBytes;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct ParamBldFree {
  void operator()(OSSL_PARAM_BLD* p) const { OSSL_PARAM_BLD_free(p); }
};
struct ParamFree {
  void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, ParamBldFree>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, ParamFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, EcdsaSigFree>;

enum class KeyType { kRsa, kEc };

const char* KeyTypeName(KeyType t) { return t == KeyType::kRsa ? "RSA" : "EC P-256"; }

struct Key {
  std::optional<std::string> kid;
  KeyType type;  // RSA keys verify only RS256, P-256 keys only ES256
  std::shared_ptr<EVP_PKEY> pkey;
};

Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }

// The first queued OpenSSL error as text; empties the queue.
std::string TakeOpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  std::array<char, 256> buf{};
  ERR_error_string_n(code, buf.data(), buf.size());
  return buf.data();
}

// Attacker-chosen text in messages is cut short so that a huge header cannot make a huge message.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return "'" + std::string(s) + "'";
  return "'" + std::string(s.substr(0, kMax)) + "...'";
}

// Strict base64url without padding (RFC 7515 section 2): any other character, an impossible
// length, or non-zero bits left over in the last character make it invalid, so that one token
// has one encoding.
std::optional<std::string> Base64UrlDecode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

// Some providers pad the values in their JWKS; tokens get no such leniency.
std::optional<std::string> Base64UrlDecodeLenient(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  return Base64UrlDecode(in);
}

// Seconds since the epoch as RFC 3339 UTC, for messages (days-to-civil after H. Hinnant).
std::string FormatEpoch(int64_t seconds) {
  int64_t days = seconds / 86400;
  int64_t rem = seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    days -= 1;
  }
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1;
  int64_t month = mp < 10 ? mp + 3 : mp - 9;
  int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%lld (%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ)",
                static_cast<long long>(seconds), static_cast<long long>(year),
                static_cast<long long>(month), static_cast<long long>(day),
                static_cast<long long>(rem / 3600), static_cast<long long>(rem / 60 % 60),
                static_cast<long long>(rem % 60));
  return buf.data();
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

// A NumericDate claim (RFC 7519: seconds, possibly fractional), clamped to int64.
std::optional<int64_t> NumericDate(const json& v) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(kMax) ? kMax : static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) return std::nullopt;
    d = std::floor(d);
    if (d >= 9.2e18) return kMax;
    if (d <= -9.2e18) return kMin;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// A string member of a JSON object: nullopt when absent, an error when present but not a string.
Result<std::optional<std::string>> OptionalString(const json& object, const char* name,
                                                  const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(where + ": \"" + name + "\" is not a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::string> RequiredBase64Member(const json& jwk, const char* name,
                                         const std::string& where) {
  ASSIGN_OR_RETURN(std::optional<std::string> text, OptionalString(jwk, name, where));
  if (!text) return InvalidArgument(where + ": \"" + name + "\" is missing");
  std::optional<std::string> bytes = Base64UrlDecodeLenient(*text);
  if (!bytes || bytes->empty()) {
    return InvalidArgument(where + ": \"" + name + "\" is not base64url");
  }
  return *std::move(bytes);
}

// Builds a public key from OSSL_PARAMs and runs OpenSSL's public-key check on it (for EC, that
// the point is on the curve; for RSA, that n and e are plausible).
Result<std::shared_ptr<EVP_PKEY>> KeyFromParams(const char* type, OSSL_PARAM_BLD* bld,
                                                const std::string& where) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return InvalidArgument(where + ": not a valid " + type + " key: " + TakeOpenSslError());
  }
  std::shared_ptr<EVP_PKEY> pkey(raw, PkeyFree());
  PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return InvalidArgument(where + ": not a valid " + type + " public key: " + TakeOpenSslError());
  }
  return pkey;
}

Result<std::shared_ptr<EVP_PKEY>> RsaKey(const json& jwk, const std::string& where) {
  ASSIGN_OR_RETURN(std::string n, RequiredBase64Member(jwk, "n", where));
  ASSIGN_OR_RETURN(std::string e, RequiredBase64Member(jwk, "e", where));
  BnPtr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                       nullptr));
  BnPtr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                       nullptr));
  if (!bn_n || !bn_e) return Internal(where + ": " + TakeOpenSslError());
  int bits = BN_num_bits(bn_n.get());
  if (bits < kMinRsaBits || bits > kMaxRsaBits) {
    return InvalidArgument(where + ": RSA modulus is " + std::to_string(bits) + " bits; " +
                           std::to_string(kMinRsaBits) + " to " + std::to_string(kMaxRsaBits) +
                           " are accepted");
  }
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return Internal(where + ": " + TakeOpenSslError());
  }
  return KeyFromParams("RSA", bld.get(), where);
}

Result<std::shared_ptr<EVP_PKEY>> EcP256Key(const json& jwk, const std::string& where) {
  ASSIGN_OR_RETURN(std::string x, RequiredBase64Member(jwk, "x", where));
  ASSIGN_OR_RETURN(std::string y, RequiredBase64Member(jwk, "y", where));
  if (x.size() != kP256CoordinateBytes || y.size() != kP256CoordinateBytes) {
    return InvalidArgument(where + ": P-256 \"x\" and \"y\" must be 32 bytes each, not " +
                           std::to_string(x.size()) + " and " + std::to_string(y.size()));
  }
  // SEC 1 uncompressed point: 0x04 || x || y.
  std::string point = "\x04" + x + y;
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1,
                                      0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return Internal(where + ": " + TakeOpenSslError());
  }
  return KeyFromParams("EC", bld.get(), where);
}

// One JWK: a Key, nullopt for a key the verifier does not use, or an error for a malformed one.
Result<std::optional<Key>> ParseJwk(const json& jwk, size_t index) {
  std::string where = "JWKS key " + std::to_string(index);
  if (!jwk.is_object()) return InvalidArgument(where + " is not an object");
  ASSIGN_OR_RETURN(std::optional<std::string> kid, OptionalString(jwk, "kid", where));
  if (kid) where += " (kid " + Quote(*kid) + ")";
  ASSIGN_OR_RETURN(std::optional<std::string> kty, OptionalString(jwk, "kty", where));
  ASSIGN_OR_RETURN(std::optional<std::string> use, OptionalString(jwk, "use", where));
  ASSIGN_OR_RETURN(std::optional<std::string> alg, OptionalString(jwk, "alg", where));
  if (!kty) return InvalidArgument(where + ": \"kty\" is missing");
  if (use && *use != "sig") return std::optional<Key>();
  if (alg && *alg != "RS256" && *alg != "ES256") return std::optional<Key>();

  Key key{kid, KeyType::kRsa, nullptr};
  if (*kty == "RSA") {
    if (alg && *alg != "RS256") {
      return InvalidArgument(where + ": an RSA key cannot have alg " + Quote(*alg));
    }
    ASSIGN_OR_RETURN(key.pkey, RsaKey(jwk, where));
  } else if (*kty == "EC") {
    ASSIGN_OR_RETURN(std::optional<std::string> crv, OptionalString(jwk, "crv", where));
    if (!crv) return InvalidArgument(where + ": \"crv\" is missing");
    if (*crv != "P-256") return std::optional<Key>();
    if (alg && *alg != "ES256") {
      return InvalidArgument(where + ": a P-256 key cannot have alg " + Quote(*alg));
    }
    key.type = KeyType::kEc;
    ASSIGN_OR_RETURN(key.pkey, EcP256Key(jwk, where));
  } else {
    return std::optional<Key>();
  }
  return std::optional<Key>(std::move(key));
}

Result<std::vector<Key>> ParseJwks(const std::string& text) {
  if (text.size() > kMaxJwksBytes) {
    return InvalidArgument("JWKS is " + std::to_string(text.size()) + " bytes; the limit is " +
                           std::to_string(kMaxJwksBytes));
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("JWKS is not valid JSON");
  auto keys_it = doc.is_object() ? doc.find("keys") : doc.end();
  if (!doc.is_object() || keys_it == doc.end() || !keys_it->is_array()) {
    return InvalidArgument("JWKS is not an object with a \"keys\" array");
  }
  std::vector<Key> keys;
  for (size_t i = 0; i < keys_it->size(); ++i) {
    ASSIGN_OR_RETURN(std::optional<Key> key, ParseJwk((*keys_it)[i], i));
    if (!key) continue;
    for (const Key& other : keys) {
      if (key->kid && other.kid == key->kid && other.type == key->type) {
        return InvalidArgument("JWKS key " + std::to_string(i) + ": kid " + Quote(*key->kid) +
                               " is used by another " + KeyTypeName(key->type) + " key");
      }
    }
    keys.push_back(*std::move(key));
  }
  if (keys.empty()) return InvalidArgument("JWKS has no RS256 or ES256 signing key");
  return keys;
}

// The DER ECDSA-Sig-Value OpenSSL verifies, from JWS's fixed-width r || s.
std::optional<std::string> EcdsaRawToDer(std::string_view raw) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  constexpr int kLen = static_cast<int>(kP256CoordinateBytes);
  BnPtr r(BN_bin2bn(bytes, kLen, nullptr));
  BnPtr s(BN_bin2bn(bytes + kLen, kLen, nullptr));
  EcdsaSigPtr sig(ECDSA_SIG_new());
  if (!r || !s || !sig || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return std::nullopt;
  // ECDSA_SIG_set0 took ownership of r and s.
  (void)r.release();
  (void)s.release();
  int len = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (len <= 0) return std::nullopt;
  std::string der(static_cast<size_t>(len), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != len) return std::nullopt;
  return der;
}

bool DigestVerifySha256(EVP_PKEY* pkey, std::string_view input, std::string_view signature) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey) == 1 &&
            EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                             input.size()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

Result<json> DecodeJsonObject(std::string_view part, const char* what) {
  std::optional<std::string> text = Base64UrlDecode(part);
  if (!text) return Unauthenticated(std::string("token ") + what + " is not base64url");
  json value = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Unauthenticated(std::string("token ") + what + " is not a JSON object");
  }
  return value;
}

}  // namespace

struct OidcVerifier::KeySet {
  std::vector<Key> keys;
};

OidcVerifier::OidcVerifier(OidcConfig config, std::shared_ptr<const KeySet> keys)
    : config_(std::move(config)), keys_(std::move(keys)) {}

OidcVerifier::~OidcVerifier() = default;

size_t OidcVerifier::key_count() const { return keys_ ? keys_->keys.size() : 0; }

Result<OidcVerifier> OidcVerifier::Create(OidcConfig config) {
  if (config.issuer.empty()) return InvalidArgument("OIDC issuer is empty");
  if (config.audience.empty()) return InvalidArgument("OIDC audience (client id) is empty");
  if (config.username_claim.empty()) return InvalidArgument("OIDC username claim is empty");
  if (config.clock_skew_seconds < 0) {
    return InvalidArgument("OIDC clock skew is negative: " +
                           std::to_string(config.clock_skew_seconds));
  }
  auto keys = std::make_shared<KeySet>();
  ASSIGN_OR_RETURN(keys->keys, ParseJwks(config.jwks_json));
  return OidcVerifier(std::move(config), std::move(keys));
}

Result<OidcIdentity> OidcVerifier::Verify(const std::string& jwt, int64_t now_epoch_seconds) const {
  const int64_t now = now_epoch_seconds;
  if (!keys_) return Internal("OidcVerifier used after it was moved from");
  if (jwt.size() > kMaxTokenBytes) {
    return Unauthenticated("token is " + std::to_string(jwt.size()) + " bytes; the limit is " +
                           std::to_string(kMaxTokenBytes));
  }

  // Compact serialization: header.payload.signature.
  size_t dot1 = jwt.find('.');
  size_t dot2 = dot1 == std::string::npos ? dot1 : jwt.find('.', dot1 + 1);
  if (dot2 == std::string::npos || jwt.find('.', dot2 + 1) != std::string::npos) {
    size_t parts = 1 + static_cast<size_t>(std::count(jwt.begin(), jwt.end(), '.'));
    return Unauthenticated("token has " + std::to_string(parts) +
                           " dot-separated parts; a JWS has 3");
  }
  std::string_view whole(jwt);
  std::string_view header_part = whole.substr(0, dot1);
  std::string_view payload_part = whole.substr(dot1 + 1, dot2 - dot1 - 1);
  std::string_view signature_part = whole.substr(dot2 + 1);
  std::string_view signing_input = whole.substr(0, dot2);

  ASSIGN_OR_RETURN(json header, DecodeJsonObject(header_part, "header"));
  auto alg_it = header.find("alg");
  if (alg_it == header.end() || !alg_it->is_string()) {
    return Unauthenticated("token header has no \"alg\" string");
  }
  const std::string& alg = alg_it->get_ref<const std::string&>();
  KeyType type;
  if (alg == "RS256") {
    type = KeyType::kRsa;
  } else if (alg == "ES256") {
    type = KeyType::kEc;
  } else {
    return Unauthenticated("unsupported alg " + Quote(alg) + "; RS256 and ES256 are accepted");
  }
  // RFC 7515 section 4.1.11: extensions marked critical must be understood; none are.
  if (header.contains("crit")) {
    return Unauthenticated("token header has \"crit\" extensions, which are not supported");
  }

  // The key: by kid, or the only key of the alg's type.
  const Key* key = nullptr;
  auto kid_it = header.find("kid");
  if (kid_it != header.end()) {
    if (!kid_it->is_string()) return Unauthenticated("token header \"kid\" is not a string");
    const std::string& kid = kid_it->get_ref<const std::string&>();
    const Key* same_kid = nullptr;
    for (const Key& k : keys_->keys) {
      if (k.kid != kid) continue;
      same_kid = &k;
      if (k.type == type) key = &k;
    }
    if (same_kid == nullptr) return Unauthenticated("unknown key id " + Quote(kid));
    if (key == nullptr) {
      return Unauthenticated("key id " + Quote(kid) + " names an " + KeyTypeName(same_kid->type) +
                             " key, which cannot verify " + alg);
    }
  } else {
    int candidates = 0;
    for (const Key& k : keys_->keys) {
      if (k.type != type) continue;
      key = &k;
      ++candidates;
    }
    if (candidates == 0) {
      return Unauthenticated(std::string("token has no kid and the JWKS has no ") +
                             KeyTypeName(type) + " key for " + alg);
    }
    if (candidates > 1) {
      return Unauthenticated("token has no kid and the JWKS has " + std::to_string(candidates) +
                             " " + KeyTypeName(type) + " keys to choose from");
    }
  }
  std::optional<std::string> signature = Base64UrlDecode(signature_part);
  if (!signature) return Unauthenticated("token signature is not base64url");
  if (type == KeyType::kEc) {
    if (signature->size() != kEs256SignatureBytes) {
      return Unauthenticated("ES256 signature is " + std::to_string(signature->size()) +
                             " bytes; it must be 64 (r || s)");
    }
    std::optional<std::string> der = EcdsaRawToDer(*signature);
    if (!der) {
      ERR_clear_error();
      return Unauthenticated("signature does not verify (malformed ES256 signature)");
    }
    signature = std::move(der);
  }
  if (!DigestVerifySha256(key->pkey.get(), signing_input, *signature)) {
    return Unauthenticated("signature does not verify");
  }

  // The claims, now that they are known to come from the key's holder.
  ASSIGN_OR_RETURN(json claims, DecodeJsonObject(payload_part, "payload"));

  auto iss_it = claims.find("iss");
  if (iss_it == claims.end() || !iss_it->is_string()) {
    return Unauthenticated("token has no \"iss\" string claim");
  }
  const std::string& iss = iss_it->get_ref<const std::string&>();
  if (iss != config_.issuer) {
    return Unauthenticated("issuer " + Quote(iss) + " is not " + Quote(config_.issuer));
  }

  auto aud_it = claims.find("aud");
  if (aud_it == claims.end()) return Unauthenticated("token has no \"aud\" claim");
  if (aud_it->is_string()) {
    const std::string& aud = aud_it->get_ref<const std::string&>();
    if (aud != config_.audience) {
      return Unauthenticated("audience " + Quote(aud) + " is not " + Quote(config_.audience));
    }
  } else if (aud_it->is_array()) {
    bool found = false;
    for (const json& a : *aud_it) {
      if (!a.is_string()) return Unauthenticated("claim \"aud\" has an element that is no string");
      if (a.get_ref<const std::string&>() == config_.audience) found = true;
    }
    if (!found) {
      return Unauthenticated("audiences " +
                             Quote(aud_it->dump(-1, ' ', false, json::error_handler_t::replace)) +
                             " do not include " + Quote(config_.audience));
    }
  } else {
    return Unauthenticated("claim \"aud\" is neither a string nor an array of strings");
  }

  const int64_t skew = config_.clock_skew_seconds;
  std::string clock_note = "; it is now " + FormatEpoch(now) + " and the clock skew allowed is " +
                           std::to_string(skew) + "s";
  auto exp_it = claims.find("exp");
  if (exp_it == claims.end()) return Unauthenticated("token has no \"exp\" claim");
  std::optional<int64_t> exp = NumericDate(*exp_it);
  if (!exp) return Unauthenticated("claim \"exp\" is not a number");
  if (*exp <= SaturatingAdd(now, -skew)) {
    return Unauthenticated("token expired at " + FormatEpoch(*exp) + clock_note);
  }
  auto nbf_it = claims.find("nbf");
  if (nbf_it != claims.end()) {
    std::optional<int64_t> nbf = NumericDate(*nbf_it);
    if (!nbf) return Unauthenticated("claim \"nbf\" is not a number");
    if (*nbf > SaturatingAdd(now, skew)) {
      return Unauthenticated("token is not valid before " + FormatEpoch(*nbf) + clock_note);
    }
  }
  auto iat_it = claims.find("iat");
  if (iat_it != claims.end()) {
    std::optional<int64_t> iat = NumericDate(*iat_it);
    if (!iat) return Unauthenticated("claim \"iat\" is not a number");
    if (*iat > SaturatingAdd(now, skew)) {
      return Unauthenticated("token was issued in the future, at " + FormatEpoch(*iat) +
                             clock_note);
    }
  }

  OidcIdentity identity;
  identity.expires_at = *exp;

  const std::string& username_claim = config_.username_claim;
  auto user_it = claims.find(username_claim);
  if (user_it == claims.end() || user_it->is_null()) {
    return Unauthenticated("token has no " + Quote(username_claim) + " claim for the username");
  }
  if (!user_it->is_string()) {
    return Unauthenticated("username claim " + Quote(username_claim) + " is not a string");
  }
  if (user_it->get_ref<const std::string&>().empty()) {
    return Unauthenticated("username claim " + Quote(username_claim) + " is empty");
  }
  // As kube-apiserver does: an email nobody verified is no identity.
  if (username_claim == "email") {
    auto verified_it = claims.find("email_verified");
    if (verified_it != claims.end() && *verified_it != json(true)) {
      return Unauthenticated("claim \"email_verified\" is not true");
    }
  }
  identity.username = config_.username_prefix + user_it->get<std::string>();

  if (!config_.groups_claim.empty()) {
    auto groups_it = claims.find(config_.groups_claim);
    if (groups_it == claims.end() || groups_it->is_null()) {
      // No groups.
    } else if (groups_it->is_string()) {
      identity.groups.push_back(groups_it->get<std::string>());
    } else if (groups_it->is_array()) {
      for (const json& g : *groups_it) {
        if (!g.is_string()) {
          return Unauthenticated("groups claim " + Quote(config_.groups_claim) +
                                 " has an element that is no string");
        }
        identity.groups.push_back(g.get<std::string>());
      }
    } else {
      return Unauthenticated("groups claim " + Quote(config_.groups_claim) +
                             " is neither a string nor an array of strings");
    }
  }
  return identity;
}

Result<std::string> FetchJwksFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open JWKS file '" + path + "'");
  std::string text;
  std::array<char, size_t{64} * 1024> buf{};
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxJwksBytes) {
      return InvalidArgument("JWKS file '" + path + "' is larger than " +
                             std::to_string(kMaxJwksBytes) + " bytes");
    }
  }
  if (in.bad()) return Internal("cannot read JWKS file '" + path + "'");
  if (text.empty()) return InvalidArgument("JWKS file '" + path + "' is empty");
  return text;
}

}  // namespace fabrica
