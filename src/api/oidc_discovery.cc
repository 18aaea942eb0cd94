#include "api/oidc_discovery.h"

#include <nlohmann/json.hpp>

#include "client/http_client.h"

namespace fabrica {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxDocument = 1 << 20;

bool IsLoopbackHost(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

}  // namespace

Result<std::string> FetchUrl(const std::string& url, const std::string& ca_file,
                             int timeout_seconds) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("'" + url + "' is not a URL");
  const std::string scheme = url.substr(0, scheme_end);
  const size_t path_start = url.find('/', scheme_end + 3);
  const std::string authority =
      url.substr(scheme_end + 3,
                 path_start == std::string::npos ? std::string::npos : path_start - scheme_end - 3);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  std::string host = authority.substr(0, authority.rfind(':'));
  if (authority.find(':') == std::string::npos || authority.back() == ']') host = authority;
  if (scheme != "https" && !(scheme == "http" && IsLoopbackHost(host))) {
    return InvalidArgument("'" + url + "': identity provider URLs must be https");
  }
  ClientOptions o;
  // The client wants host:port; the scheme's default port when the URL has none.
  const bool has_port = authority.find(':') != std::string::npos && authority.back() != ']';
  o.server = scheme + "://" + authority + (has_port ? "" : scheme == "https" ? ":443" : ":80");
  o.ca_file = ca_file;
  o.timeout_seconds = timeout_seconds;
  HttpClient client(o);
  auto r = client.Do("GET", path);
  if (!r.ok()) return Status(StatusCode::kUnavailable, url + ": " + r.status().message());
  if (r->status != 200) {
    return Status(StatusCode::kUnavailable, url + ": HTTP " + std::to_string(r->status));
  }
  if (r->body.size() > kMaxDocument) return InvalidArgument(url + ": document over 1 MiB");
  return r->body;
}

Result<std::string> DiscoverJwks(const std::string& issuer, const std::string& ca_file) {
  std::string base = issuer;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string config_url = base + "/.well-known/openid-configuration";
  ASSIGN_OR_RETURN(std::string text, FetchUrl(config_url, ca_file));
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return InvalidArgument(config_url + ": not a JSON object");
  if (!doc.contains("issuer") || !doc["issuer"].is_string() || doc["issuer"] != issuer) {
    return InvalidArgument(
        config_url + ": issuer " +
        (doc.contains("issuer") ? doc["issuer"].dump() : std::string("missing")) + " is not '" +
        issuer + "'");
  }
  if (!doc.contains("jwks_uri") || !doc["jwks_uri"].is_string()) {
    return InvalidArgument(config_url + ": jwks_uri missing");
  }
  return FetchUrl(doc["jwks_uri"].get<std::string>(), ca_file);
}

Result<std::shared_ptr<DiscoveredOidcVerifier>> DiscoveredOidcVerifier::Create(
    OidcConfig config, std::string ca_file, int64_t min_refresh_seconds) {
  std::shared_ptr<DiscoveredOidcVerifier> v(
      new DiscoveredOidcVerifier(std::move(config), std::move(ca_file), min_refresh_seconds));
  RETURN_IF_ERROR(v->Refresh());
  return v;
}

Status DiscoveredOidcVerifier::Refresh() {
  OidcConfig c = config_;
  ASSIGN_OR_RETURN(c.jwks_json, DiscoverJwks(c.issuer, ca_file_));
  ASSIGN_OR_RETURN(OidcVerifier verifier, OidcVerifier::Create(c));
  std::lock_guard<std::mutex> lock(mu_);
  verifier_ = std::make_shared<OidcVerifier>(std::move(verifier));
  ++refreshes_;
  return Status::Ok();
}

int64_t DiscoveredOidcVerifier::refreshes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refreshes_;
}

Result<OidcIdentity> DiscoveredOidcVerifier::Verify(const std::string& jwt,
                                                    int64_t now_epoch_seconds) {
  std::shared_ptr<OidcVerifier> v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    v = verifier_;
  }
  auto id = v->Verify(jwt, now_epoch_seconds);
  if (id.ok() || id.status().message().rfind("unknown key id", 0) != 0) return id;
  {
    // A key the server has not seen: the provider may have rotated. Ask again, not too often.
    std::lock_guard<std::mutex> lock(mu_);
    if (last_refresh_ != 0 && now_epoch_seconds - last_refresh_ < min_refresh_seconds_) return id;
    last_refresh_ = now_epoch_seconds;
  }
  Status refreshed = Refresh();
  if (!refreshed.ok()) return id;  // keep the old keys; the provider may be down for a moment
  {
    std::lock_guard<std::mutex> lock(mu_);
    v = verifier_;
  }
  return v->Verify(jwt, now_epoch_seconds);
}

}  // namespace fabrica
