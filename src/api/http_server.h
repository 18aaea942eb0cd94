// HttpServer: Fabrica's HTTPS (or, for tests that ask for it, plain HTTP) server on Boost.Beast.
//
// Connections are served asynchronously on a small pool of threads, so thousands of idle watch
// streams cost no thread each. A Handler turns one request into one response and may block
// briefly (a durable store write waits for its group commit); such requests can be offloaded to
// a second pool (HttpServerOptions::offload) so that they hold no I/O thread. For a streaming
// response (watch), the handler returns a StreamSource instead of a body: the server sends the
// headers with chunked transfer encoding, then the source pushes chunks from any thread whenever it
// has data; the server serialises them on the connection and tells the source when the client has
// gone.
//
// Limits enforced before the handler runs: header size, a body limit (413 with a JSON Status body
// when exceeded), idle timeouts. Thread-safe: Start/Stop from one thread; handlers run on pool
// threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace fabrica {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // path and query as sent
  std::string path;                            // percent-decoded path, without the query
  std::map<std::string, std::string> query;    // percent-decoded query parameters
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string peer;  // "ip:port"

  // The header's value or "".
  std::string Header(const std::string& lower_name) const;
};

// A source of chunks for a streaming response. The server calls Start once with a `write`
// function (thread-safe, non-blocking: it queues the chunk; returns false once the client has
// gone) and a `finish` function that ends the response. The server calls Cancel when the client
// disconnects or the server stops; after Cancel returns, `write` must not be called again.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  virtual void Start(std::function<bool(std::string)> write, std::function<void()> finish) = 0;
  virtual void Cancel() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<StreamSource> stream;  // set for a streaming response; body is then ignored
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string listen = "127.0.0.1:8443";  // host:port; port 0 picks a free port
  bool tls = true;
  std::string cert_file;  // PEM server certificate chain (required when tls)
  std::string key_file;   // PEM private key (required when tls)
  size_t max_body_bytes = 3 * 1024 * 1024;
  int threads = 4;  // I/O threads; handlers run on them unless offloaded
  // Requests for which `offload` returns true have their handler run on a separate pool of
  // `offload_threads` threads, so that handlers which block (a durable write waiting for its
  // group commit) hold no I/O thread and as many of them can wait together as there are
  // clients. The others run inline on the I/O thread, without a thread switch. Off when
  // `offload` is empty or offload_threads is 0.
  std::function<bool(const HttpRequest&)> offload;
  int offload_threads = 0;
  int idle_timeout_seconds = 300;  // for non-streaming connections
  // Called after each request with its method, status and latency, for metrics.
  std::function<void(const HttpRequest&, int status, double seconds)> observer;
};

class HttpServer {
 public:
  // REQUIRES: handler outlives the server.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // stops

  // Binds and starts serving. Fails naming the address (in use, bad host) or the TLS files.
  Status Start();
  // The port actually bound (useful with port 0).
  int port() const;
  // Stops accepting, cancels streams, closes connections, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes sure `dir` holds ca.crt, ca.key, server.crt and server.key: a self-signed CA (ECDSA
// P-256) and a server certificate it signs for `hosts` (DNS names and IP addresses as subject
// alternative names), valid for ten years. Existing files are kept. Keys are written mode 0600.
Status EnsureServerCertificates(const std::string& dir, const std::vector<std::string>& hosts);

}  // namespace fabrica
