// Tests for src/api/oidc: ID tokens signed here with keys made here.
//
// The test generates an RSA-2048 and an EC P-256 key with OpenSSL, publishes them as a JWKS the
// way a provider would (base64url "n"/"e" and "x"/"y"), and signs tokens itself: RS256 with
// EVP_DigestSign, ES256 by converting OpenSSL's DER signature to JWS's raw r || s. Nothing here
// uses the verifier's own encoders, so a shared mistake cannot hide.
#include "api/oidc.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/http_server.h"
#include "api/oidc_discovery.h"

namespace fabrica {
namespace {

using json = nlohmann::json;

constexpr int64_t kNow = 1700000000;  // 2023-11-14T22:13:20Z
constexpr char kIssuer[] = "https://idp.example.com";
constexpr char kAudience[] = "fabrica";

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string B64Url(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (bytes.size() - i == 1) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (bytes.size() - i == 2) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::string BnParam(EVP_PKEY* pkey, const char* name, int width = 0) {
  BIGNUM* bn = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(pkey, name, &bn), 1) << name;
  std::string out(width > 0 ? width : BN_num_bytes(bn), '\0');
  if (width > 0) {
    BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), width);
  } else {
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  }
  BN_free(bn);
  return out;
}

json RsaJwk(EVP_PKEY* pkey, const std::string& kid) {
  json jwk = {{"kty", "RSA"},
              {"use", "sig"},
              {"alg", "RS256"},
              {"n", B64Url(BnParam(pkey, OSSL_PKEY_PARAM_RSA_N))},
              {"e", B64Url(BnParam(pkey, OSSL_PKEY_PARAM_RSA_E))}};
  if (!kid.empty()) jwk["kid"] = kid;
  return jwk;
}

json EcJwk(EVP_PKEY* pkey, const std::string& kid) {
  json jwk = {{"kty", "EC"},
              {"crv", "P-256"},
              {"x", B64Url(BnParam(pkey, OSSL_PKEY_PARAM_EC_PUB_X, 32))},
              {"y", B64Url(BnParam(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, 32))}};
  if (!kid.empty()) jwk["kid"] = kid;
  return jwk;
}

std::string DigestSign(EVP_PKEY* pkey, const std::string& input) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t len = 0;
  EXPECT_EQ(EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, pkey), 1);
  EXPECT_EQ(EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                           input.size()),
            1);
  std::string sig(len, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()),
            1);
  sig.resize(len);
  EVP_MD_CTX_free(ctx);
  return sig;
}

// JWS ES256 wants r || s, each left-padded to 32 bytes, not OpenSSL's DER.
std::string SignEs256(EVP_PKEY* pkey, const std::string& input) {
  std::string der = DigestSign(pkey, input);
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  EXPECT_NE(sig, nullptr);
  std::string raw(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig), reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  ECDSA_SIG_free(sig);
  return raw;
}

struct TestKeys {
  PkeyPtr rsa{EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})};
  PkeyPtr other_rsa{EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})};
  PkeyPtr ec{EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")};
  PkeyPtr other_ec{EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")};
};

// Key generation is slow under the sanitizers; one set serves every test.
const TestKeys& Keys() {
  static const TestKeys* keys = new TestKeys();
  return *keys;
}

using Signer = std::function<std::string(const std::string&)>;

Signer Rs256(EVP_PKEY* pkey) {
  return [pkey](const std::string& in) { return DigestSign(pkey, in); };
}
Signer Es256(EVP_PKEY* pkey) {
  return [pkey](const std::string& in) { return SignEs256(pkey, in); };
}

std::string MakeToken(const json& header, const json& claims, const Signer& sign) {
  std::string input = B64Url(header.dump()) + "." + B64Url(claims.dump());
  return input + "." + B64Url(sign(input));
}

json Claims() {
  return {{"iss", kIssuer},     {"aud", kAudience},
          {"sub", "alice"},     {"email", "alice@example.com"},
          {"exp", kNow + 3600}, {"iat", kNow - 10},
          {"nbf", kNow - 10},   {"groups", {"team-a", "gpu-users"}}};
}

json RsaHeader(const std::string& kid = "rsa-1") {
  json h = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!kid.empty()) h["kid"] = kid;
  return h;
}
json EcHeader(const std::string& kid = "ec-1") {
  json h = {{"alg", "ES256"}, {"typ", "JWT"}};
  if (!kid.empty()) h["kid"] = kid;
  return h;
}

