// What the farm's tests share: a kilnd process on 127.0.0.1 with free ports, stubs to talk to it,
// and polling helpers.
//
//   TempDir dir;
//   Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu"});
//   auto stub = kilnd.service();
//   grpc::ClientContext ctx;  ...
//   kilnd.kill(SIGKILL);  kilnd.start();   // same state folder and ports: a restart
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/kiln/v1/driver.grpc.pb.h"
#include "proto/kiln/v1/service.grpc.pb.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/model_upload.h"
#include "tests/common/child_process.h"
#include "tests/common/temp_dir.h"

namespace kiln::testing {

/// Polls `pred` every 50 ms until it holds or `timeout` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

class Kilnd {
 public:
  /// Starts kilnd with its state in dir/state (plus `args`); `env` adds environment variables.
  Kilnd(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> env = {})
      : dir_(dir), args_(std::move(args)), env_(std::move(env)) {
    start();
  }

  /// (Re)starts kilnd: the first time on free ports, later on the same ones.
  void start() {
    std::vector<std::string> argv = {KILND_BINARY,
                                     "--listen",
                                     grpc_.empty() ? "127.0.0.1:0" : grpc_,
                                     "--http",
                                     http_.empty() ? "127.0.0.1:0" : http_,
                                     "--state",
                                     dir_.file("state")};
    argv.insert(argv.end(), args_.begin(), args_.end());
    process_ = std::make_unique<ChildProcess>(
        argv, dir_.file("kilnd." + std::to_string(++starts_) + ".log"), env_);
    const std::string line = process_->wait_for_line("kilnd listening", std::chrono::seconds(60));
    std::smatch m;
    static const std::regex re("grpc=(\\S+) http=(\\S+)");
    if (!std::regex_search(line, m, re)) throw std::runtime_error("unexpected line: " + line);
    grpc_ = m[1];
    http_ = m[2];
    channel_.reset();
  }
  void kill(int sig) {
    process_->signal(sig);
    process_->wait();
  }
  ChildProcess& process() { return *process_; }

  const std::string& grpc_address() const { return grpc_; }
  const std::string& http_address() const { return http_; }
  std::string state_dir() const { return dir_.file("state"); }

  std::shared_ptr<grpc::Channel> channel(const std::string& ca = "") {
    if (!ca.empty()) return rpc::make_channel(grpc_, ca);
    if (!channel_) channel_ = rpc::make_channel(grpc_, "");
    return channel_;
  }
  std::unique_ptr<v1::KilnService::Stub> service(const std::string& ca = "") {
    return v1::KilnService::NewStub(channel(ca));
  }
  std::unique_ptr<v1::Tracker::Stub> tracker(const std::string& ca = "") {
    return v1::Tracker::NewStub(channel(ca));
  }

 private:
  const TempDir& dir_;
  std::vector<std::string> args_, env_;
  std::string grpc_, http_;
  int starts_ = 0;
  std::unique_ptr<ChildProcess> process_;
  std::shared_ptr<grpc::Channel> channel_;
};

/// A context with a deadline and, when given, the token.
inline std::unique_ptr<grpc::ClientContext> context(
    const std::string& token = "", std::chrono::seconds deadline = std::chrono::seconds(30)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  rpc::add_token(*ctx, token);
  return ctx;
}

/// SubmitModel of `job` with `model` sent in chunks (rpc::submit_model): the call's status, and
/// the new job's id in `resp` when it is OK.
inline grpc::Status submit_model(v1::KilnService::Stub& service, grpc::ClientContext& ctx,
                                 const v1::SubmitModelRequest& job, const std::string& model,
                                 v1::SubmitModelResponse* resp) {
  std::istringstream in(model);
  return rpc::submit_model(service, ctx, job, in, model.size(), resp);
}

/// Fetches job `job_id`'s bundle (FetchBundle's chunks) into the file `path`; false when the
/// stream failed.
inline bool fetch_bundle(v1::KilnService::Stub& service, uint64_t job_id, const std::string& path) {
  v1::FetchBundleRequest fetch;
  fetch.set_job_id(job_id);
  auto ctx = context();
  auto chunks = service.FetchBundle(ctx.get(), fetch);
  std::string bytes;
  v1::BundleChunk c;
  while (chunks->Read(&c)) bytes += c.data();
  if (!chunks->Finish().ok()) return false;
  std::ofstream(path, std::ios::binary) << bytes;
  return true;
}

/// Waits until kilnd lists `n` devices (an agent it started registers through its port).
inline bool wait_for_devices(v1::KilnService::Stub& service, int n,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return eventually(
      [&] {
        v1::ListDevicesResponse d;
        return service.ListDevices(context().get(), {}, &d).ok() && d.devices_size() == n;
      },
      timeout);
}

/// What a tiny HTTP/1.0 client got back: status code and body.
struct HttpResponse {
  int status = 0;
  std::string body;
};
/// Sends `method` `path` (HTTP/1.0) to ADDRESS and returns status and body.
inline HttpResponse http_request(const std::string& address, const std::string& method,
                                 const std::string& path, const std::string& extra_headers = "") {
  const size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    throw std::runtime_error("cannot connect to " + address);
  }
  const std::string req = method + " " + path + " HTTP/1.0\r\nHost: " + address +
                          "\r\nContent-Length: 0\r\n" + extra_headers + "\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    throw std::runtime_error("cannot send to " + address);
  }
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  HttpResponse r;
  if (resp.rfind("HTTP/", 0) == 0) r.status = std::stoi(resp.substr(resp.find(' ') + 1, 3));
  const size_t body = resp.find("\r\n\r\n");
  if (body != std::string::npos) r.body = resp.substr(body + 4);
  return r;
}

/// GET http://ADDRESS/PATH.
inline HttpResponse http_get(const std::string& address, const std::string& path,
                             const std::string& extra_headers = "") {
  return http_request(address, "GET", path, extra_headers);
}

}  // namespace kiln::testing
