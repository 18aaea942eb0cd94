// Tests for src/api/http_server and src/client/http_client: TLS with generated certificates,
// plain HTTP, request decoding, limits, keep-alive, streaming, disconnects, Stop and concurrency;
// and for src/client/jsonpath, the templates fabctl's -o jsonpath and --sort-by read.
//
// Every server listens on 127.0.0.1 port 0. Raw POSIX sockets stand in for misbehaving clients
// (garbage bytes, vanishing mid-stream), so this file needs no Beast of its own.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/http_server.h"
#include "client/http_client.h"
#include "client/jsonpath.h"
#include "test_util.h"

namespace fabrica {
namespace {

using test::ReadFile;
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("http_test") {}
};

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Waits up to `limit` for `pred`; returns its final value.
template <class Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

HttpServerOptions PlainOptions() {
  HttpServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls = false;
  o.threads = 4;
  return o;
}

HttpServerOptions TlsOptions(const TempDir& certs) {
  HttpServerOptions o = PlainOptions();
  o.tls = true;
  o.cert_file = certs.File("server.crt");
  o.key_file = certs.File("server.key");
  return o;
}

ClientOptions PlainClient(int port) {
  ClientOptions c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  c.timeout_seconds = 10;
  return c;
}

ClientOptions TlsClient(const std::string& host, int port, const std::string& ca_file) {
  ClientOptions c;
  c.server = "https://" + host + ":" + std::to_string(port);
  c.ca_file = ca_file;
  c.timeout_seconds = 10;
  return c;
}

// Echoes the request back as text: method, path, peer and body.
HttpResponse Echo(const HttpRequest& req) {
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = req.method + " " + req.path + " " + req.body;
  r.headers.emplace_back("X-Peer", req.peer);
  return r;
}

// A raw TCP connection to 127.0.0.1:port with a receive timeout.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd_ >= 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawSocket() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& data) {
    CHECK(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size()));
  }
  // Reads until `needle` appears, EOF or the timeout; returns what was read.
  std::string ReadUntil(const std::string& needle) {
    std::string out;
    char buf[4096];
    while (out.find(needle) == std::string::npos) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

// A StreamSource that writes `chunks` from its own thread (kPause: waits a moment instead),
// then finishes, or, with `forever`, keeps writing a line every few milliseconds until
// cancelled. Counts Start and Cancel calls.
constexpr const char* kPause = "<pause>";

class LineSource : public StreamSource {
 public:
  LineSource(std::vector<std::string> chunks, bool forever)
      : chunks_(std::move(chunks)), forever_(forever) {}
  ~LineSource() override { Join(); }

  void Start(std::function<bool(std::string)> write, std::function<void()> finish) override {
    started_++;
    saved_write_ = write;
    thread_ = std::thread([this, write = std::move(write), finish = std::move(finish)] {
      for (const std::string& chunk : chunks_) {
        if (chunk == kPause) {
          std::this_thread::sleep_for(200ms);
        } else if (!write(chunk)) {
          return;
        }
      }
      if (!forever_) return finish();
      for (int i = 0; !stop_; ++i) {
        if (!write("tick " + std::to_string(i) + "\n")) return;  // the client has gone
        std::this_thread::sleep_for(3ms);
      }
    });
  }
  void Cancel() override {
    cancelled_++;
    stop_ = true;
    Join();
  }

  std::atomic<int> started_{0};
  std::atomic<int> cancelled_{0};
  // A copy of `write`, for checking that it fails safely once the stream is over.
  std::function<bool(std::string)> saved_write_;

 private:
  void Join() {
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }
  std::vector<std::string> chunks_;
  bool forever_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Serves "/stream" with LineSources it remembers, anything else with Echo.
class StreamingHandler {
 public:
  explicit StreamingHandler(std::vector<std::string> chunks, bool forever)
      : chunks_(std::move(chunks)), forever_(forever) {}
  HttpResponse operator()(const HttpRequest& req) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      peers_.insert(req.peer);
    }
    if (req.path != "/stream") return Echo(req);
    auto source = std::make_shared<LineSource>(chunks_, forever_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      sources_.push_back(source);
    }
    HttpResponse r;
    r.content_type = "application/x-ndjson";
    r.stream = source;
    return r;
  }
  std::vector<std::shared_ptr<LineSource>> sources() {
    std::lock_guard<std::mutex> lock(mu_);
    return sources_;
  }
  std::set<std::string> peers() {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_;
  }

 private:
  std::vector<std::string> chunks_;
  bool forever_;
  std::mutex mu_;
  std::vector<std::shared_ptr<LineSource>> sources_;
  std::set<std::string> peers_;
};

// --- Certificates and TLS ------------------------------------------------------------------

TEST(CertificatesTest, GeneratesFilesWithPrivateKeysAndKeepsThem) {
  TempDir dir;
  ASSERT_TRUE(EnsureServerCertificates(dir.path(), {"localhost", "127.0.0.1"}).ok());
  for (const char* name : {"ca.crt", "ca.key", "server.crt", "server.key"}) {
    EXPECT_TRUE(fs::exists(dir.File(name))) << name;
  }
  for (const char* key : {"ca.key", "server.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.File(key).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  EXPECT_NE(ReadFile(dir.File("server.key")).find("BEGIN PRIVATE KEY"), std::string::npos);
  std::string ca = ReadFile(dir.File("ca.crt"));
  std::string server = ReadFile(dir.File("server.crt"));
  ASSERT_TRUE(EnsureServerCertificates(dir.path(), {"other.example"}).ok());
  EXPECT_EQ(ReadFile(dir.File("ca.crt")), ca);
  EXPECT_EQ(ReadFile(dir.File("server.crt")), server);

  // A new server certificate is signed by the existing CA.
  fs::remove(dir.File("server.crt"));
  fs::remove(dir.File("server.key"));
  ASSERT_TRUE(EnsureServerCertificates(dir.path(), {"127.0.0.1"}).ok());
  EXPECT_EQ(ReadFile(dir.File("ca.crt")), ca);
  EXPECT_NE(ReadFile(dir.File("server.crt")), server);

  EXPECT_FALSE(EnsureServerCertificates(dir.path(), {}).ok());
}

TEST(HttpTest, TlsRoundTripVerifiesIpAndDnsNames) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"localhost", "127.0.0.1"}).ok());
  HttpServer server(TlsOptions(certs), Echo);
  ASSERT_TRUE(server.Start().ok());

  for (const char* host : {"127.0.0.1", "localhost"}) {
    HttpClient client(TlsClient(host, server.port(), certs.File("ca.crt")));
    auto r = client.Do("POST", "/v1/things", "hello");
    ASSERT_TRUE(r.ok()) << host << ": " << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->content_type, "text/plain");
    EXPECT_EQ(r->body, "POST /v1/things hello");
  }
}

TEST(HttpTest, TlsClientRejectsCertificateFromAnotherCa) {
  TempDir server_certs, other_certs;
  ASSERT_TRUE(EnsureServerCertificates(server_certs.path(), {"127.0.0.1"}).ok());
  ASSERT_TRUE(EnsureServerCertificates(other_certs.path(), {"127.0.0.1"}).ok());
  HttpServer server(TlsOptions(server_certs), Echo);
  ASSERT_TRUE(server.Start().ok());

  HttpClient client(TlsClient("127.0.0.1", server.port(), other_certs.File("ca.crt")));
  auto r = client.Do("GET", "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("certificate"), std::string::npos) << r.status().message();
}

TEST(HttpTest, TlsClientRejectsCertificateForAnotherHost) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"fabrica.example", "10.1.2.3"}).ok());
  HttpServer server(TlsOptions(certs), Echo);
  ASSERT_TRUE(server.Start().ok());

  for (const char* host : {"127.0.0.1", "localhost"}) {
    HttpClient client(TlsClient(host, server.port(), certs.File("ca.crt")));
    auto r = client.Do("GET", "/");
    ASSERT_FALSE(r.ok()) << host;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  }
}

TEST(HttpTest, StartFailsNamingTheProblem) {
  HttpServerOptions o = PlainOptions();
  o.listen = "127.0.0.1:0";
  HttpServer first(o, Echo);
  ASSERT_TRUE(first.Start().ok());

  o.listen = "127.0.0.1:" + std::to_string(first.port());
  HttpServer in_use(o, Echo);
  Status s = in_use.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(o.listen), std::string::npos) << s.ToString();

  HttpServerOptions t = PlainOptions();
  t.tls = true;
  t.cert_file = "/nonexistent/server.crt";
  t.key_file = "/nonexistent/server.key";
  HttpServer bad_tls(t, Echo);
  s = bad_tls.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/server.crt"), std::string::npos) << s.ToString();

  HttpClient no_ca(TlsClient("127.0.0.1", 1, ""));
  EXPECT_FALSE(no_ca.Do("GET", "/").ok());
}

// --- Plain HTTP, decoding, limits --------------------------------------------------------------

TEST(HttpTest, PlainRoundTripWithHeadersAndObserver) {
  std::mutex mu;
  std::vector<std::pair<std::string, int>> observed;
  HttpServerOptions o = PlainOptions();
  o.observer = [&](const HttpRequest& req, int status, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    observed.emplace_back(req.method + " " + req.path, status);
    EXPECT_GE(seconds, 0.0);
  };
  HttpRequest seen;
  HttpServer server(o, [&](const HttpRequest& req) {
    seen = req;
    HttpResponse r;
    r.status = req.path == "/missing" ? 404 : 201;
    r.body = R"({"ok":true})";
    return r;
  });
  ASSERT_TRUE(server.Start().ok());

  ClientOptions c = PlainClient(server.port());
  c.token = "s3cret";
  HttpClient client(c);
  auto r = client.Do("PUT", "/v1/x", "{\"a\":1}", "application/yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->content_type, "application/json");
  EXPECT_EQ(r->body, R"({"ok":true})");
  EXPECT_EQ(seen.method, "PUT");
  EXPECT_EQ(seen.body, "{\"a\":1}");
  EXPECT_EQ(seen.Header("authorization"), "Bearer s3cret");
  EXPECT_EQ(seen.Header("content-type"), "application/yaml");
  EXPECT_EQ(seen.Header("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(seen.Header("x-absent"), "");
  EXPECT_EQ(seen.peer.rfind("127.0.0.1:", 0), 0u) << seen.peer;

  auto missing = client.Do("GET", "/missing");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);  // any HTTP status is a successful Result

  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return observed.size() == 2;
  }));
  EXPECT_EQ(observed[0], std::make_pair(std::string("PUT /v1/x"), 201));
  EXPECT_EQ(observed[1], std::make_pair(std::string("GET /missing"), 404));
}

TEST(HttpTest, DecodesPathAndQuery) {
  HttpRequest seen;
  HttpServer server(PlainOptions(), [&](const HttpRequest& req) {
    seen = req;
    return HttpResponse();
  });
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));
  const std::string target = "/a%20b/c%2Fd+e?x=1&y=hello+world&z=%26%3D%zz&flag&&x2=%E2%9C%93";
  ASSERT_TRUE(client.Do("GET", target).ok());
  EXPECT_EQ(seen.target, target);
  EXPECT_EQ(seen.path, "/a b/c/d+e");  // '+' is a space only in the query
  EXPECT_EQ(seen.query.size(), 5u);
  EXPECT_EQ(seen.query["x"], "1");
  EXPECT_EQ(seen.query["y"], "hello world");
  EXPECT_EQ(seen.query["z"], "&=%zz");  // a malformed escape stays as written
  EXPECT_EQ(seen.query["flag"], "");
  EXPECT_EQ(seen.query["x2"], "\xE2\x9C\x93");
}

TEST(HttpTest, OversizedBodyGets413AndTheServerCarriesOn) {
  HttpServerOptions o = PlainOptions();
  o.max_body_bytes = 1024;
  HttpServer server(o, Echo);
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));

  auto big = client.Do("POST", "/upload", std::string(200 * 1024, 'x'));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(
      big->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request body )"
      R"(exceeds 1024 bytes","reason":"RequestEntityTooLarge","code":413})");

  auto ok = client.Do("POST", "/upload", std::string(1024, 'y'));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "POST /upload " + std::string(1024, 'y'));
}

TEST(HttpTest, OversizedBodyOverTlsGets413) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"127.0.0.1"}).ok());
  HttpServerOptions o = TlsOptions(certs);
  o.max_body_bytes = 1024;
  HttpServer server(o, Echo);
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(TlsClient("127.0.0.1", server.port(), certs.File("ca.crt")));
  auto big = client.Do("POST", "/upload", std::string(200 * 1024, 'x'));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 413);
  auto ok = client.Do("GET", "/after");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
}

