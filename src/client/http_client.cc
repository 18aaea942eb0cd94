// HttpClient on Boost.Beast. Synchronous to the caller, asynchronous inside: Beast's timeouts
// (tcp_stream::expires_after) apply to asynchronous operations only, so each step starts one
// operation and runs the client's private io_context until it completes.
//
// Reuse: after a response with keep-alive the connection stays open. Before reusing it, a
// zero-timeout poll tells whether the server has closed it meanwhile (idle timeout, restart); if
// so the client reconnects first. If the server closes it in the instant between that check and
// the request, the request is retried once on a fresh connection when that cannot run it twice:
// the write failed (the server never got the whole request), or the method is idempotent.
#include "client/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <chrono>
#include <optional>

namespace fabrica {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

constexpr uint64_t kMaxResponseBytes = 256ull * 1024 * 1024;

Status Unavailable(const std::string& message) { return Status(StatusCode::kUnavailable, message); }

bool IsIdempotent(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS";
}

}  // namespace

struct HttpClient::Impl {
  ClientOptions options;
  Status config;  // why the options are unusable, if they are
  bool tls = false;
  std::string host;  // without brackets, for resolving and certificate checks
  std::string port;
  std::string host_header;  // host:port as sent in Host
  std::string origin;       // scheme://host:port, named in errors

  net::io_context ioc;
  std::optional<ssl::context> tls_context;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  bool connected = false;

  explicit Impl(ClientOptions o) : options(std::move(o)) { config = Configure(); }

  Status Configure() {
    const std::string& server = options.server;
    size_t scheme_end = server.find("://");
    if (scheme_end == std::string::npos) {
      return InvalidArgument("server '" + server + "': expected https://host:port");
    }
    std::string scheme = server.substr(0, scheme_end);
    if (scheme == "https") {
      tls = true;
    } else if (scheme != "http") {
      return InvalidArgument("server '" + server + "': scheme must be https or http");
    }
    std::string authority = server.substr(scheme_end + 3);
    authority = authority.substr(0, authority.find('/'));
    std::string port_text;
    if (!authority.empty() && authority.front() == '[') {
      size_t close = authority.find(']');
      if (close == std::string::npos) return InvalidArgument("server '" + server + "': bad host");
      host = authority.substr(1, close - 1);
      if (close + 1 < authority.size() && authority[close + 1] == ':') {
        port_text = authority.substr(close + 2);
      }
    } else {
      size_t colon = authority.rfind(':');
      host = authority.substr(0, colon);
      if (colon != std::string::npos) port_text = authority.substr(colon + 1);
    }
    if (host.empty()) return InvalidArgument("server '" + server + "': no host");
    if (port_text.empty()) port_text = tls ? "443" : "80";
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return InvalidArgument("server '" + server + "': bad port '" + port_text + "'");
    }
    port = port_text;
    bool v6 = host.find(':') != std::string::npos;
    host_header = (v6 ? "[" + host + "]" : host) + ":" + port;
    origin = scheme + "://" + host_header;

    if (!tls) return Status::Ok();
    tls_context.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_context->native_handle(), TLS1_2_VERSION);
    beast::error_code load_ec;
    if (options.ca_file.empty()) {
      // No CA named: the system's trust store (a public identity provider, say).
      tls_context->set_default_verify_paths(load_ec);
      if (load_ec) return InvalidArgument("the system's CA store: " + load_ec.message());
    } else {
      tls_context->load_verify_file(options.ca_file, load_ec);
      if (load_ec) return InvalidArgument(options.ca_file + ": " + load_ec.message());
    }
    tls_context->set_verify_mode(ssl::verify_peer);
    return Status::Ok();
  }

  std::chrono::seconds Timeout() const {
    return std::chrono::seconds(std::max(1, options.timeout_seconds));
  }
  beast::tcp_stream& Tcp() { return tls ? beast::get_lowest_layer(*secure) : *plain; }

  // Starts one asynchronous operation through `initiate` (given a completion handler) and runs
  // the io_context until it has completed.
  template <class Initiate>
  beast::error_code Await(Initiate&& initiate) {
    beast::error_code result;
    initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  // Calls f with the open stream, whichever kind it is.
  template <class F>
  auto WithStream(F&& f) {
    return tls ? f(*secure) : f(*plain);
  }

  void Disconnect() {
    if (!connected) return;
    connected = false;
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();
    buffer.clear();
  }

  // True when an idle kept-alive connection has been closed by the server (or shows data that
  // nobody asked for, which makes it just as unusable).
  bool ServerClosedIdleConnection() {
    if (buffer.size() > 0) return true;
    pollfd p{};
    p.fd = Tcp().socket().native_handle();
    p.events = POLLIN | POLLRDHUP;
    return ::poll(&p, 1, 0) != 0;
  }

  std::string TlsFailure(beast::error_code ec) {
    long verify = SSL_get_verify_result(secure->native_handle());
    if (verify != X509_V_OK) {
      return std::string("certificate verification failed: ") +
             X509_verify_cert_error_string(verify);
    }
    return "TLS handshake: " + ec.message();
  }

  Status Connect() {
    RETURN_IF_ERROR(config);
    plain.reset();
    secure.reset();
    buffer.clear();
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) return Unavailable(origin + ": resolve: " + ec.message());

    if (tls) {
      secure.emplace(ioc, *tls_context);
      SSL* ssl_handle = secure->native_handle();
      beast::error_code ip_ec;
      net::ip::make_address(host, ip_ec);
      if (!ip_ec) {
        // An IP address is checked against the certificate's IP SANs.
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), host.c_str());
      } else {
        SSL_set_tlsext_host_name(ssl_handle, host.c_str());
        SSL_set_hostflags(ssl_handle, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set1_host(ssl_handle, host.c_str());
      }
    } else {
      plain.emplace(ioc);
    }

    Tcp().expires_after(Timeout());
    ec = Await([&](auto handler) { Tcp().async_connect(endpoints, std::move(handler)); });
    if (ec) return Unavailable(origin + ": connect: " + ec.message());
    Tcp().socket().set_option(tcp::no_delay(true), ec);
    if (tls) {
      Tcp().expires_after(Timeout());
      ec = Await([&](auto handler) {
        secure->async_handshake(ssl::stream_base::client, std::move(handler));
      });
      if (ec) {
        std::string why = TlsFailure(ec);
        Tcp().close();
        return Unavailable(origin + ": " + why);
      }
    }
    connected = true;
    return Status::Ok();
  }

  http::request<http::string_body> MakeRequest(const std::string& method, const std::string& target,
                                               const std::string& body,
                                               const std::string& content_type) {
    http::request<http::string_body> req;
    http::verb verb = http::string_to_verb(method);
    if (verb == http::verb::unknown) {
      req.method_string(method);
    } else {
      req.method(verb);
    }
    req.target(target.empty() ? "/" : target);
    req.version(11);
    req.set(http::field::host, host_header);
    req.set(http::field::user_agent, "fabrica");
    if (!options.token.empty()) req.set(http::field::authorization, "Bearer " + options.token);
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
      if (!content_type.empty()) req.set(http::field::content_type, content_type);
      req.body() = body;
      req.content_length(body.size());
    }
    req.keep_alive(true);
    return req;
  }

  // Sends `req` and reads the response header into `parser`; reconnects as the file comment
  // describes. On success the connection is positioned at the start of the body.
  template <class Parser>
  Status SendAndReadHeader(http::request<http::string_body>& req, const std::string& method,
                           std::optional<Parser>& parser, bool whole_message) {
    RETURN_IF_ERROR(config);
    bool reused = connected;
    if (connected && ServerClosedIdleConnection()) {
      Disconnect();
      reused = false;
    }
    for (int attempt = 0;; ++attempt) {
      bool may_retry = reused && attempt == 0;
      if (!connected) RETURN_IF_ERROR(Connect());

      Tcp().expires_after(Timeout());
      beast::error_code ec = Await([&](auto handler) {
        WithStream([&](auto& s) { http::async_write(s, req, std::move(handler)); });
      });
      if (ec) {
        Disconnect();
        if (may_retry) continue;
        return Unavailable(origin + ": sending " + method + ": " + ec.message());
      }

      parser.emplace();
      parser->body_limit(kMaxResponseBytes);
      Tcp().expires_after(Timeout());
      ec = Await([&](auto handler) {
        WithStream([&](auto& s) {
          if (whole_message) {
            http::async_read(s, buffer, *parser, std::move(handler));
          } else {
            http::async_read_header(s, buffer, *parser, std::move(handler));
          }
        });
      });
      if (ec) {
        bool nothing_read = !parser->got_some();
        Disconnect();
        if (may_retry && nothing_read && IsIdempotent(method)) continue;
        if (ec == beast::error::timeout) {
          return Unavailable(origin + ": no response within " + std::to_string(Timeout().count()) +
                             "s");
        }
        return Unavailable(origin + ": reading the response: " + ec.message());
      }
      return Status::Ok();
    }
  }
};

