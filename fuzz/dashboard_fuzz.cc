// Fuzz target: the dashboard's HTTP routes and JSON API (server/dashboard.h) as kilnd serves them,
// given a fuzzed request target (path and query) and Authorization header, over a Farm in a
// temporary folder that holds a device, jobs in several states and records. The input is
//   <path>[?<query>][\n<Authorization header value>]
// with a header going to a dashboard that asks for a token, no header to an open one. Whatever
// the request: never a 500 (an exception from a handler), every JSON body parses, and the token is
// never in a body the client did not put it in.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "base/json.h"
#include "fuzz/fuzz_check.h"
#include "server/dashboard.h"
#include "server/farm.h"
#include "server/http_server.h"
#include "tests/common/model_stream.h"
#include "tests/common/small_cnn.h"
#include "tests/common/temp_dir.h"

namespace {

using namespace kiln;

constexpr const char* kToken = "fuzz-token-5ecret";

/// The farm and both dashboards, made once per process (its folder goes when the process exits).
/// The farm's setup is all in make_farm.
struct Fixture {
  kiln::testing::TempDir dir{"kiln_fuzz_dashboard"};
  std::unique_ptr<server::Farm> farm;
  std::unique_ptr<server::Dashboard> open, guarded;
  server::HttpServer open_http, guarded_http;  // routes only: never started

  Fixture() {
    farm = make_farm(dir.file("state"));
    open = std::make_unique<server::Dashboard>(*farm, "");
    guarded = std::make_unique<server::Dashboard>(*farm, kToken);
    open->install(open_http);
    guarded->install(guarded_http);
  }

  /// The farm the requests look at: one device, a queued job with records for its tasks (errors
  /// among them), and a cancelled job. Not started: nothing changes between requests.
  static std::unique_ptr<server::Farm> make_farm(const std::string& state_dir) {
    server::FarmOptions options;
    options.state_dir = state_dir;
    auto farm = std::make_unique<server::Farm>(options);
    v1::RegisterDeviceRequest reg;
    reg.set_key("cpu");
    reg.set_target("llvm");
    farm->register_device(reg);
    server::Submission s;
    s.name = "cnn";
    s.target = "llvm";
    s.device_key = "cpu";
    s.owner = "fuzz";
    s.trials = 8;
    const std::string model = kiln::testing::small_cnn_model();
    const tracker::JobId job = farm->submit(s, kiln::testing::model_stream(model));
    const std::vector<std::string> keys = {"conv2d_nchw:1x16x12x12:a", "dense:1x10:b"};
    for (uint64_t i = 0; i < 12; ++i) {
      records::MeasureRecord r;
      r.target = "llvm";
      r.device = "fuzz-device";
      r.task_key = keys[i % keys.size()];
      r.config_index = i;
      r.config = "tile=[" + std::to_string(i) + "]";
      if (i % 5 == 3) {
        r.error = ErrorKind::kRunTimeout;
        r.error_msg = std::string("took too long <script>") + kToken;
      } else {
        r.costs_s = {1e-3 * static_cast<double>(i + 1)};
        r.gflops = 1.5;
      }
      r.timestamp_ms = 1700000000000 + static_cast<int64_t>(i);
      farm->records().append(r);
    }
    farm->update_job(job, [&](tracker::JobRecord& j) {
      j.task_keys = keys;
      j.tasks_total = static_cast<uint32_t>(keys.size());
      j.trials_done = 12;
    });
    s.name = "cancelled";
    farm->cancel(farm->submit(s, kiln::testing::model_stream(model)), "by the fuzzer");
    return farm;
  }
};

Fixture& fixture() {
  static Fixture f;  // destroyed at exit, with its folder
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  Fixture& f = fixture();
  server::HttpRequest request;
  request.method = "GET";
  const size_t newline = input.find('\n');
  const std::string target = input.substr(0, newline);
  const size_t question = target.find('?');
  request.path = target.substr(0, question);
  if (question != std::string::npos) request.query = target.substr(question + 1);
  const bool guarded = newline != std::string::npos;
  if (guarded) request.headers["authorization"] = input.substr(newline + 1);

  const server::HttpResponse r = (guarded ? f.guarded_http : f.open_http).handle(request);
  if (r.status == 500) std::fprintf(stderr, "500: %s\n", r.body.c_str());
  KILN_FUZZ_CHECK(r.status != 500);
  if (r.content_type == "application/json") {
    try {
      kiln::Json::parse(r.body, "response");
    } catch (const Error&) {
      KILN_FUZZ_CHECK(!"a JSON response that does not parse");
    }
  }
  // (A path that holds the token comes back in a 404's message: the client sent it. Escaping
  // can complete a token the path holds in part: "f\x1fuzz-token-..." comes back as
  // "f\u001fuzz-token-...", and percent-decoding can spell one; such paths are not leaks.)
  if (guarded && target.find("ecret") == std::string::npos &&
      target.find('%') == std::string::npos) {
    KILN_FUZZ_CHECK(r.body.find(kToken) == std::string::npos);
  }
  return 0;
}