TEST(HttpTest, GarbageGets400) {
  HttpServer server(PlainOptions(), Echo);
  ASSERT_TRUE(server.Start().ok());
  {
    RawSocket raw(server.port());
    raw.Send(std::string("\x01\x02garbage \xff\r\n\r\n", 16));
    std::string response = raw.ReadUntil("\"code\":400}");
    EXPECT_EQ(response.rfind("HTTP/1.1 400", 0), 0u) << response;
    EXPECT_NE(response.find(R"("reason":"BadRequest")"), std::string::npos) << response;
    EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  }
  HttpClient client(PlainClient(server.port()));
  auto r = client.Do("GET", "/still-here");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST(HttpTest, KeepAliveUsesOneConnection) {
  std::mutex mu;
  std::set<std::string> peers;
  HttpServer server(PlainOptions(), [&](const HttpRequest& req) {
    std::lock_guard<std::mutex> lock(mu);
    peers.insert(req.peer);
    return Echo(req);
  });
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));
  for (int i = 0; i < 200; ++i) {
    auto r = client.Do("GET", "/n/" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->body, "GET /n/" + std::to_string(i) + " ");
  }
  EXPECT_EQ(peers.size(), 1u);
}

TEST(HttpTest, ClientReconnectsAfterServerClosedIdleConnection) {
  HttpServerOptions o = PlainOptions();
  o.idle_timeout_seconds = 1;
  std::mutex mu;
  std::set<std::string> peers;
  HttpServer server(o, [&](const HttpRequest& req) {
    std::lock_guard<std::mutex> lock(mu);
    peers.insert(req.peer);
    return Echo(req);
  });
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));
  auto first = client.Do("POST", "/one", "a");
  ASSERT_TRUE(first.ok());
  std::this_thread::sleep_for(1500ms);  // the server times the idle connection out
  auto second = client.Do("POST", "/two", "b");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->body, "POST /two b");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(peers.size(), 2u);  // a second connection
}

// --- Streaming -------------------------------------------------------------------------------

TEST(HttpTest, StreamDeliversLinesThenConnectionIsReused) {
  // Lines split across chunks and chunks holding several lines are both reassembled.
  StreamingHandler handler({"line 1\nli", "ne 2\n", "line 3\n"}, /*forever=*/false);
  std::atomic<int> observed_streams{0};
  HttpServerOptions o = PlainOptions();
  o.observer = [&](const HttpRequest& req, int status, double) {
    if (req.path == "/stream" && status == 200) observed_streams++;
  };
  HttpServer server(o, std::ref(handler));
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));

  std::vector<std::string> lines;
  auto status = client.Stream("/stream", [&](const std::string& line) {
    lines.push_back(line);
    return true;
  });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(lines, (std::vector<std::string>{"line 1", "line 2", "line 3"}));
  // The client may see the last chunk before the server's write completes.
  EXPECT_TRUE(WaitFor([&] { return observed_streams.load() == 1; }));
  ASSERT_EQ(handler.sources().size(), 1u);
  EXPECT_EQ(handler.sources()[0]->cancelled_.load(), 0);  // it finished: nothing to cancel

  auto after = client.Do("GET", "/after");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
  auto again = client.Stream("/stream", [](const std::string&) { return true; });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(handler.peers().size(), 1u);  // all three requests on one connection
}

TEST(HttpTest, RequestSentDuringAStreamIsAnsweredAfterIt) {
  StreamingHandler handler({"a\n", kPause, "b\n"}, /*forever=*/false);
  HttpServer server(PlainOptions(), std::ref(handler));
  ASSERT_TRUE(server.Start().ok());
  const std::string stream = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string after = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";

  {  // Pipelined: both requests in one write.
    RawSocket raw(server.port());
    raw.Send(stream + after);
    std::string got = raw.ReadUntil("GET /after ");
    EXPECT_NE(got.find("b\n\r\n0\r\n\r\n"), std::string::npos) << got;
    EXPECT_NE(got.find("GET /after "), std::string::npos) << got;
  }
  {  // The second request arrives while the stream is pausing.
    RawSocket raw(server.port());
    raw.Send(stream);
    std::string got = raw.ReadUntil("a\n");
    raw.Send(after);
    got += raw.ReadUntil("GET /after ");
    EXPECT_NE(got.find("b\n\r\n0\r\n\r\n"), std::string::npos) << got;
    EXPECT_NE(got.find("GET /after "), std::string::npos) << got;
  }
}

