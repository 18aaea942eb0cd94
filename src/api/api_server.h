// ApiServer: Fabrica's Kubernetes-style REST API over a Store.
//
// Resources of group fabrica.dev/v1: Tenant, Queue, Node, Lease (cluster-scoped) and Workload
// (namespaced: a workload lives in its tenant's namespace). Verbs: create (POST), get, list (label
// selectors, limit/continue pagination), watch (?watch=true, resumable from resourceVersion),
// update (PUT, conditional on metadata.resourceVersion: stale writes get 409), merge patch
// (PATCH, application/merge-patch+json) and delete; status is written through the /status
// subresource. Objects are validated with the same parsers as the manifests, so errors name the
// field; invalid input changes nothing stored.
//
// The server stamps what it owns in its own clock: creationTimestamp, uid, lease renewTime (on
// receipt). Node identities get tokens bound to their node name (IssueNodeToken).
// Handle may be called from many threads at once.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "api/auth.h"
#include "api/http_server.h"
#include "control/clock.h"
#include "store/store.h"

namespace fabrica {

class Metrics;

class ApiServer {
 public:
  // REQUIRES: store, auth, clock and metrics (may be null) outlive the server.
  ApiServer(Store& store, Authorizer& auth, const Clock& clock, Metrics* metrics);
  ~ApiServer();

  HttpResponse Handle(const HttpRequest& req);

  // A new bearer token whose holder acts as node `node` (and only as it). Persisted in the
  // store, so agents keep working across server restarts.
  Result<std::string> IssueNodeToken(const std::string& node);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabrica
