// HttpClient: the one HTTPS client Fabrica's tools use (fabctl, the agents, end-to-end tests),
// so no second copy of the wire handling exists. Synchronous, one connection kept alive and
// re-opened when the server closed it. Not thread-safe: use one client per thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct ClientOptions {
  std::string server = "https://127.0.0.1:8443";  // https://host:port or http://host:port
  std::string token;    // sent as "Authorization: Bearer <token>" when not empty
  std::string ca_file;  // PEM CA to verify the server against; empty: the system's trust store
  int timeout_seconds = 30;
};

struct ClientResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  // The server's warnings (Warning headers of code 299, as Kubernetes sends admission
  // warnings), their text only; a client prints each as "Warning: TEXT", as kubectl does.
  std::vector<std::string> warnings;
};

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options);
  ~HttpClient();

  // Sends one request; a transport failure (connect, TLS verification, timeout) is a non-OK
  // Status of code kUnavailable naming the server; any HTTP status is a successful Result.
  Result<ClientResponse> Do(const std::string& method, const std::string& path_and_query,
                            const std::string& body = "",
                            const std::string& content_type = "application/json");

  // A streaming GET (watch): calls `on_line` with each newline-terminated line of the chunked
  // body until the server ends the response, `on_line` returns false, or the timeout since the
  // last byte passes. Returns the final HTTP status, or a non-OK Status on transport failure.
  Result<int> Stream(const std::string& path_and_query,
                     const std::function<bool(const std::string& line)>& on_line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabrica
