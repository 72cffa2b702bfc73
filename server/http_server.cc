#include "server/http_server.h"

#include <civetweb.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <string>

#include "base/error.h"
#include "base/json.h"

namespace kiln::server {

namespace {

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// civetweb reports why mg_start failed through log_message; mg_start runs on the caller's
// thread, so a thread_local collects it.
thread_local std::string start_error;

}  // namespace

std::string HttpRequest::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpRequest::param(const std::string& name) const {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string part = query.substr(pos, amp - pos);
    const size_t eq = part.find('=');
    if (part.substr(0, eq) == name) return eq == std::string::npos ? "" : part.substr(eq + 1);
    pos = amp + 1;
  }
  return "";
}

HttpResponse HttpResponse::json(std::string body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::error(int status, const std::string& message) {
  kiln::Json::Object o;
  o["error"] = message;
  o["status"] = status;
  return json(kiln::Json(std::move(o)).dump(), status);
}

HttpResponse HttpResponse::text(std::string body, std::string content_type) {
  HttpResponse r;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& path, Handler handler) {
  exact_[path] = std::move(handler);
}

void HttpServer::route_prefix(const std::string& prefix, Handler handler) {
  prefixes_[prefix] = std::move(handler);
}

HttpResponse HttpServer::handle(const HttpRequest& request) const {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = HttpResponse::error(
        405, "method " + request.method + " not allowed: this server is read-only (GET)");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  const Handler* handler = nullptr;
  if (auto it = exact_.find(request.path); it != exact_.end()) {
    handler = &it->second;
  } else {
    size_t best = 0;
    for (const auto& [prefix, h] : prefixes_) {
      if (request.path.rfind(prefix, 0) == 0 && prefix.size() >= best) {
        best = prefix.size();
        handler = &h;
      }
    }
  }
  if (!handler) return HttpResponse::error(404, "no such path: " + request.path);
  try {
    return (*handler)(request);
  } catch (const std::exception& e) {
    return HttpResponse::error(500, std::string("internal error: ") + e.what());
  }
}

int HttpServer::on_request(mg_connection* conn, void* self) {
  const mg_request_info* info = mg_get_request_info(conn);
  HttpRequest req;
  req.method = info->request_method ? info->request_method : "";
  req.path = info->local_uri ? info->local_uri : "";
  req.query = info->query_string ? info->query_string : "";
  for (int i = 0; i < info->num_headers; ++i)
    req.headers[lower(info->http_headers[i].name)] = info->http_headers[i].value;
  const HttpResponse resp = static_cast<const HttpServer*>(self)->handle(req);

  std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason(resp.status) +
                     "\r\nContent-Type: " + resp.content_type +
                     "\r\nContent-Length: " + std::to_string(resp.body.size()) +
                     "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  for (const auto& [name, value] : resp.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  mg_write(conn, head.data(), head.size());
  if (req.method != "HEAD") mg_write(conn, resp.body.data(), resp.body.size());
  return static_cast<int>(resp.status);  // handled: civetweb logs this status
}

int HttpServer::start(const std::string& bind_address) {
  KILN_USER_CHECK(!ctx_) << "http: already serving on port " << port_;
  KILN_USER_CHECK(!bind_address.empty()) << "http: empty bind address";
  const char* options[] = {"listening_ports",
                           bind_address.c_str(),
                           "num_threads",
                           "8",
                           "enable_keep_alive",
                           "yes",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char* message) {
    start_error = message ? message : "";
    return 1;  // handled: nothing on stderr
  };
  start_error.clear();
  mg_init_library(0);
  ctx_ = mg_start(&callbacks, nullptr, options);
  KILN_USER_CHECK(ctx_) << "http: cannot serve on \"" << bind_address << "\""
                        << (start_error.empty() ? "" : ": " + start_error);
  mg_set_request_handler(ctx_, "/", &HttpServer::on_request, this);
  mg_server_port ports[4];
  const int n = mg_get_server_ports(ctx_, 4, ports);
  if (n <= 0) {
    stop();
    KILN_USER_ERROR() << "http: no listening port for \"" << bind_address << "\"";
  }
  port_ = ports[0].port;
  return port_;
}

void HttpServer::stop() {
  if (ctx_) mg_stop(ctx_);
  ctx_ = nullptr;
}

}  // namespace kiln::server