std::string Jwks(std::vector<json> keys) { return json{{"keys", keys}}.dump(); }

OidcConfig Config(std::string jwks) {
  OidcConfig c;
  c.issuer = kIssuer;
  c.audience = kAudience;
  c.jwks_json = std::move(jwks);
  return c;
}

OidcVerifier MakeVerifier(OidcConfig config) {
  Result<OidcVerifier> v = OidcVerifier::Create(std::move(config));
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return std::move(v).value();
}

OidcVerifier DefaultVerifier() {
  return MakeVerifier(
      Config(Jwks({RsaJwk(Keys().rsa.get(), "rsa-1"), EcJwk(Keys().ec.get(), "ec-1")})));
}

std::string RsaToken(const json& claims) {
  return MakeToken(RsaHeader(), claims, Rs256(Keys().rsa.get()));
}

// Expects kUnauthenticated with `fragment` in the message.
void ExpectRejected(const Result<OidcIdentity>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok()) << "accepted; expected an error with: " << fragment;
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos)
      << "message: " << r.status().message() << "\nexpected to contain: " << fragment;
  EXPECT_EQ(ERR_peek_error(), 0u) << "OpenSSL error queue left non-empty";
}

TEST(OidcTest, ValidRs256TokenYieldsUsernameAndGroups) {
  OidcVerifier v = DefaultVerifier();
  EXPECT_EQ(v.key_count(), 2u);
  Result<OidcIdentity> id = v.Verify(RsaToken(Claims()), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->username, "alice");
  EXPECT_EQ(id->groups, (std::vector<std::string>{"team-a", "gpu-users"}));
  EXPECT_EQ(id->expires_at, kNow + 3600);
}

TEST(OidcTest, ValidEs256TokenYieldsUsernameAndGroups) {
  OidcVerifier v = DefaultVerifier();
  json claims = Claims();
  claims["sub"] = "bob";
  claims["groups"] = {"team-b"};
  // Sign several times: about one signature in 128 has an r or s shorter than 32 bytes, which
  // the raw encoding must pad.
  for (int i = 0; i < 20; ++i) {
    claims["jti"] = i;
    Result<OidcIdentity> id = v.Verify(MakeToken(EcHeader(), claims, Es256(Keys().ec.get())), kNow);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(id->username, "bob");
    EXPECT_EQ(id->groups, std::vector<std::string>{"team-b"});
  }
}

TEST(OidcTest, WrongIssuer) {
  json claims = Claims();
  claims["iss"] = "https://evil.example.com";
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow),
                 "issuer 'https://evil.example.com' is not 'https://idp.example.com'");
  claims.erase("iss");
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow), "no \"iss\"");
}

TEST(OidcTest, WrongAudience) {
  json claims = Claims();
  claims["aud"] = "someone-else";
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow),
                 "audience 'someone-else' is not 'fabrica'");
  claims["aud"] = {"a", "b"};
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow), "do not include 'fabrica'");
  claims["aud"] = 7;
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow), "\"aud\" is neither");
  claims.erase("aud");
  ExpectRejected(DefaultVerifier().Verify(RsaToken(claims), kNow), "no \"aud\"");
}

TEST(OidcTest, AudienceArrayContainingOursIsAccepted) {
  json claims = Claims();
  claims["aud"] = {"other-client", kAudience};
  Result<OidcIdentity> id = DefaultVerifier().Verify(RsaToken(claims), kNow);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
}