TEST(HttpTest, StreamOverTls) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"127.0.0.1"}).ok());
  StreamingHandler handler({"a\n", "b\n", "c\n"}, /*forever=*/false);
  HttpServer server(TlsOptions(certs), std::ref(handler));
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(TlsClient("127.0.0.1", server.port(), certs.File("ca.crt")));
  std::vector<std::string> lines;
  auto status = client.Stream("/stream", [&](const std::string& line) {
    lines.push_back(line);
    return true;
  });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c"}));
  auto after = client.Do("GET", "/after");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(handler.peers().size(), 1u);
}

TEST(HttpTest, StreamOfANonStreamingResponseDeliversItsBody) {
  HttpServer server(PlainOptions(), [](const HttpRequest&) {
    HttpResponse r;
    r.status = 404;
    r.body = "first\nno newline at the end";
    return r;
  });
  ASSERT_TRUE(server.Start().ok());
  HttpClient client(PlainClient(server.port()));
  std::vector<std::string> lines;
  auto status = client.Stream("/x", [&](const std::string& line) {
    lines.push_back(line);
    return true;
  });
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(*status, 404);
  EXPECT_EQ(lines, (std::vector<std::string>{"first", "no newline at the end"}));
}

TEST(HttpTest, ClientDisconnectMidStreamCancelsOnce) {
  StreamingHandler handler({"hello\n"}, /*forever=*/true);
  std::atomic<int> observed_streams{0};
  HttpServerOptions o = PlainOptions();
  o.observer = [&](const HttpRequest& req, int status, double) {
    if (req.path == "/stream" && status == 200) observed_streams++;
  };
  HttpServer server(o, std::ref(handler));
  ASSERT_TRUE(server.Start().ok());

  {  // A raw client that reads the header and the first chunk, then hangs up.
    RawSocket raw(server.port());
    raw.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string got = raw.ReadUntil("hello\n");
    EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
    EXPECT_NE(got.find("hello\n"), std::string::npos) << got;
  }
  ASSERT_TRUE(WaitFor([&] { return handler.sources().size() == 1; }));
  auto first = handler.sources()[0];
  ASSERT_TRUE(WaitFor([&] { return first->cancelled_.load() == 1; }));

  // HttpClient stops reading by returning false from on_line.
  HttpClient client(PlainClient(server.port()));
  int seen = 0;
  auto status = client.Stream("/stream", [&](const std::string&) { return ++seen < 3; });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(seen, 3);
  ASSERT_TRUE(WaitFor([&] { return handler.sources().size() == 2; }));
  auto second = handler.sources()[1];
  ASSERT_TRUE(WaitFor([&] { return second->cancelled_.load() == 1; }));

  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(first->cancelled_.load(), 1);
  EXPECT_EQ(second->cancelled_.load(), 1);
  EXPECT_EQ(first->started_.load(), 1);
  // An aborted stream still counts as a request.
  EXPECT_TRUE(WaitFor([&] { return observed_streams.load() == 2; }));
  EXPECT_FALSE(first->saved_write_("late\n"));
}