HttpClient::HttpClient(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpClient::~HttpClient() { impl_->Disconnect(); }

Result<ClientResponse> HttpClient::Do(const std::string& method, const std::string& path_and_query,
                                      const std::string& body, const std::string& content_type) {
  Impl& d = *impl_;
  http::request<http::string_body> req = d.MakeRequest(method, path_and_query, body, content_type);
  std::optional<http::response_parser<http::string_body>> parser;
  RETURN_IF_ERROR(d.SendAndReadHeader(req, method, parser, /*whole_message=*/true));
  http::response<http::string_body> res = parser->release();
  if (!res.keep_alive()) d.Disconnect();
  ClientResponse out;
  out.status = res.result_int();
  out.content_type = std::string(res[http::field::content_type]);
  out.body = std::move(res.body());
  for (auto [it, end] = res.equal_range(http::field::warning); it != end; ++it) {
    // 299 - "text" (RFC 7234 §5.5): the text between the quotes, or all of it.
    const std::string value(it->value());
    const size_t open = value.find('"'), close = value.rfind('"');
    out.warnings.push_back(open != std::string::npos && close > open
                               ? value.substr(open + 1, close - open - 1)
                               : value);
  }
  return out;
}

Result<int> HttpClient::Stream(const std::string& path_and_query,
                               const std::function<bool(const std::string& line)>& on_line) {
  Impl& d = *impl_;
  http::request<http::string_body> req = d.MakeRequest("GET", path_and_query, "", "");
  std::optional<http::response_parser<http::buffer_body>> parser;
  RETURN_IF_ERROR(d.SendAndReadHeader(req, "GET", parser, /*whole_message=*/false));
  parser->body_limit(boost::none);  // a watch has no length
  const int status = parser->get().result_int();

  // Lines are handed over without their '\n'. A last line without one (an error body, say) is
  // handed over when the response ends.
  std::string pending;
  char chunk[16 * 1024];
  while (!parser->is_done()) {
    parser->get().body().data = chunk;
    parser->get().body().size = sizeof(chunk);
    d.Tcp().expires_after(d.Timeout());
    beast::error_code ec = d.Await([&](auto handler) {
      d.WithStream(
          [&](auto& s) { http::async_read_some(s, d.buffer, *parser, std::move(handler)); });
    });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      d.Disconnect();
      if (ec == beast::error::timeout) {
        return Unavailable(d.origin + ": stream " + path_and_query + ": no data for " +
                           std::to_string(d.Timeout().count()) + "s");
      }
      return Unavailable(d.origin + ": stream " + path_and_query + ": " + ec.message());
    }
    pending.append(chunk, sizeof(chunk) - parser->get().body().size);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (!on_line(pending.substr(start, nl - start))) {
        // The rest of the response is unread, so this connection cannot carry another request.
        d.Disconnect();
        return status;
      }
    }
    pending.erase(0, start);
  }
  if (!pending.empty() && !on_line(pending)) {
    d.Disconnect();
    return status;
  }
  if (!parser->get().keep_alive()) d.Disconnect();
  return status;
}

}  // namespace fabrica