TEST(OidcTest, ExpiredWithClockSkew) {
  OidcVerifier v = DefaultVerifier();
  json claims = Claims();
  claims["exp"] = kNow - 3600;
  ExpectRejected(v.Verify(RsaToken(claims), kNow),
                 "token expired at 1699996400 (2023-11-14T21:13:20Z)");
  // exp must be later than now - skew (60 s).
  claims["exp"] = kNow - 60;
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "token expired at");
  claims["exp"] = kNow - 59;
  EXPECT_TRUE(v.Verify(RsaToken(claims), kNow).ok());
  // Fractional NumericDates are allowed.
  claims["exp"] = static_cast<double>(kNow) + 0.5;
  EXPECT_TRUE(v.Verify(RsaToken(claims), kNow).ok());
  claims["exp"] = "tomorrow";
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "\"exp\" is not a number");
  claims.erase("exp");
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "no \"exp\"");
}

TEST(OidcTest, NotYetValid) {
  OidcVerifier v = DefaultVerifier();
  json claims = Claims();
  claims["nbf"] = kNow + 61;
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "token is not valid before 1700000061");
  claims["nbf"] = kNow + 60;
  EXPECT_TRUE(v.Verify(RsaToken(claims), kNow).ok());
  claims.erase("nbf");
  claims["iat"] = kNow + 600;
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "issued in the future");
  claims.erase("iat");
  EXPECT_TRUE(v.Verify(RsaToken(claims), kNow).ok()) << "nbf and iat are optional";
}

TEST(OidcTest, TamperedPayload) {
  std::string token = RsaToken(Claims());
  json evil = Claims();
  evil["sub"] = "admin";
  size_t dot1 = token.find('.');
  size_t dot2 = token.find('.', dot1 + 1);
  std::string forged = token.substr(0, dot1) + "." + B64Url(evil.dump()) + token.substr(dot2);
  ExpectRejected(DefaultVerifier().Verify(forged, kNow), "signature does not verify");
}

TEST(OidcTest, TamperedSignature) {
  OidcVerifier v = DefaultVerifier();
  for (const std::string& token :
       {RsaToken(Claims()), MakeToken(EcHeader(), Claims(), Es256(Keys().ec.get()))}) {
    std::string bad = token;
    // Change the first signature character: it carries six whole bits, so the bytes change.
    char& c = bad[bad.rfind('.') + 1];
    c = c == 'A' ? 'B' : 'A';
    ExpectRejected(v.Verify(bad, kNow), "signature does not verify");
  }
}

TEST(OidcTest, SignedByAnotherKeyWithTheSameKid) {
  OidcVerifier v = DefaultVerifier();
  ExpectRejected(v.Verify(MakeToken(RsaHeader(), Claims(), Rs256(Keys().other_rsa.get())), kNow),
                 "signature does not verify");
  ExpectRejected(v.Verify(MakeToken(EcHeader(), Claims(), Es256(Keys().other_ec.get())), kNow),
                 "signature does not verify");
}

TEST(OidcTest, Es256SignatureMustBeRawRAndS) {
  // A DER signature, as some broken signers send, is not accepted.
  std::string token = MakeToken(
      EcHeader(), Claims(), [](const std::string& in) { return DigestSign(Keys().ec.get(), in); });
  ExpectRejected(DefaultVerifier().Verify(token, kNow), "must be 64 (r || s)");
}

TEST(OidcTest, AlgNoneIsRejected) {
  json header = {{"alg", "none"}, {"typ", "JWT"}};
  std::string token = B64Url(header.dump()) + "." + B64Url(Claims().dump()) + ".";
  ExpectRejected(DefaultVerifier().Verify(token, kNow), "unsupported alg 'none'");
}