TEST(HttpTest, StopWithOpenStreamsAndConnectionsIsClean) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"127.0.0.1"}).ok());
  StreamingHandler handler({}, /*forever=*/true);
  auto server = std::make_unique<HttpServer>(TlsOptions(certs), std::ref(handler));
  ASSERT_TRUE(server->Start().ok());
  const int port = server->port();

  std::vector<std::thread> streamers;
  std::atomic<int> returned{0};
  for (int i = 0; i < 3; ++i) {
    streamers.emplace_back([&] {
      HttpClient client(TlsClient("127.0.0.1", port, certs.File("ca.crt")));
      auto r = client.Stream("/stream", [](const std::string&) { return true; });
      returned++;
    });
  }
  HttpClient idle(TlsClient("127.0.0.1", port, certs.File("ca.crt")));
  ASSERT_TRUE(idle.Do("GET", "/idle").ok());  // a kept-alive idle TLS connection
  RawSocket half_handshake(port);             // a TCP connection that never says hello
  half_handshake.Send("\x16\x03\x01");

  ASSERT_TRUE(WaitFor([&] {
    auto sources = handler.sources();
    if (sources.size() != 3) return false;
    for (const auto& s : sources) {
      if (s->started_ != 1) return false;
    }
    return true;
  }));
  server->Stop();
  for (const auto& s : handler.sources()) EXPECT_EQ(s->cancelled_.load(), 1);
  for (std::thread& t : streamers) t.join();
  EXPECT_EQ(returned.load(), 3);
  server->Stop();  // idempotent
  server.reset();
  for (const auto& s : handler.sources()) EXPECT_FALSE(s->saved_write_("after the server\n"));

  auto after = idle.Do("GET", "/idle");
  EXPECT_FALSE(after.ok());
}

TEST(HttpTest, ManyClientThreadsConcurrently) {
  TempDir certs;
  ASSERT_TRUE(EnsureServerCertificates(certs.path(), {"127.0.0.1"}).ok());
  std::atomic<int> handled{0};
  HttpServer server(TlsOptions(certs), [&](const HttpRequest& req) {
    handled++;
    return Echo(req);
  });
  ASSERT_TRUE(server.Start().ok());

  constexpr int kThreads = 8;
  constexpr int kRequests = 200;
  std::atomic<int> succeeded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(TlsClient("127.0.0.1", server.port(), certs.File("ca.crt")));
      for (int i = 0; i < kRequests; ++i) {
        std::string body = std::to_string(t) + "/" + std::to_string(i);
        auto r = client.Do("POST", "/c", body);
        if (r.ok() && r->status == 200 && r->body == "POST /c " + body) succeeded++;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(succeeded.load(), kThreads * kRequests);
  EXPECT_EQ(handled.load(), kThreads * kRequests);
}

// Offloaded handlers hold no I/O thread: with one I/O thread and POSTs blocked in their handler,
// GETs on other connections are still answered, and the POSTs get their own answers (on their
// own connections, in order) once released; a server stopped while a handler blocks waits for it.
TEST(HttpTest, OffloadedHandlersDoNotBlockTheIoThread) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> blocked{0};
  HttpServerOptions o = PlainOptions();
  o.threads = 1;
  o.offload = [](const HttpRequest& r) { return r.method == "POST"; };
  o.offload_threads = 4;
  auto server = std::make_unique<HttpServer>(o, [&](const HttpRequest& req) {
    if (req.method == "POST") {
      blocked++;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return release; });
    }
    return Echo(req);
  });
  ASSERT_TRUE(server->Start().ok());
  const int port = server->port();

  std::vector<std::thread> writers;
  std::atomic<int> written{0};
  for (int i = 0; i < 3; ++i) {
    writers.emplace_back([&, i] {
      HttpClient client(PlainClient(port));
      for (int j = 0; j < 2; ++j) {
        const std::string body = std::to_string(i) + "/" + std::to_string(j);
        auto r = client.Do("POST", "/w", body);
        if (r.ok() && r->body == "POST /w " + body) written++;
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return blocked.load() == 3; }));
  HttpClient reader(PlainClient(port));
  for (int i = 0; i < 20; ++i) {
    auto r = reader.Do("GET", "/r/" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, "GET /r/" + std::to_string(i) + " ");
  }
  EXPECT_EQ(written.load(), 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(written.load(), 6);

  // Stop while a handler is still blocked: Stop returns once the handler has.
  {
    std::lock_guard<std::mutex> lock(mu);
    release = false;
  }
  std::thread late([&] {
    HttpClient client(PlainClient(port));
    (void)client.Do("POST", "/late", "x");
  });
  ASSERT_TRUE(WaitFor([&] { return blocked.load() == 7; }));
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
  });
  const auto stop_start = std::chrono::steady_clock::now();
  server->Stop();
  // Well before Stop's grace period for connections (5 s) runs out.
  EXPECT_LT(std::chrono::steady_clock::now() - stop_start, 3s);
  server.reset();
  releaser.join();
  late.join();
}

}  // namespace
// ---------------------------------------------------------------------------------------------
// JSONPath templates, as kubectl's -o jsonpath reads them.

