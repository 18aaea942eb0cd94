#include "api/auth.h"

#include <algorithm>

#include "core/yaml_reader.h"

namespace fabrica {

const char* VerbName(Verb v) {
  switch (v) {
    case Verb::kGet:
      return "get";
    case Verb::kList:
      return "list";
    case Verb::kWatch:
      return "watch";
    case Verb::kCreate:
      return "create";
    case Verb::kUpdate:
      return "update";
    case Verb::kPatch:
      return "patch";
    case Verb::kDelete:
      return "delete";
  }
  return "?";
}

Result<Authorizer> Authorizer::Parse(const std::string& yaml, const std::string& source) {
  ASSIGN_OR_RETURN(Doc doc, LoadYaml(yaml, source));
  YamlMap top(doc, "", source);
  RETURN_IF_ERROR(top.CheckIsMap());
  Authorizer a;
  Doc tokens = top.Raw("tokens");
  if (tokens && !tokens.IsNull()) {
    if (!tokens.IsSequence()) return top.Error("tokens", "expected a list");
    for (size_t i = 0; i < tokens.size(); ++i) {
      YamlMap t = top.Child(tokens[i], "tokens[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(t.CheckIsMap());
      ASSIGN_OR_RETURN(std::string token, t.String("token"));
      if (token.size() < 16) return t.Error("token", "a token needs at least 16 characters");
      Principal p;
      ASSIGN_OR_RETURN(p.user, t.String("user"));
      ASSIGN_OR_RETURN(p.groups, t.StringList("groups"));
      RETURN_IF_ERROR(t.Finish());
      if (p.user.rfind("system:", 0) == 0) return t.Error("user", "system: names are reserved");
      if (!a.tokens_.emplace(token, p).second) return t.Error("token", "duplicate token");
    }
  }
  Doc bindings = top.Raw("bindings");
  if (bindings && !bindings.IsNull()) {
    if (!bindings.IsSequence()) return top.Error("bindings", "expected a list");
    for (size_t i = 0; i < bindings.size(); ++i) {
      YamlMap b = top.Child(bindings[i], "bindings[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(b.CheckIsMap());
      RoleBinding rb;
      ASSIGN_OR_RETURN(rb.role, b.String("role"));
      ASSIGN_OR_RETURN(rb.tenant, b.String("tenant", ""));
      ASSIGN_OR_RETURN(rb.user, b.String("user", ""));
      ASSIGN_OR_RETURN(rb.group, b.String("group", ""));
      RETURN_IF_ERROR(b.Finish());
      if (rb.role != "platform-admin" && rb.role != "tenant-admin" && rb.role != "tenant-member" &&
          rb.role != "viewer") {
        return b.Error("role", "unknown role '" + rb.role +
                                   "' (platform-admin, tenant-admin, tenant-member, viewer)");
      }
      if ((rb.role == "tenant-admin" || rb.role == "tenant-member") && rb.tenant.empty()) {
        return b.Error("tenant", "required for role " + rb.role);
      }
      if (rb.user.empty() == rb.group.empty()) return b.Error("user", "give one of user or group");
      a.bindings_.push_back(rb);
    }
  }
  if (top.Has("oidc")) {
    YamlMap o = top.Child("oidc");
    RETURN_IF_ERROR(o.CheckIsMap());
    OidcConfig config;
    ASSIGN_OR_RETURN(config.issuer, o.String("issuer"));
    ASSIGN_OR_RETURN(config.audience, o.String("audience"));
    ASSIGN_OR_RETURN(std::string jwks, o.String("jwksFile", ""));
    ASSIGN_OR_RETURN(bool discovery, o.Bool("discovery", false));
    ASSIGN_OR_RETURN(std::string ca_file, o.String("caFile", ""));
    ASSIGN_OR_RETURN(config.username_claim, o.String("usernameClaim", "sub"));
    ASSIGN_OR_RETURN(config.username_prefix, o.String("usernamePrefix", ""));
    ASSIGN_OR_RETURN(config.groups_claim, o.String("groupsClaim", "groups"));
    RETURN_IF_ERROR(o.Finish());
    RETURN_IF_ERROR(o.Unknowns());  // (before keys are fetched with what was read)
    auto relative = [&](std::string path) {
      if (!path.empty() && path[0] != '/' && source.find('/') != std::string::npos) {
        path = source.substr(0, source.rfind('/') + 1) + path;
      }
      return path;
    };
    if (discovery == !jwks.empty()) {
      return o.Error("jwksFile",
                     "give either jwksFile or discovery: true (keys from the "
                     "issuer's /.well-known/openid-configuration)");
    }
    if (discovery) {
      auto verifier = DiscoveredOidcVerifier::Create(config, relative(ca_file));
      if (!verifier.ok()) return o.Error("discovery", verifier.status().message());
      a.discovered_oidc_ = *verifier;
      RETURN_IF_ERROR(top.Finish());
      return a;
    }
    jwks = relative(jwks);
    auto text = FetchJwksFromFile(jwks);
    if (!text.ok()) return o.Error("jwksFile", text.status().message());
    config.jwks_json = *text;
    auto verifier = OidcVerifier::Create(config);
    if (!verifier.ok()) return o.Error("jwksFile", verifier.status().message());
    a.oidc_ = std::make_shared<OidcVerifier>(std::move(verifier).value());
  }
  RETURN_IF_ERROR(top.Finish());
  return a;
}

Result<Principal> Authorizer::Authenticate(const std::string& token,
                                           int64_t now_epoch_seconds) const {
  auto it = tokens_.find(token);
  if (it != tokens_.end()) return it->second;
  // A JWT has two dots; anything else is an unknown static token.
  if ((!oidc_ && !discovered_oidc_) || std::count(token.begin(), token.end(), '.') != 2) {
    return Status(StatusCode::kUnauthenticated, "invalid bearer token");
  }
  auto id = oidc_ ? oidc_->Verify(token, now_epoch_seconds)
                  : discovered_oidc_->Verify(token, now_epoch_seconds);
  if (!id.ok())
    return Status(StatusCode::kUnauthenticated, "OIDC token rejected: " + id.status().message());
  if (id->username.rfind("system:", 0) == 0) {
    return Status(StatusCode::kUnauthenticated, "OIDC token names a reserved system: user");
  }
  Principal p;
  p.user = id->username;
  p.groups = id->groups;
  return p;
}

bool Authorizer::HasRole(const Principal& p, const std::string& role,
                         const std::string& tenant) const {
  for (const RoleBinding& b : bindings_) {
    if (b.role != role) continue;
    if (!tenant.empty() && b.tenant != tenant) continue;
    if (tenant.empty() && !b.tenant.empty()) continue;
    if (!b.user.empty() && b.user == p.user) return true;
    if (!b.group.empty() &&
        std::find(p.groups.begin(), p.groups.end(), b.group) != p.groups.end()) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> Authorizer::ReadableTenants(const Principal& p, bool* all) const {
  *all = p.node.empty() && (HasRole(p, "platform-admin", "") || HasRole(p, "viewer", ""));
  std::vector<std::string> out;
  for (const RoleBinding& b : bindings_) {
    if (b.tenant.empty()) continue;
    const bool mine = (!b.user.empty() && b.user == p.user) ||
                      (!b.group.empty() &&
                       std::find(p.groups.begin(), p.groups.end(), b.group) != p.groups.end());
    if (mine && std::find(out.begin(), out.end(), b.tenant) == out.end()) out.push_back(b.tenant);
  }
  return out;
}

Status Authorizer::Check(const Principal& p, Verb verb, const std::string& resource,
                         const std::string& ns, const std::string& name,
                         bool status_subresource) const {
  const bool read = verb == Verb::kGet || verb == Verb::kList || verb == Verb::kWatch;
  auto deny = [&]() {
    std::string what = resource + (name.empty() ? "" : "/" + name);
    if (!ns.empty()) what += " in tenant " + ns;
    return Status(StatusCode::kPermissionDenied,
                  "user '" + p.user + "' may not " + VerbName(verb) + " " + what);
  };
  if (!p.node.empty()) {
    // A node identity: its own Node and Lease; workloads only through the assigned-node filter
    // (enforced by the caller) and their status.
    if ((resource == "nodes" || resource == "leases") && name == p.node && verb != Verb::kDelete) {
      return Status::Ok();
    }
    if (resource == "nodes" && (verb == Verb::kList || verb == Verb::kWatch)) return deny();
    if (resource == "workloads" && (verb == Verb::kList || verb == Verb::kWatch))
      return Status::Ok();
    if (resource == "workloads" && status_subresource &&
        (verb == Verb::kGet || verb == Verb::kUpdate || verb == Verb::kPatch)) {
      return Status::Ok();  // the caller checks the workload is assigned to this node
    }
    if (resource == "tenants" && read) return Status::Ok();  // trust levels for isolation
    return deny();
  }
  if (HasRole(p, "platform-admin", "")) return Status::Ok();
  if (read && HasRole(p, "viewer", "")) return Status::Ok();
  if (resource == "workloads") {
    // A list or watch across tenants shows a tenant user only the tenants it may read (the
    // server filters the items); a get, write or delete always names one tenant.
    if (ns.empty()) {
      return (verb == Verb::kList || verb == Verb::kWatch) && !ReadableTenantsOf(p).empty()
                 ? Status::Ok()
                 : deny();
    }
    // Status carries the scheduler's decision (phase, assignments): a tenant who could write it
    // would place its own workloads on any GPU, past the scheduler and its isolation rules. Only
    // the platform admin and the assigned node write it; the controller writes to the store.
    if (status_subresource && !read) return deny();
    if (HasRole(p, "tenant-admin", ns) || HasRole(p, "tenant-member", ns)) return Status::Ok();
    if (read && HasRole(p, "viewer", ns)) return Status::Ok();
    return deny();
  }
  // Cluster-scoped resources: tenants may read the fleet's capacity (nodes, queues) and their own
  // Tenant object.
  const bool any_tenant_role = !ReadableTenantsOf(p).empty();
  if (read && any_tenant_role &&
      (resource == "nodes" || resource == "queues" || resource == "priorityclasses" ||
       resource == "resourceflavors"))
    return Status::Ok();
  if (read && resource == "tenants") {
    auto mine = ReadableTenantsOf(p);
    if (verb == Verb::kGet && std::find(mine.begin(), mine.end(), name) != mine.end()) {
      return Status::Ok();
    }
  }
  return deny();
}

}  // namespace fabrica