TEST(OidcTest, Hs256IsRejectedEvenWithThePublicKeyAsSecret) {
  // The classic confusion: HMAC keyed with the provider's published RSA key.
  std::string secret = Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")});
  json header = {{"alg", "HS256"}, {"typ", "JWT"}, {"kid", "rsa-1"}};
  std::string token = MakeToken(header, Claims(), [&](const std::string& in) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(in.data()), in.size(), mac, &len);
    return std::string(reinterpret_cast<char*>(mac), len);
  });
  ExpectRejected(DefaultVerifier().Verify(token, kNow), "unsupported alg 'HS256'");

  for (const char* alg : {"RS512", "PS256", "ES384", "EdDSA", "rs256"}) {
    json h = {{"alg", alg}, {"kid", "rsa-1"}};
    ExpectRejected(DefaultVerifier().Verify(MakeToken(h, Claims(), Rs256(Keys().rsa.get())), kNow),
                   std::string("unsupported alg '") + alg + "'");
  }
  json no_alg = {{"kid", "rsa-1"}};
  ExpectRejected(
      DefaultVerifier().Verify(MakeToken(no_alg, Claims(), Rs256(Keys().rsa.get())), kNow),
      "no \"alg\"");
}

TEST(OidcTest, UnknownKid) {
  ExpectRejected(DefaultVerifier().Verify(
                     MakeToken(RsaHeader("rotated-away"), Claims(), Rs256(Keys().rsa.get())), kNow),
                 "unknown key id 'rotated-away'");
}

TEST(OidcTest, KidOfTheWrongKeyType) {
  // ES256 under the RSA key's kid: the key cannot verify that alg.
  ExpectRejected(DefaultVerifier().Verify(
                     MakeToken(EcHeader("rsa-1"), Claims(), Es256(Keys().ec.get())), kNow),
                 "key id 'rsa-1' names an RSA key, which cannot verify ES256");
}

TEST(OidcTest, NoKidPicksTheOnlyKeyOfTheType) {
  OidcVerifier v = DefaultVerifier();
  EXPECT_TRUE(v.Verify(MakeToken(RsaHeader(""), Claims(), Rs256(Keys().rsa.get())), kNow).ok());
  EXPECT_TRUE(v.Verify(MakeToken(EcHeader(""), Claims(), Es256(Keys().ec.get())), kNow).ok());

  // Two RSA keys: a token without a kid is ambiguous.
  OidcVerifier two = MakeVerifier(
      Config(Jwks({RsaJwk(Keys().rsa.get(), "rsa-1"), RsaJwk(Keys().other_rsa.get(), "rsa-2")})));
  ExpectRejected(two.Verify(MakeToken(RsaHeader(""), Claims(), Rs256(Keys().rsa.get())), kNow),
                 "has 2 RSA keys");
  EXPECT_TRUE(
      two.Verify(MakeToken(RsaHeader("rsa-2"), Claims(), Rs256(Keys().other_rsa.get())), kNow)
          .ok());
  // No EC key at all.
  ExpectRejected(two.Verify(MakeToken(EcHeader(""), Claims(), Es256(Keys().ec.get())), kNow),
                 "has no EC P-256 key");
}

