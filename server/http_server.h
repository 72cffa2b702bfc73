// kilnd's one HTTP server (civetweb): /metrics, the dashboard page and its JSON API all go through
// it. Routes map a path (exact) or a path prefix (ending in '/') to a handler that turns a
// request into a response; anything unrouted gets 404 with a JSON error. Handlers run on
// civetweb's worker threads, so they must be thread-safe; an exception from one becomes a 500
// whose body names it.
//
//   HttpServer http;
//   http.route("/metrics", [&](const HttpRequest&) { return HttpResponse::text(m.text()); });
//   http.route_prefix("/api/v1/jobs/", [&](const HttpRequest& r) { ... r.path ... });
//   int port = http.start("127.0.0.1:0");   // port 0 picks a free one, returned
//   ...
//   http.stop();                              // also done by the destructor
//
// Only GET and HEAD are answered (405 otherwise): everything served is read-only.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

struct mg_context;
struct mg_connection;

namespace kiln::server {

struct HttpRequest {
  std::string method;                          ///< "GET" or "HEAD"
  std::string path;                            ///< decoded, without the query
  std::string query;                           ///< after '?', undecoded; "" when none
  std::map<std::string, std::string> headers;  ///< names lower-cased

  /// Header `name` (lower case), or "" when absent.
  std::string header(const std::string& name) const;
  /// Query parameter `name` (undecoded), or "" when absent.
  std::string param(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra ones

  static HttpResponse json(std::string body, int status = 200);
  /// {"error": message, "status": status}.
  static HttpResponse error(int status, const std::string& message);
  static HttpResponse text(std::string body, std::string content_type = "text/plain");
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer() = default;
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Serves exactly `path`. Routes are added before start().
  void route(const std::string& path, Handler handler);
  /// Serves every path starting with `prefix`; the longest matching prefix wins, an exact route
  /// wins over every prefix.
  void route_prefix(const std::string& prefix, Handler handler);

  /// Listens on `bind_address` ("127.0.0.1:7071"; port 0 picks a free one) and returns the port.
  /// kiln::Error naming the address when it cannot listen, or when already started.
  int start(const std::string& bind_address);
  /// Stops listening and waits for the handlers running; idempotent.
  void stop();
  int port() const { return port_; }

  /// What a request gets (routing included), without a socket: for tests and benchmarks.
  HttpResponse handle(const HttpRequest& request) const;

 private:
  static int on_request(mg_connection* conn, void* self);

  std::map<std::string, Handler> exact_;
  std::map<std::string, Handler> prefixes_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace kiln::server
