// The Fabrica API as the load benchmarks run it, in their own process: a SQLite store in a
// fresh temporary directory, HTTPS with a generated CA on a loopback port, one admin token.
// Reads are served on the 2 I/O threads; writes, which wait for their group commit, on a pool
// large enough that every waiting writer joins the next commit.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/api_server.h"
#include "api/http_server.h"
#include "client/http_client.h"
#include "control/clock.h"
#include "store/store.h"

namespace fabrica::bench {

class BenchServer {
 public:
  // Starts it; on failure says why on stderr and ok() is false.
  BenchServer(const char* name, int offload_threads, Metrics* metrics = nullptr) {
    std::string tmpl = std::string("/tmp/") + name + "-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    if (Status certs = EnsureServerCertificates(dir_, {"localhost", "127.0.0.1"}); !certs.ok()) {
      std::fprintf(stderr, "certificates: %s\n", certs.message().c_str());
      return;
    }
    auto auth = Authorizer::Parse("tokens: [{token: " + std::string(kToken) +
                                      ", user: admin}]\n"
                                      "bindings: [{role: platform-admin, user: admin}]\n",
                                  "auth");
    auto store = OpenSqliteStore(dir_ + "/store.db");
    if (!auth.ok() || !store.ok()) {
      std::fprintf(stderr, "setup failed\n");
      return;
    }
    auth_ = std::make_unique<Authorizer>(std::move(*auth));
    store_ = std::move(*store);
    api_ = std::make_unique<ApiServer>(*store_, *auth_, clock_, metrics);
    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.threads = 2;
    options.offload = ApiServer::MayBlock;
    options.offload_threads = offload_threads;
    options.cert_file = dir_ + "/server.crt";
    options.key_file = dir_ + "/server.key";
    server_ = std::make_unique<HttpServer>(
        options, [this](const HttpRequest& r) { return api_->Handle(r); });
    if (Status st = server_->Start(); !st.ok()) {
      std::fprintf(stderr, "server: %s\n", st.message().c_str());
      server_.reset();
      return;
    }
    client_.server = "https://127.0.0.1:" + std::to_string(server_->port());
    client_.ca_file = dir_ + "/ca.crt";
    client_.token = kToken;
  }
  ~BenchServer() {
    Stop();
    const std::string cleanup = "rm -rf '" + dir_ + "'";
    (void)std::system(cleanup.c_str());
  }

  bool ok() const { return server_ != nullptr; }
  void Stop() {
    if (server_) server_->Stop();
  }
  // Client settings for the admin: server URL, CA and token.
  const ClientOptions& client() const { return client_; }
  const std::string& dir() const { return dir_; }
  Store& store() { return *store_; }
  const Clock& clock() const { return clock_; }

 private:
  static constexpr const char* kToken = "bench-admin-token-0123456789";
  std::string dir_;
  RealClock clock_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpServer> server_;
  ClientOptions client_;
};

}  // namespace fabrica::bench
