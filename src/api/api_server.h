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

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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
  // Whether Handle may block on `req` for longer than a read takes: writes wait for their
  // group commit. For HttpServerOptions::offload.
  // So do reads that go through every workload (a queue's pending workloads, the nodes'
  // allocations).
  static bool MayBlock(const HttpRequest& req) {
    return (req.method != "GET" && req.method != "HEAD") ||
           req.path.find("/pendingworkloads") != std::string::npos ||
           req.path.find("/nodeallocations") != std::string::npos;
  }

  // Routes served by another component (metering): called for every request outside /healthz
  // with the caller's authentication result and the tenants it may read (`all` for fleet-wide
  // readers); it returns nothing for paths that are not its own. Set before serving.
  using Extension =
      std::function<std::optional<HttpResponse>(const HttpRequest&, const Result<Principal>&,
                                                const std::vector<std::string>& tenants, bool all)>;
  void SetExtension(Extension extension);
  // More Prometheus text appended to /metrics. Set before serving.
  void SetMetricsExtra(std::function<std::string()> extra);
  // The grace period of an eviction (POST .../workloads/W/eviction) that names none: the
  // scheduler's preemption grace. Set before serving.
  void SetEvictionGrace(int64_t ms);

  // A new bearer token whose holder acts as node `node` (and only as it). Persisted in the
  // store, so agents keep working across server restarts.
  Result<std::string> IssueNodeToken(const std::string& node);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabrica
