// AgentService: the server's routes for node agents beyond the resource API.
//
//   POST /apis/fabrica.dev/v1/nodes/N/token
//       A platform admin issues a bearer token that acts as node N and only as it
//       (`fabctl nodes token N`); the previous token of N stops working.
//   POST /apis/fabrica.dev/v1/namespaces/T/workloads/W/log?pod=P&offset=O
//       The node running pod P of workload W appends the pod's output from byte O of its log
//       (the agent's own file). A chunk that starts before what the server has is trimmed, one
//       that starts after it is refused (409, with the server's size, so the agent resends).
//   GET  /apis/fabrica.dev/v1/namespaces/T/workloads/W/log[?pod=P][&offset=O][&tailLines=N]
//       The pod's log as text, for readers of tenant T (`fabctl logs W [-f]`); the response's
//       X-Fabrica-Log-Size header is the size so far, the offset to ask from next.
//
// Logs live under `log_dir/T/W/P.log`, at most `max_log_bytes` a pod (later output is dropped
// with one marker line). Thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "api/api_server.h"
#include "store/store.h"

namespace fabrica {

struct AgentServiceOptions {
  std::string log_dir;
  int64_t max_log_bytes = 8 << 20;
};

class AgentService {
 public:
  // `issue_token(node)` makes a node token (ApiServer::IssueNodeToken).
  AgentService(Store& store, Authorizer& auth,
               std::function<Result<std::string>(const std::string&)> issue_token,
               AgentServiceOptions options);

  ApiServer::Extension Routes();

 private:
  std::optional<HttpResponse> Serve(const HttpRequest& req, const Result<Principal>& principal,
                                    const std::vector<std::string>& tenants, bool all);

  Store& store_;
  Authorizer& auth_;
  std::function<Result<std::string>(const std::string&)> issue_token_;
  AgentServiceOptions options_;
  std::mutex mu_;  // serialises appends
};

}  // namespace fabrica
