// JSON replies of the server's routes (the resource API's and the extension routes': health,
// agents, meter): a body, or a Kubernetes-style Status object. Include only in .cc files that
// already use nlohmann/json.
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

// The Status object of the resource API's replies and of the extension routes' errors:
// `code` and `message` too, which OpenCost-style clients of the meter's routes read.
inline nlohmann::json StatusBody(int status, const std::string& message) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", nlohmann::json::object()},
          {"status", status < 300 ? "Success" : "Failure"},
          {"message", message},
          {"reason", HttpReasonFor(status)},
          {"code", status}};
}

inline HttpResponse Error(int status, const std::string& message) {
  return Json(status, StatusBody(status, message));
}

inline HttpResponse Error(const Status& st) {
  return Error(HttpStatusFor(st.code()), st.message());
}

}  // namespace fabrica::replies
