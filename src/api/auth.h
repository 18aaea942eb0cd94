// Authentication and authorization for the API.
//
// Authentication: static bearer tokens from the auth file, OIDC ID tokens (RS256/ES256 JWTs
// checked against a JWKS file: issuer, audience, expiry, username and groups claims; see
// oidc.h), and node tokens issued by the server (each bound to one node name; see ApiServer).
// Authorization: role bindings from the same file. Roles:
//   platform-admin          everything;
//   tenant-admin (tenant)   everything on the tenant's workloads except writing their status
//                           (the scheduler's decision), which it may read; read its Tenant,
//                           queues, nodes;
//   tenant-member (tenant)  the same as tenant-admin for now (queue quotas will differ);
//   viewer [tenant]         read-only: the tenant's workloads, or with no tenant the whole fleet;
//   node (system:node:N)    its own Node and Lease; list/watch the workloads assigned to it and
//                           update their status (phase and reports; never where they run).
// Workload status is written only by the platform admin and the assigned node (the controller
// writes it to the store directly).
// Of other tenants' use of a node a tenant sees only that capacity is taken: Node objects carry
// no workload names, and workloads of other tenants are never readable.
// Immutable after loading; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/oidc.h"
#include "api/oidc_discovery.h"
#include "core/status.h"

namespace fabrica {

struct Principal {
  std::string user;
  std::vector<std::string> groups;
  std::string node;  // set for node identities
};

enum class Verb { kGet, kList, kWatch, kCreate, kUpdate, kPatch, kDelete };
const char* VerbName(Verb v);

struct RoleBinding {
  std::string role;    // platform-admin | tenant-admin | tenant-member | viewer
  std::string tenant;  // for tenant roles (and an optional scope for viewer)
  std::string user;    // one of user or group
  std::string group;
};

class Authorizer {
 public:
  // Parses the auth file: `tokens: [{token, user, groups}]`, `bindings: [{role, tenant, user |
  // group}]` and optionally `oidc: {issuer, audience, jwksFile | discovery: true, caFile,
  // usernameClaim, usernamePrefix, groupsClaim}` (files relative to the auth file's folder unless
  // absolute; with discovery the keys come from the issuer and are refreshed on rotation, see
  // oidc_discovery.h). Unknown fields and roles are errors naming file, line and field.
  static Result<Authorizer> Parse(const std::string& yaml, const std::string& source);

  // The principal of a static token or a valid OIDC ID token (at `now_epoch_seconds`), or
  // kUnauthenticated saying why.
  Result<Principal> Authenticate(const std::string& token, int64_t now_epoch_seconds = 0) const;

  // OK, or kPermissionDenied naming user, verb and resource. `ns` is the tenant of a namespaced
  // resource ("" for cluster-scoped ones and for lists across all namespaces).
  Status Check(const Principal& p, Verb verb, const std::string& resource, const std::string& ns,
               const std::string& name, bool status_subresource = false) const;

  // The tenants whose workloads `p` may read (empty with *all = true for fleet-wide readers).
  std::vector<std::string> ReadableTenants(const Principal& p, bool* all) const;

  void AddToken(const std::string& token, Principal p) { tokens_[token] = std::move(p); }

 private:
  bool HasRole(const Principal& p, const std::string& role, const std::string& tenant) const;
  std::vector<std::string> ReadableTenantsOf(const Principal& p) const {
    bool all;
    return ReadableTenants(p, &all);
  }

  std::map<std::string, Principal> tokens_;
  std::shared_ptr<OidcVerifier> oidc_;
  std::shared_ptr<DiscoveredOidcVerifier> discovered_oidc_;  // keys from the issuer, refreshed
  std::vector<RoleBinding> bindings_;
};

}  // namespace fabrica