TEST(OidcTest, MalformedTokens) {
  OidcVerifier v = DefaultVerifier();
  std::string good = RsaToken(Claims());
  size_t dot2 = good.rfind('.');
  ExpectRejected(v.Verify(good.substr(0, dot2), kNow), "has 2 dot-separated parts");
  ExpectRejected(v.Verify(good + ".x", kNow), "has 4 dot-separated parts");
  ExpectRejected(v.Verify("", kNow), "has 1 dot-separated parts");
  ExpectRejected(v.Verify("!!!." + good.substr(good.find('.') + 1), kNow),
                 "header is not base64url");
  ExpectRejected(v.Verify(good.substr(0, dot2) + ".abc=", kNow), "signature is not base64url");
  ExpectRejected(v.Verify(good.substr(0, dot2) + ".a b", kNow), "signature is not base64url");
  std::string not_json = B64Url("{alg: RS256") + good.substr(good.find('.'));
  ExpectRejected(v.Verify(not_json, kNow), "header is not a JSON object");
  std::string array_header = B64Url("[1,2]") + good.substr(good.find('.'));
  ExpectRejected(v.Verify(array_header, kNow), "header is not a JSON object");
  // A payload that is not an object, correctly signed.
  std::string input = B64Url(RsaHeader().dump()) + "." + B64Url("\"alice\"");
  ExpectRejected(v.Verify(input + "." + B64Url(DigestSign(Keys().rsa.get(), input)), kNow),
                 "payload is not a JSON object");
  ExpectRejected(v.Verify(std::string(70000, 'a'), kNow), "the limit is 65536");
  json crit = RsaHeader();
  crit["crit"] = {"exp"};
  ExpectRejected(v.Verify(MakeToken(crit, Claims(), Rs256(Keys().rsa.get())), kNow), "crit");
}

TEST(OidcTest, MissingUsernameClaim) {
  OidcVerifier v = DefaultVerifier();
  json claims = Claims();
  claims.erase("sub");
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "no 'sub' claim");
  claims["sub"] = 42;
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "'sub' is not a string");
  claims["sub"] = "";
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "'sub' is empty");
}

TEST(OidcTest, UsernamePrefixAndEmailClaim) {
  OidcConfig config = Config(Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")}));
  config.username_claim = "email";
  config.username_prefix = "oidc:";
  OidcVerifier v = MakeVerifier(config);
  json claims = Claims();
  Result<OidcIdentity> id = v.Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->username, "oidc:alice@example.com");
  claims["email_verified"] = true;
  EXPECT_TRUE(v.Verify(RsaToken(claims), kNow).ok());
  claims["email_verified"] = false;
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "\"email_verified\" is not true");
}

TEST(OidcTest, Groups) {
  OidcVerifier v = DefaultVerifier();
  json claims = Claims();
  claims.erase("groups");
  Result<OidcIdentity> id = v.Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(id->groups.empty());

  claims["groups"] = nullptr;
  id = v.Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(id->groups.empty());

  claims["groups"] = "solo";
  id = v.Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->groups, std::vector<std::string>{"solo"});

  claims["groups"] = {"a", 1};
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "has an element that is no string");
  claims["groups"] = {{"a", 1}};
  ExpectRejected(v.Verify(RsaToken(claims), kNow), "neither a string nor an array");

  // Another claim name, and groups switched off.
  OidcConfig config = Config(Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")}));
  config.groups_claim = "roles";
  claims["roles"] = {"r1"};
  id = MakeVerifier(config).Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->groups, std::vector<std::string>{"r1"});
  config.groups_claim = "";
  id = MakeVerifier(config).Verify(RsaToken(claims), kNow);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(id->groups.empty());
}

TEST(OidcTest, KeyWithoutAlgIsUsable) {
  json jwk = RsaJwk(Keys().rsa.get(), "rsa-1");
  jwk.erase("alg");
  OidcVerifier v = MakeVerifier(Config(Jwks({jwk})));
  EXPECT_TRUE(v.Verify(RsaToken(Claims()), kNow).ok());
}

