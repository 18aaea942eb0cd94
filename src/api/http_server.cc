// HttpServer on Boost.Beast. Beast is confined to this file (and the client's), because each
// translation unit that includes it costs tens of seconds to compile.
//
// Threading: one io_context run by `threads` threads. Every connection owns a strand (its socket's
// executor), so all of a connection's state is touched on that strand only and needs no lock;
// different connections run in parallel. The handler runs inline on the strand, which blocks
// that connection only, unless options.offload picks the request: then it runs on the offload
// pool and the connection resumes on its strand with the response. StreamSource::write posts
// onto the strand through a StreamChannel.
//
// A connection's life: [TLS handshake] → read request → handler → write response → read ...
// For a streaming response: write the header (chunked) → Start the source → chunk writes queued
// from the source, alongside one pending read that watches for the client going away (until it
// sends its next request) → last chunk → back to reading requests. Any error closes the
// connection and cancels an unfinished stream. Stop posts a close to every connection, waits for
// them to go, and destroys the io_context, which frees whatever handlers were still queued.
#include "api/http_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

namespace fabrica {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string HttpRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
// A stream whose client reads slower than the source writes is cut off past this backlog.
constexpr size_t kMaxQueuedStreamBytes = 16 * 1024 * 1024;
// After an error response the rest of the request is read and dropped, so that closing the
// socket with unread data does not reset the connection before the client read the response.
constexpr size_t kMaxDrainBytes = 16 * 1024 * 1024;
constexpr std::chrono::seconds kDrainTime(2);
constexpr std::chrono::seconds kMaxHandshakeTime(30);
constexpr std::chrono::seconds kStopGrace(5);

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (a malformed escape is kept as written) and, in a query, '+' as space.
std::string PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%' && i + 2 < in.size()) {
      int hi = HexDigit(in[i + 1]);
      int lo = HexDigit(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

// Fills path and query from a request target. Repeated query keys keep the last value.
void ParseTarget(std::string_view target, HttpRequest* out) {
  size_t q = target.find('?');
  out->path = PercentDecode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  size_t fragment = query.find('#');
  if (fragment != std::string_view::npos) query = query.substr(0, fragment);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = PercentDecode(pair.substr(0, eq), true);
    std::string value =
        eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1), true);
    out->query[std::move(key)] = std::move(value);
  }
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

// A Kubernetes-style Status object, the body of every error the server itself produces.
HttpResponse ErrorResponse(int code, std::string_view reason, std::string_view message) {
  HttpResponse r;
  r.status = code;
  r.body = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")" +
           JsonEscape(message) + R"(","reason":")" + std::string(reason) + R"(","code":)" +
           std::to_string(code) + "}";
  return r;
}

std::string PeerString(const tcp::endpoint& ep) {
  std::string address = ep.address().to_string();
  if (ep.address().is_v6()) address = "[" + address + "]";
  return address + ":" + std::to_string(ep.port());
}

class ConnectionBase;

// What the acceptor and every connection share. Connections keep it alive through a shared_ptr,
// so a connection freed late (by the io_context's destructor) still finds it.
struct Shared {
  HttpServerOptions options;
  HttpHandler handler;
  // Runs the handlers of requests that options.offload picks; absent when there is none.
  std::optional<net::thread_pool> offload;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;                                               // live became smaller
  std::unordered_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> live;  // guarded by mu
};

class ConnectionBase {
 public:
  virtual ~ConnectionBase() = default;
  virtual void Begin() = 0;
  // Closes the connection on its strand.
  virtual void PostClose() = 0;
  virtual void PostChunk(std::string chunk) = 0;
  virtual void PostFinish() = 0;
  // Cancels an unfinished stream right away. REQUIRES: no pool thread runs.
  virtual void CancelStreamNow() = 0;
};

// The link from a StreamSource's write/finish functions to its connection. While the stream
// runs it keeps the connection alive (no socket operation need be pending then); the connection
// breaks that cycle by closing the channel when the stream ends, however it ends. Every post
// happens under the mutex, so once Close returns no chunk can reach the connection any more,
// and the source's functions may outlive the connection: they then return false.
class StreamChannel {
 public:
  explicit StreamChannel(std::shared_ptr<ConnectionBase> conn) : conn_(std::move(conn)) {}