nlohmann::json JsonPathList() {
  return nlohmann::json::parse(R"({"kind": "List", "items": [
    {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "chat"}},
     "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"},
                                                   {"type": "Evicted", "status": "False"}]},
     "spec": {"podSets": [{"count": 2}, {"count": 1}]}},
    {"metadata": {"name": "b"}, "status": {"phase": "Pending"},
     "spec": {"podSets": [{"count": 4}]}}]})");
}

std::string Rendered(const std::string& tmpl, const nlohmann::json& doc = JsonPathList()) {
  auto r = jsonpath::Render(tmpl, doc);
  EXPECT_TRUE(r.ok()) << tmpl << ": " << r.status().message();
  return r.ok() ? *r : "";
}

TEST(JsonPathTest, TemplatesPrintWhatTheirPathsSelect) {
  EXPECT_EQ(Rendered("{.items[*].metadata.name}"), "a b");
  EXPECT_EQ(Rendered("{.items[0].metadata.name}/{.items[-1].metadata.name}"), "a/b");
  EXPECT_EQ(Rendered("{range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"),
            "a=Running\nb=Pending\n");
  EXPECT_EQ(Rendered("{.items[?(@.status.phase==\"Pending\")].metadata.name}"), "b");
  EXPECT_EQ(Rendered("{.items[0].status.conditions[?(@.type=='Ready')].status}"), "True");
  EXPECT_EQ(Rendered("{.items[*].spec.podSets[?(@.count>1)].count}"), "2 4");
  EXPECT_EQ(Rendered("{.items[0].metadata.labels.app\\.kubernetes\\.io/name}"), "chat");
  EXPECT_EQ(Rendered("{.items[0].metadata.labels['app.kubernetes.io/name']}"), "chat");
  EXPECT_EQ(Rendered("{..phase}"), "Running Pending");
  EXPECT_EQ(Rendered("{.items[0:1].metadata.name}"), "a");
  EXPECT_EQ(Rendered("{.items[0:2:2].metadata.name} {.items[1,0].metadata.name}"), "a b a");
  EXPECT_EQ(Rendered("{.items[0].metadata['name','nothing']}"), "a");
  EXPECT_EQ(Rendered("{.items[0:5:9223372036854775807].metadata.name}"), "a");
  EXPECT_EQ(Rendered("{.items[1].spec}"), R"({"podSets":[{"count":4}]})");
  // Within a range a path is the element's; $ is the document's.
  EXPECT_EQ(Rendered("{range .items[*]}{.metadata.name}:{$.kind} {end}"), "a:List b:List ");
  // Nothing selected prints nothing (kubectl's --allow-missing-template-keys, on by default).
  EXPECT_EQ(Rendered("[{.nothing}{.items[0].nothing}]"), "[]");
  EXPECT_FALSE(jsonpath::Select(JsonPathList(), "{.items[0].name").ok());
  auto sorted = jsonpath::Select(JsonPathList()["items"][1], "status.phase");
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(*sorted, std::vector<nlohmann::json>{"Pending"});
}

TEST(JsonPathTest, MalformedTemplatesAreNamed) {
  for (const auto& [tmpl, words] : std::vector<std::pair<std::string, std::string>>{
           {"{.items[0].name", "is not closed"},
           {"{range .items[*]}{.name}", "has no {end}"},
           {"{.a}{end}", "no {range} open"},
           {"{.items[x]}", "expected [N]"},
           {"{.items[?(@.a==[1])]}", "not a value to compare with"},
           {"{.items[0}", "is not closed"},
           {"{.items[99999999999999999999]}", "expected [N]"},
           {"{.items[1:99999999999999999999]}", "expected [A:B]"},
           {"{.items[0:2:0]}", "a STEP of 1 or more"},
           {"{.items[0,*]}", "a union lists indexes or quoted fields"},
           {"{.items[5].metadata.name}", "array index out of bounds: index 5, length 2"}}) {
    auto r = jsonpath::Render(tmpl, JsonPathList());
    ASSERT_FALSE(r.ok()) << tmpl;
    EXPECT_NE(r.status().message().find(words), std::string::npos)
        << tmpl << ": " << r.status().message();
  }
}

}  // namespace fabrica
