// JSON replies of the server's extension routes (health, agents): a body, or a Kubernetes-style
// Status object for an error. Include only in .cc files that already use nlohmann/json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/http_server.h"
#include "core/status.h"

namespace fabrica::replies {

inline HttpResponse Json(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

inline HttpResponse Error(int status, const std::string& message) {
  return Json(status, {{"kind", "Status"},
                       {"apiVersion", "v1"},
                       {"status", "Failure"},
                       {"code", status},
                       {"message", message}});
}

inline HttpResponse Error(const Status& st) {
  return Error(HttpStatusFor(st.code()), st.message());
}

}  // namespace fabrica::replies