TEST(OidcTest, CreateRejectsBadConfigAndKeys) {
  auto create_error = [](OidcConfig c) {
    Result<OidcVerifier> v = OidcVerifier::Create(std::move(c));
    EXPECT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    return v.status().message();
  };
  std::string jwks = Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")});
  OidcConfig c = Config(jwks);
  c.issuer = "";
  EXPECT_NE(create_error(c).find("issuer is empty"), std::string::npos);
  c = Config(jwks);
  c.audience = "";
  EXPECT_NE(create_error(c).find("audience"), std::string::npos);
  c = Config(jwks);
  c.clock_skew_seconds = -1;
  EXPECT_NE(create_error(c).find("negative"), std::string::npos);

  EXPECT_NE(create_error(Config("not json")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(create_error(Config("{\"keys\": 3}")).find("\"keys\" array"), std::string::npos);
  EXPECT_NE(create_error(Config("{\"keys\": []}")).find("no RS256 or ES256"), std::string::npos);

  // Only unusable keys: symmetric, encryption, another curve, another alg.
  json oct = {{"kty", "oct"}, {"k", "c2VjcmV0"}};
  json enc = RsaJwk(Keys().rsa.get(), "enc-1");
  enc["use"] = "enc";
  json p384 = {{"kty", "EC"}, {"crv", "P-384"}, {"x", "AA"}, {"y", "AA"}};
  json ps256 = RsaJwk(Keys().rsa.get(), "ps-1");
  ps256["alg"] = "PS256";
  EXPECT_NE(create_error(Config(Jwks({oct, enc, p384, ps256}))).find("no RS256 or ES256"),
            std::string::npos);
  // ... are skipped beside usable ones.
  OidcVerifier mixed =
      MakeVerifier(Config(Jwks({oct, enc, p384, ps256, RsaJwk(Keys().rsa.get(), "rsa-1")})));
  EXPECT_EQ(mixed.key_count(), 1u);
  ExpectRejected(
      mixed.Verify(MakeToken(RsaHeader("enc-1"), Claims(), Rs256(Keys().rsa.get())), kNow),
      "unknown key id 'enc-1'");

  // Malformed keys of a usable type are errors.
  json no_n = RsaJwk(Keys().rsa.get(), "rsa-1");
  no_n.erase("n");
  EXPECT_NE(create_error(Config(Jwks({no_n}))).find("\"n\" is missing"), std::string::npos);
  json bad_n = RsaJwk(Keys().rsa.get(), "rsa-1");
  bad_n["n"] = "not*base64";
  EXPECT_NE(create_error(Config(Jwks({bad_n}))).find("\"n\" is not base64url"), std::string::npos);
  json small = RsaJwk(Keys().rsa.get(), "rsa-1");
  small["n"] = B64Url(std::string(128, '\xff'));
  EXPECT_NE(create_error(Config(Jwks({small}))).find("1024 bits"), std::string::npos);
  json off_curve = EcJwk(Keys().ec.get(), "ec-1");
  off_curve["y"] = B64Url(std::string(32, '\x01'));
  EXPECT_NE(create_error(Config(Jwks({off_curve}))).find("not a valid EC"), std::string::npos);
  json short_x = EcJwk(Keys().ec.get(), "ec-1");
  short_x["x"] = B64Url(std::string(31, '\x01'));
  EXPECT_NE(create_error(Config(Jwks({short_x}))).find("32 bytes each"), std::string::npos);
  json rsa_es256 = RsaJwk(Keys().rsa.get(), "rsa-1");
  rsa_es256["alg"] = "ES256";
  EXPECT_NE(create_error(Config(Jwks({rsa_es256}))).find("an RSA key cannot have alg 'ES256'"),
            std::string::npos);
  EXPECT_NE(create_error(Config(Jwks({RsaJwk(Keys().rsa.get(), "dup"),
                                      RsaJwk(Keys().other_rsa.get(), "dup")})))
                .find("kid 'dup' is used by another RSA key"),
            std::string::npos);
  EXPECT_EQ(ERR_peek_error(), 0u) << "OpenSSL error queue left non-empty";
}

TEST(OidcTest, MovedVerifierStillWorks) {
  OidcVerifier a = DefaultVerifier();
  OidcVerifier b = std::move(a);
  EXPECT_TRUE(b.Verify(RsaToken(Claims()), kNow).ok());
  OidcVerifier c = DefaultVerifier();
  c = std::move(b);
  EXPECT_TRUE(c.Verify(RsaToken(Claims()), kNow).ok());
}

TEST(OidcTest, ConcurrentVerify) {
  const OidcVerifier v = DefaultVerifier();
  const std::string rsa_token = RsaToken(Claims());
  const std::string ec_token = MakeToken(EcHeader(), Claims(), Es256(Keys().ec.get()));
  std::string bad_token = rsa_token;
  char& c = bad_token[bad_token.rfind('.') + 1];
  c = c == 'A' ? 'B' : 'A';
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        switch ((t + i) % 3) {
          case 0:
            if (!v.Verify(rsa_token, kNow).ok()) ++failures;
            break;
          case 1:
            if (!v.Verify(ec_token, kNow).ok()) ++failures;
            break;
          default:
            if (v.Verify(bad_token, kNow).ok()) ++failures;
            if (ERR_peek_error() != 0) ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(OidcTest, FetchJwksFromFile) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fabrica_oidc_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string jwks = Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")});
  {
    std::ofstream out(dir / "jwks.json");
    out << jwks;
  }
  Result<std::string> text = FetchJwksFromFile((dir / "jwks.json").string());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, jwks);
  EXPECT_TRUE(OidcVerifier::Create(Config(*text)).ok());

  Result<std::string> missing = FetchJwksFromFile((dir / "nope.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
  { std::ofstream empty(dir / "empty.json"); }
  EXPECT_FALSE(FetchJwksFromFile((dir / "empty.json").string()).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fabrica

namespace fabrica {
namespace {

// The auth file's oidc section wires a verifier into the Authorizer: an ID token then
// authenticates as its username and groups, and group bindings authorize it.
TEST(OidcAuthorizerTest, AuthFileOidcSectionAuthenticatesAndBindsGroups) {
  char dir_template[] = "/tmp/fabrica-oidc-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  {
    std::ofstream jwks(dir + "/jwks.json");
    jwks << Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")});
  }
  const std::string yaml = "oidc: {issuer: " + std::string(kIssuer) +
                           ", audience: " + std::string(kAudience) +
                           ", jwksFile: jwks.json, usernamePrefix: 'oidc:'}\n"
                           "bindings: [{role: tenant-member, tenant: team-a, group: team-a}]\n";
  auto auth = Authorizer::Parse(yaml, dir + "/auth.yaml");
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  auto p = auth->Authenticate(RsaToken(Claims()), kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "oidc:alice");
  EXPECT_TRUE(auth->Check(*p, Verb::kCreate, "workloads", "team-a", "w").ok());
  EXPECT_FALSE(auth->Check(*p, Verb::kCreate, "workloads", "team-b", "w").ok());
  // Expired, and a plain unknown token: both 401 with a reason.
  json expired = Claims();
  expired["exp"] = kNow - 3600;
  auto late = auth->Authenticate(RsaToken(expired), kNow);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(late.status().message().find("expired"), std::string::npos) << late.status().message();
  EXPECT_FALSE(auth->Authenticate("not-a-token", kNow).ok());
  // A missing JWKS file names the field.
  auto bad = Authorizer::Parse("oidc: {issuer: i, audience: a, jwksFile: nope.json}\n",
                               dir + "/auth.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("oidc.jwksFile"), std::string::npos)
      << bad.status().message();
  std::filesystem::remove_all(dir);
}

// An identity provider on loopback HTTPS: its discovery document and a key set the test swaps
// to rotate keys. Counts the key set's fetches.
class FakeProvider {
 public:
  explicit FakeProvider(const std::string& dir) : dir_(dir) {
    CHECK(EnsureServerCertificates(dir, {"127.0.0.1"}).ok());
    HttpServerOptions o;
    o.listen = "127.0.0.1:0";
    o.cert_file = dir + "/server.crt";
    o.key_file = dir + "/server.key";
    o.threads = 2;
    server_ = std::make_unique<HttpServer>(o, [this](const HttpRequest& req) {
      HttpResponse r;
      std::lock_guard<std::mutex> lock(mu_);
      if (req.path == "/.well-known/openid-configuration") {
        r.body = json{{"issuer", issuer_doc_.empty() ? url() : issuer_doc_},
                      {"jwks_uri", url() + "/keys"}}
                     .dump();
      } else if (req.path == "/keys") {
        ++fetches_;
        r.body = jwks_;
      } else {
        r.status = 404;
      }
      return r;
    });
    CHECK(server_->Start().ok());
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(server_->port()); }
  std::string ca() const { return dir_ + "/ca.crt"; }
  void SetJwks(std::string jwks) {
    std::lock_guard<std::mutex> lock(mu_);
    jwks_ = std::move(jwks);
  }
  void SetIssuerInDocument(std::string issuer) {
    std::lock_guard<std::mutex> lock(mu_);
    issuer_doc_ = std::move(issuer);
  }
  int fetches() {
    std::lock_guard<std::mutex> lock(mu_);
    return fetches_;
  }

 private:
  std::string dir_;
  std::mutex mu_;
  std::string jwks_;
  std::string issuer_doc_;
  int fetches_ = 0;
  std::unique_ptr<HttpServer> server_;
};

TEST(OidcDiscoveryTest, KeysComeFromTheIssuerAndAreRefetchedWhenTheyRotate) {
  const std::string dir = testing::TempDir() + "/oidc_discovery_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  FakeProvider idp(dir);
  idp.SetJwks(Jwks({RsaJwk(Keys().rsa.get(), "rsa-1")}));
  const std::string yaml = "oidc: {issuer: '" + idp.url() +
                           "', audience: " + std::string(kAudience) +
                           ", discovery: true, caFile: " + idp.ca() + "}\n";
  auto auth = Authorizer::Parse(yaml, dir + "/auth.yaml");
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  EXPECT_EQ(idp.fetches(), 1);
  json claims = Claims();
  claims["iss"] = idp.url();
  auto p = auth->Authenticate(RsaToken(claims), kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->user, "alice");

  // The provider rotates to a new key: the first token naming it makes the server fetch again.
  idp.SetJwks(Jwks({RsaJwk(Keys().other_rsa.get(), "rsa-2")}));
  const std::string rotated = MakeToken(RsaHeader("rsa-2"), claims, Rs256(Keys().other_rsa.get()));
  p = auth->Authenticate(rotated, kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(idp.fetches(), 2);
  // The old key is gone with the rotation.
  EXPECT_FALSE(auth->Authenticate(RsaToken(claims), kNow + 120).ok());
  EXPECT_EQ(idp.fetches(), 3);

  // Made-up key ids do not make the server hammer the provider: one fetch a minute at most.
  const std::string bogus = MakeToken(RsaHeader("nope"), claims, Rs256(Keys().other_rsa.get()));
  auto r = auth->Authenticate(bogus, kNow + 130);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key id"), std::string::npos) << r.status().message();
  for (int i = 0; i < 20; ++i) (void)auth->Authenticate(bogus, kNow + 131 + i);
  EXPECT_EQ(idp.fetches(), 3);
  (void)auth->Authenticate(bogus, kNow + 200);
  EXPECT_EQ(idp.fetches(), 4);

  // A discovery document for another issuer is refused, naming the field.
  idp.SetIssuerInDocument("https://evil.example.com");
  auto bad = Authorizer::Parse(yaml, dir + "/auth.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("oidc.discovery"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("evil.example.com"), std::string::npos)
      << bad.status().message();
  // Both or neither of jwksFile and discovery is an error; plain http only on loopback.
  auto both = Authorizer::Parse("oidc: {issuer: i, audience: a}\n", dir + "/auth.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("either jwksFile or discovery"), std::string::npos);
  auto plain = FetchUrl("http://idp.example.com/keys", "");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("must be https"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fabrica