  bool Write(std::string chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn_ || finished_) return false;
    conn_->PostChunk(std::move(chunk));
    return true;
  }

  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn_ || finished_) return;
    finished_ = true;
    conn_->PostFinish();
  }

  // Closes the channel and lets go of the connection; returns true when the source had not
  // finished, i.e. must be cancelled. REQUIRES: called by the connection itself, which is
  // therefore alive, so that dropping the reference here never destroys it.
  bool Close() {
    std::shared_ptr<ConnectionBase> conn;
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn_) return false;
    conn = std::move(conn_);
    return !finished_;
  }

 private:
  std::mutex mu_;
  bool finished_ = false;
  std::shared_ptr<ConnectionBase> conn_;  // null once closed
};

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
class Connection : public ConnectionBase, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  template <class... StreamArgs>
  Connection(std::shared_ptr<Shared> shared, std::string peer, StreamArgs&&... args)
      : shared_(std::move(shared)),
        peer_(std::move(peer)),
        stream_(std::forward<StreamArgs>(args)...),
        watchdog_(stream_.get_executor()) {}

  ~Connection() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->live.erase(this);
    shared_->cv.notify_all();
  }

  void Begin() override {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Tcp().expires_after(
            std::min<Clock::duration>(self->IdleTimeout(), kMaxHandshakeTime));
        self->stream_.async_handshake(ssl::stream_base::server,
                                      [self](beast::error_code ec) { self->OnHandshake(ec); });
      } else {
        self->DoRead();
      }
    });
  }

  void PostClose() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

  void PostChunk(std::string chunk) override {
    net::post(stream_.get_executor(),
              [self = this->shared_from_this(), chunk = std::move(chunk)]() mutable {
                self->QueueChunk(std::move(chunk));
              });
  }

  void PostFinish() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->QueueFinish(); });
  }

  void CancelStreamNow() override {
    closed_ = true;
    AbortStream();
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }
  Clock::duration IdleTimeout() const {
    return std::chrono::seconds(std::max(1, shared_->options.idle_timeout_seconds));
  }

  void OnHandshake(beast::error_code ec) {
    if (closed_) return;
    if (ec) return Close();
    DoRead();
  }

  void DoRead() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(shared_->options.max_body_bytes);
    Tcp().expires_after(IdleTimeout());
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (closed_) return;
    request_start_ = Clock::now();
    if (ec) {
      const auto& http_category = http::make_error_code(http::error::body_limit).category();
      if (ec == http::error::body_limit) {
        return RespondError(
            413, "RequestEntityTooLarge",
            "request body exceeds " + std::to_string(shared_->options.max_body_bytes) + " bytes");
      }
      if (ec == http::error::header_limit) {
        return RespondError(431, "RequestHeaderFieldsTooLarge",
                            "request header exceeds " + std::to_string(kMaxHeaderBytes) + " bytes");
      }
      if (ec.category() == http_category && ec != http::error::end_of_stream &&
          ec != http::error::partial_message) {
        return RespondError(400, "BadRequest", "malformed request: " + ec.message());
      }
      return Close();  // the client went away, timed out or broke TLS
    }

    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    ParseTarget(request.target, &request);
    for (const auto& field : req) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());  // RFC 9110 5.3
    }
    request.body = std::move(req.body());
    request.peer = peer_;
    const bool keep_alive = req.keep_alive() && !shared_->stopping.load();

    if (shared_->offload && shared_->options.offload(request)) {
      // A handler that may block runs on the offload pool; the connection, which has no socket
      // operation pending meanwhile, goes on on its strand once the response is ready.
      // The work guard keeps the I/O threads running until the answer is back: meanwhile the
      // io_context may have nothing else to do (the server stopping, say).
      auto task = std::make_shared<HttpRequest>(std::move(request));
      net::post(*shared_->offload, [self = this->shared_from_this(), task, keep_alive,
                                    work = net::make_work_guard(stream_.get_executor())] {
        auto response = std::make_shared<HttpResponse>(self->CallHandler(*task));
        net::post(self->stream_.get_executor(), [self, task, response, keep_alive] {
          self->Respond(std::move(*task), std::move(*response), keep_alive);
        });
      });
      return;
    }
    HttpResponse response = CallHandler(request);
    Respond(std::move(request), std::move(response), keep_alive);
  }

  HttpResponse CallHandler(const HttpRequest& request) {
    try {
      return shared_->handler(request);
    } catch (const std::exception& e) {
      return ErrorResponse(500, "InternalError", std::string("handler failed: ") + e.what());
    } catch (...) {
      return ErrorResponse(500, "InternalError", "handler failed");
    }
  }

  void Respond(HttpRequest request, HttpResponse response, bool keep_alive) {
    current_ = std::move(request);
    if (closed_) return;
    if (response.stream) return StartStream(std::move(response), keep_alive);
    WriteResponse(std::move(response), keep_alive);
  }

  // Answers a request the server rejected itself, then closes: the rest of the request is in an
  // unknown state, so nothing more can be read from this connection.
  void RespondError(int code, std::string_view reason, const std::string& message) {
    current_ = HttpRequest();
    current_.peer = peer_;
    if (parser_ && parser_->is_header_done()) {
      current_.method = std::string(parser_->get().method_string());
      current_.target = std::string(parser_->get().target());
      ParseTarget(current_.target, &current_);
    }
    parser_.reset();
    WriteResponse(ErrorResponse(code, reason, message), /*keep_alive=*/false);
  }

  static int ValidStatus(int status) { return status >= 100 && status <= 999 ? status : 500; }

  template <class Body>
  void SetHeaders(http::response<Body>& res, HttpResponse& r, bool keep_alive) {
    res.version(11);
    res.result(static_cast<unsigned>(ValidStatus(r.status)));
    res.set(http::field::server, "fabrica");
    if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res.insert(name, value);
    res.keep_alive(keep_alive);
  }

  void WriteResponse(HttpResponse r, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>();
    SetHeaders(*res, r, keep_alive);
    const int status = res->result_int();
    if (status >= 200 && status != 204 && status != 304) {
      // A HEAD response announces the length of the body it does not carry.
      res->content_length(r.body.size());
      if (current_.method != "HEAD") res->body() = std::move(r.body);
    }
    Tcp().expires_after(IdleTimeout());
    http::async_write(
        stream_, *res,
        [self = this->shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
          self->Observe(res->result_int());
          if (self->closed_) return;
          if (ec) return self->Close();
          if (!keep_alive) return self->CloseAfterDraining();
          self->DoRead();
        });
  }

  void Observe(int status) {
    if (!shared_->options.observer) return;
    std::chrono::duration<double> seconds = Clock::now() - request_start_;
    shared_->options.observer(current_, status, seconds.count());
  }

  // --- Streaming -------------------------------------------------------------------------------

  void StartStream(HttpResponse r, bool keep_alive) {
    stream_keep_alive_ = keep_alive;
    source_ = std::move(r.stream);
    stream_header_ = {};
    SetHeaders(stream_header_, r, keep_alive);
    stream_header_.chunked(true);
    stream_serializer_.emplace(stream_header_);
    Tcp().expires_after(IdleTimeout());
    http::async_write_header(stream_, *stream_serializer_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->OnStreamHeader(ec);
                             });
  }

  void OnStreamHeader(beast::error_code ec) {
    // A source that was never started hears neither Start nor Cancel; its destructor is its end.
    if (closed_ || ec) {
      source_.reset();
      return Close();
    }
    stream_serializer_.reset();
    // The stream may stay quiet for hours: no timeout on the read that watches for the client
    // leaving. Chunk writes are bounded by the watchdog instead (a tcp_stream has one deadline
    // for both directions).
    Tcp().expires_never();
    channel_ = std::make_shared<StreamChannel>(this->shared_from_this());
    stream_active_ = true;
    WatchForClient();
    std::shared_ptr<StreamChannel> channel = channel_;
    std::shared_ptr<StreamSource> source = source_;
    try {
      source->Start([channel](std::string chunk) { return channel->Write(std::move(chunk)); },
                    [channel] { channel->Finish(); });
    } catch (...) {
      Close();
    }
  }

  // A read whose only purpose is to notice EOF or a reset while the stream runs.
  void WatchForClient() {
    // Bytes already buffered are a request waiting for its turn (see OnWatch).
    if (buffer_.size() > 0) return;
    watch_pending_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnWatch(ec, n);
                            });
  }

  void OnWatch(beast::error_code ec, size_t n) {
    watch_pending_ = false;
    if (closed_) return;
    if (ec) return Close();  // the client went away: cancels the stream if it still runs
    // Bytes from the client are its next request: sent as soon as it saw the last chunk (perhaps
    // before this strand saw that write complete), or pipelined. They wait in buffer_ for DoRead.
    // Reading on would wait for bytes the client will not send before it has its answer, so the
    // watch ends here; a client that vanishes now is noticed by a failed write or the watchdog.
    buffer_.commit(n);
    if (stream_active_) return;
    DisarmWatchdog();
    DoRead();
  }

  void QueueChunk(std::string chunk) {
    if (closed_ || !stream_active_ || finish_requested_ || chunk.empty()) return;
    queued_bytes_ += chunk.size();
    if (queued_bytes_ > kMaxQueuedStreamBytes) return Close();
    queue_.push_back(std::move(chunk));
    PumpWrites();
  }

  void QueueFinish() {
    if (closed_ || !stream_active_) return;
    finish_requested_ = true;
    PumpWrites();
  }

  // Starts the next write unless one is in flight; queued chunks go out together as one chunk.
  void PumpWrites() {
    if (writing_ || closed_) return;
    auto on_written = [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->OnChunkWritten(ec);
    };
    if (!queue_.empty()) {
      write_buffer_.clear();
      for (const std::string& chunk : queue_) write_buffer_ += chunk;
      queue_.clear();
      queued_bytes_ = 0;
      writing_ = true;
      ArmWatchdog(IdleTimeout());
      net::async_write(stream_, http::make_chunk(net::buffer(write_buffer_)),
                       std::move(on_written));
    } else if (finish_requested_ && !last_chunk_sent_) {
      last_chunk_sent_ = true;
      writing_ = true;
      ArmWatchdog(IdleTimeout());
      net::async_write(stream_, http::make_chunk_last(), std::move(on_written));
    }
  }

  void OnChunkWritten(beast::error_code ec) {
    writing_ = false;
    DisarmWatchdog();
    if (closed_) return;
    if (ec) return Close();
    if (last_chunk_sent_) return OnStreamDone();
    PumpWrites();
  }

  void OnStreamDone() {
    stream_active_ = false;
    finish_requested_ = false;
    last_chunk_sent_ = false;
    Observe(stream_header_.result_int());
    EndStream();
    if (!stream_keep_alive_ || shared_->stopping.load()) return Close();
    if (!watch_pending_) return DoRead();
    // The watch read is still pending and will carry on with the next request (OnWatch); an
    // idle client is closed by the watchdog.
    ArmWatchdog(IdleTimeout());
  }

  // Ends a stream cut short (client gone, slow client, Stop): the observer hears of it with the
  // status that was sent, and an unfinished source is cancelled.
  void AbortStream() {
    if (stream_active_) {
      stream_active_ = false;
      Observe(stream_header_.result_int());
    }
    EndStream();
  }

  // Releases the source; cancels it if it had not finished. Safe to call more than once.
  void EndStream() {
    if (!source_) return;
    std::shared_ptr<StreamSource> source = std::move(source_);
    source_.reset();
    bool cancel = channel_ && channel_->Close();
    channel_.reset();
    if (!cancel) return;
    try {
      source->Cancel();
    } catch (...) {
      // A source's failure to cancel cannot be reported to anyone; the stream is over anyway.
    }
  }

  // --- Timers and closing ----------------------------------------------------------------------

  void ArmWatchdog(Clock::duration timeout) {
    watchdog_.expires_after(timeout);
    watchdog_.async_wait([self = this->shared_from_this(),
                          generation = ++watchdog_generation_](beast::error_code ec) {
      if (!ec && generation == self->watchdog_generation_ && !self->closed_) self->Close();
    });
  }

  void DisarmWatchdog() {
    ++watchdog_generation_;
    watchdog_.cancel();
  }

  // After a response with "Connection: close": tell a plain-TCP client we are done (FIN), then
  // read and drop what it still sends until it closes, the drain limit or the time is up.
  void CloseAfterDraining() {
    if constexpr (!kTls) {
      beast::error_code ignored;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
    drain_deadline_ = Clock::now() + kDrainTime;
    drained_bytes_ = 0;
    DrainSome();
  }

  void DrainSome() {
    Tcp().expires_at(drain_deadline_);
    stream_.async_read_some(buffer_.prepare(16 * 1024),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (self->closed_) return;
                              self->drained_bytes_ += n;
                              if (ec || self->drained_bytes_ > kMaxDrainBytes) return self->Close();
                              self->DrainSome();
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    AbortStream();
    DisarmWatchdog();
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();  // pending operations complete with operation_aborted and see closed_
  }

  std::shared_ptr<Shared> shared_;
  const std::string peer_;
  Stream stream_;
  net::steady_timer watchdog_;
  uint64_t watchdog_generation_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool closed_ = false;

  HttpRequest current_;  // the request being answered, for the observer
  Clock::time_point request_start_;

  Clock::time_point drain_deadline_;
  size_t drained_bytes_ = 0;

  // Streaming state, meaningful between StartStream and OnStreamDone.
  std::shared_ptr<StreamSource> source_;
  std::shared_ptr<StreamChannel> channel_;
  http::response<http::empty_body> stream_header_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
  bool stream_keep_alive_ = false;
  bool stream_active_ = false;
  bool watch_pending_ = false;
  bool writing_ = false;
  bool finish_requested_ = false;
  bool last_chunk_sent_ = false;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::string write_buffer_;  // the chunk being written
};

// Splits "host:port" ("[v6]:port" for IPv6).
Status ParseListen(const std::string& listen, std::string* host, uint16_t* port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("listen address '" + listen + "': expected host:port");
  }
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  std::string port_text = listen.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty() ||
      value > 65535) {
    return InvalidArgument("listen address '" + listen + "': bad port '" + port_text + "'");
  }
  *port = static_cast<uint16_t>(value);
  return Status::Ok();
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::optional<ssl::context> tls_context;
  int port = 0;
  // Destroyed in this order by Stop: acceptor, then the io_context (which frees the connections
  // its queued handlers still hold).
  std::optional<net::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_backoff;
  std::vector<std::thread> threads;

  Status MakeTlsContext() {
    const HttpServerOptions& o = shared->options;
    if (o.cert_file.empty() || o.key_file.empty()) {
      return InvalidArgument("TLS needs cert_file and key_file");
    }
    tls_context.emplace(ssl::context::tls_server);
    ssl::context& ctx = *tls_context;
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::single_dh_use);
    beast::error_code ec;
    ctx.use_certificate_chain_file(o.cert_file, ec);
    if (ec) return InvalidArgument(o.cert_file + ": " + ec.message());
    ctx.use_private_key_file(o.key_file, ssl::context::pem, ec);
    if (ec) return InvalidArgument(o.key_file + ": " + ec.message());
    if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return InvalidArgument(o.key_file + " does not match " + o.cert_file);
    }
    return Status::Ok();
  }

  void DoAccept() {
    acceptor->async_accept(net::make_strand(*ioc),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == net::error::operation_aborted || !acceptor->is_open())
                               return;
                             if (ec) {
                               // Out of descriptors, typically: try again shortly rather than spin.
                               accept_backoff->expires_after(std::chrono::milliseconds(50));
                               accept_backoff->async_wait([this](beast::error_code wait_ec) {
                                 if (!wait_ec && acceptor->is_open()) DoAccept();
                               });
                               return;
                             }
                             Accept(std::move(socket));
                             DoAccept();
                           });
  }

  void Accept(tcp::socket socket) {
    beast::error_code ec;
    tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) return;  // already gone
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<ConnectionBase> conn;
    if (tls_context) {
      conn = std::make_shared<Connection<TlsStream>>(shared, PeerString(remote), std::move(socket),
                                                     *tls_context);
    } else {
      conn =
          std::make_shared<Connection<PlainStream>>(shared, PeerString(remote), std::move(socket));
    }
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (shared->stopping.load()) return;  // conn is freed outside the lock, as it must be
      shared->live.emplace(conn.get(), conn);
    }
    conn->Begin();
  }

  std::vector<std::shared_ptr<ConnectionBase>> LiveConnections() {
    std::vector<std::shared_ptr<ConnectionBase>> out;
    std::lock_guard<std::mutex> lock(shared->mu);
    for (auto& [ptr, weak] : shared->live) {
      if (auto conn = weak.lock()) out.push_back(std::move(conn));
    }
    return out;
  }

  Status Start() {
    if (ioc) return FailedPrecondition("HttpServer already started");
    const HttpServerOptions& o = shared->options;
    std::string host;
    uint16_t port_number = 0;
    RETURN_IF_ERROR(ParseListen(o.listen, &host, &port_number));
    tls_context.reset();
    if (o.tls) RETURN_IF_ERROR(MakeTlsContext());

    ioc.emplace(std::max(1, o.threads));
    if (o.offload && o.offload_threads > 0) shared->offload.emplace(o.offload_threads);
    beast::error_code ec;
    tcp::endpoint endpoint;
    net::ip::address address = net::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
    if (!ec) {
      endpoint = tcp::endpoint(address, port_number);
    } else {
      tcp::resolver resolver(*ioc);
      auto results = resolver.resolve(host, std::to_string(port_number), ec);
      if (ec || results.empty()) {
        ioc.reset();
        return InvalidArgument("listen address '" + o.listen + "': " + ec.message());
      }
      endpoint = results.begin()->endpoint();
    }

    acceptor.emplace(net::make_strand(*ioc));
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      acceptor.reset();
      ioc.reset();
      return Status(StatusCode::kUnavailable, "listen on " + o.listen + ": " + ec.message());
    }
    port = acceptor->local_endpoint().port();
    accept_backoff.emplace(acceptor->get_executor());
    shared->stopping = false;
    DoAccept();
    for (int i = 0; i < std::max(1, o.threads); ++i) {
      threads.emplace_back([this] {
        for (;;) {
          try {
            ioc->run();
            return;
          } catch (const std::exception& e) {
            // Handlers catch what they expect; anything else (bad_alloc) is logged and the
            // thread goes on serving the other connections.
            std::cerr << "fabrica http server: " << e.what() << std::endl;
          }
        }
      });
    }
    return Status::Ok();
  }

  void Stop() {
    if (!ioc) return;
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->stopping = true;
    }
    net::post(acceptor->get_executor(), [this] {
      beast::error_code ignored;
      acceptor->close(ignored);
      accept_backoff->cancel();
    });
    for (const auto& conn : LiveConnections()) conn->PostClose();
    {
      std::unique_lock<std::mutex> lock(shared->mu);
      shared->cv.wait_for(lock, kStopGrace, [&] { return shared->live.empty(); });
    }
    // Handlers still running finish first; what they post to their connections then finds the
    // connections closed.
    if (shared->offload) shared->offload->join();
    ioc->stop();
    for (std::thread& t : threads) t.join();
    threads.clear();
    // A close that had not run when the io_context stopped leaves its stream to us; no pool
    // thread runs any more, so touching the connection here is race-free.
    for (const auto& conn : LiveConnections()) conn->CancelStreamNow();
    accept_backoff.reset();
    acceptor.reset();
    ioc.reset();
    shared->offload.reset();
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared->options = std::move(options);
  impl_->shared->handler = std::move(handler);
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() { return impl_->Start(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace fabrica
