#include "deploy/runtime/kernel_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/device_tensor.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"
#include "deploy/runtime/vdla_run.h"

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Strips the "error: " that kiln::Error messages start with, so results read cleanly.
std::string error_text(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("error: ", 0) == 0) s = s.substr(7);
  return s;
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Element i (counting lanes as elements) of a compact buffer, as a double.
double element_as_double(const void* data, KilnDType dtype, int64_t i) {
  const char* p = static_cast<const char*>(data);
  switch (dtype.code) {
    case kKilnFloat:
      if (dtype.bits == 16) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        return half_to_float(h);
      }
      if (dtype.bits == 32) return reinterpret_cast<const float*>(p)[i];
      return reinterpret_cast<const double*>(p)[i];
    case kKilnInt:
      switch (dtype.bits) {
        case 8:
          return reinterpret_cast<const int8_t*>(p)[i];
        case 16:
          return reinterpret_cast<const int16_t*>(p)[i];
        case 32:
          return reinterpret_cast<const int32_t*>(p)[i];
        default:
          return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
      }
    default:
      switch (dtype.bits) {
        case 1:
        case 8:
          return reinterpret_cast<const uint8_t*>(p)[i];
        case 16:
          return reinterpret_cast<const uint16_t*>(p)[i];
        case 32:
          return reinterpret_cast<const uint32_t*>(p)[i];
        default:
          return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
      }
  }
}

// Compares output `out` (argument `arg_index`) with its reference. Returns an empty string when
// they match, else the message of a wrong answer. Raises kiln::Error when they cannot be compared
// (shape or dtype differ): that is a bad request, not a wrong kernel.
std::string compare_output(const NDArray& out, const NDArray& ref, const RunArg& arg, int arg_index,
                           double* max_error) {
  KILN_USER_CHECK(dtype_equal(out.dtype(), ref.dtype()))
      << "args[" << arg_index << "].reference '" << arg.reference << "' has dtype "
      << dtype_to_string(ref.dtype()) << ", the output is " << dtype_to_string(out.dtype());
  KILN_USER_CHECK(out.shape() == ref.shape())
      << "args[" << arg_index << "].reference '" << arg.reference << "' has shape "
      << ref.shape_string() << ", the output is " << out.shape_string();
  const int64_t n = out.num_elements() * out.dtype().lanes;
  int64_t first_bad = -1;
  int64_t num_bad = 0;
  double bad_got = 0, bad_want = 0;
  for (int64_t i = 0; i < n; ++i) {
    double got = element_as_double(out.data(), out.dtype(), i);
    double want = element_as_double(ref.data(), ref.dtype(), i);
    bool ok;
    if (std::isnan(got) || std::isnan(want)) {
      ok = std::isnan(got) && std::isnan(want);
      if (!ok) *max_error = INFINITY;
    } else if (std::isinf(got) || std::isinf(want)) {
      ok = got == want;
      if (!ok) *max_error = INFINITY;
    } else {
      double diff = std::fabs(got - want);
      *max_error = std::max(*max_error, diff);
      ok = diff <= arg.atol + arg.rtol * std::fabs(want);
    }
    if (!ok) {
      if (first_bad < 0) {
        first_bad = i;
        bad_got = got;
        bad_want = want;
      }
      ++num_bad;
    }
  }
  if (first_bad < 0) return "";
  std::ostringstream os;
  os.precision(9);
  os << "output args[" << arg_index << "] differs from '" << arg.reference << "' at index "
     << first_bad << ": got " << bad_got << ", expected " << bad_want << " (" << num_bad << " of "
     << n << " elements outside atol " << arg.atol << " + rtol " << arg.rtol << " * |expected|)";
  return os.str();
}

// Writes a buffer larger than any last-level cache, evicting the kernel's data.
void flush_cache() {
  static constexpr size_t kFlushBytes = size_t{64} << 20;
  static std::vector<unsigned char> buffer(kFlushBytes);
  static unsigned char value = 0;
  ++value;
  std::memset(buffer.data(), value, buffer.size());
  // Keep the writes observable.
  volatile unsigned char sink = buffer[buffer.size() / 2];
  (void)sink;
}

}  // namespace

double run_queue_wait_s() {
  // /proc/self/task/<tid>/schedstat: "<ns on a CPU> <ns waiting on a run queue> <timeslices>".
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/task", ec);
  if (ec) return NAN;
  double wait_ns = 0;
  bool kept = false;
  for (const auto& entry : it) {
    std::ifstream in(entry.path() / "schedstat");
    double on_cpu = 0, waiting = 0, timeslices = 0;
    if (!(in >> on_cpu >> waiting >> timeslices)) continue;  // a thread that just ended
    wait_ns += waiting;
    // Every running thread has had a timeslice; all zeros: the kernel keeps no statistics.
    kept = kept || timeslices > 0;
  }
  return kept ? wait_ns * 1e-9 : NAN;
}

RunArg RunArg::make_input(std::string npy_path) {
  RunArg a;
  a.kind = Kind::kInput;
  a.input = std::move(npy_path);
  return a;
}

RunArg RunArg::make_output(std::string dtype, std::vector<int64_t> shape, std::string reference,
                           double rtol, double atol) {
  RunArg a;
  a.kind = Kind::kOutput;
  a.dtype = std::move(dtype);
  a.shape = std::move(shape);
  a.reference = std::move(reference);
  a.rtol = rtol;
  a.atol = atol;
  return a;
}

Json RunRequest::to_json() const {
  Json::Array json_args;
  for (const RunArg& a : args) {
    Json::Object o;
    if (a.kind == RunArg::Kind::kInput) {
      o["input"] = a.input;
    } else {
      Json::Array shape;
      for (int64_t d : a.shape) shape.emplace_back(d);
      o["output"] = Json::Object{{"dtype", a.dtype}, {"shape", std::move(shape)}};
      if (!a.reference.empty()) o["reference"] = a.reference;
      o["rtol"] = a.rtol;
      o["atol"] = a.atol;
    }
    json_args.emplace_back(std::move(o));
  }
  return Json::Object{{"version", 1},
                      {"library", library},
                      {"function", function},
                      {"device", std::string(device_kind_name(device))},
                      {"args", std::move(json_args)},
                      {"number", number},
                      {"repeat", repeat},
                      {"min_repeat_ms", min_repeat_ms},
                      {"cooldown_ms", cooldown_ms},
                      {"flush_cache", flush_cache},
                      {"threads", threads},
                      {"disturbed_retry_ms", disturbed_retry_ms}};
}

RunRequest RunRequest::from_json(const Json& json) {
  const std::string what = "request";
  KILN_USER_CHECK(json.is_object()) << "the request must be a JSON object";
  RunRequest r;
  int64_t version = json.at("version", what).as_int("request.version");
  KILN_USER_CHECK(version == 1) << "request.version " << version << " is not supported (1 is)";
  r.library = json.at("library", what).as_string("request.library");
  KILN_USER_CHECK(!r.library.empty()) << "request.library must not be empty";
  r.function = json.at("function", what).as_string("request.function");
  KILN_USER_CHECK(!r.function.empty()) << "request.function must not be empty";
  if (json.has("device")) {
    r.device = parse_device_kind(json.at("device", what).as_string("request.device"));
  }
  const Json::Array& args = json.at("args", what).as_array("request.args");
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = "request.args[" + std::to_string(i) + "]";
    const Json& a = args[i];
    KILN_USER_CHECK(a.is_object()) << name << " must be an object";
    RunArg arg;
    if (a.has("input")) {
      arg = RunArg::make_input(a.at("input", name).as_string(name + ".input"));
    } else if (a.has("output")) {
      const Json& o = a.at("output", name);
      arg.kind = RunArg::Kind::kOutput;
      arg.dtype = o.at("dtype", name + ".output").as_string(name + ".output.dtype");
      for (const Json& d : o.at("shape", name + ".output").as_array(name + ".output.shape")) {
        int64_t v = d.as_int(name + ".output.shape[]");
        KILN_USER_CHECK(v >= 0) << name << ".output.shape has a negative dimension " << v;
        arg.shape.push_back(v);
      }
      if (a.has("reference"))
        arg.reference = a.at("reference", name).as_string(name + ".reference");
      if (a.has("rtol")) arg.rtol = a.at("rtol", name).as_double(name + ".rtol");
      if (a.has("atol")) arg.atol = a.at("atol", name).as_double(name + ".atol");
    } else {
      KILN_USER_ERROR() << name << " has neither 'input' nor 'output'";
    }
    r.args.push_back(std::move(arg));
  }
  if (json.has("number")) r.number = json.at("number", what).as_int("request.number");
  if (json.has("repeat")) r.repeat = json.at("repeat", what).as_int("request.repeat");
  if (json.has("min_repeat_ms")) {
    r.min_repeat_ms = json.at("min_repeat_ms", what).as_double("request.min_repeat_ms");
  }
  if (json.has("cooldown_ms")) {
    r.cooldown_ms = json.at("cooldown_ms", what).as_double("request.cooldown_ms");
  }
  if (json.has("flush_cache")) {
    r.flush_cache = json.at("flush_cache", what).as_bool("request.flush_cache");
  }
  if (json.has("threads")) {
    r.threads = static_cast<int>(json.at("threads", what).as_int("request.threads"));
  }
  if (json.has("disturbed_retry_ms")) {
    r.disturbed_retry_ms =
        json.at("disturbed_retry_ms", what).as_double("request.disturbed_retry_ms");
  }
  KILN_USER_CHECK(r.number >= 1) << "request.number must be >= 1, got " << r.number;
  KILN_USER_CHECK(r.repeat >= 1) << "request.repeat must be >= 1, got " << r.repeat;
  KILN_USER_CHECK(r.min_repeat_ms >= 0) << "request.min_repeat_ms must be >= 0";
  KILN_USER_CHECK(r.cooldown_ms >= 0) << "request.cooldown_ms must be >= 0";
  KILN_USER_CHECK(r.threads >= 0) << "request.threads must be >= 0";
  KILN_USER_CHECK(r.disturbed_retry_ms >= 0) << "request.disturbed_retry_ms must be >= 0";
  return r;
}

Json RunResult::to_json() const {
  Json::Object o{{"error", error_kind_name(error)}};
  if (!message.empty()) o["message"] = message;
  if (error == ErrorKind::kNone) {
    Json::Array costs;
    for (double c : costs_s) costs.emplace_back(c);
    o["costs_s"] = std::move(costs);
    o["number"] = number;
    o["disturbed_repeats"] = disturbed_repeats;
    o["contended"] = contended;
    if (cycles > 0) o["cycles"] = cycles;
  }
  o["wall_s"] = wall_s;
  if (std::isfinite(max_error))
    o["max_error"] = max_error;
  else
    o["max_error"] = "inf";
  return o;
}

RunResult RunResult::from_json(const Json& json) {
  RunResult r;
  r.error = error_kind_from_name(json.at("error", "result").as_string("result.error"));
  if (json.has("message")) r.message = json.at("message", "result").as_string("result.message");
  if (json.has("costs_s")) {
    for (const Json& c : json.at("costs_s", "result").as_array("result.costs_s")) {
      r.costs_s.push_back(c.as_double("result.costs_s[]"));
    }
  }
  if (json.has("number")) r.number = json.at("number", "result").as_int("result.number");
  if (json.has("disturbed_repeats")) {
    r.disturbed_repeats = json.at("disturbed_repeats", "result").as_int("result.disturbed_repeats");
  }
  if (json.has("contended"))
    r.contended = json.at("contended", "result").as_bool("result.contended");
  if (json.has("cycles")) r.cycles = json.at("cycles", "result").as_int("result.cycles");
  if (json.has("wall_s")) r.wall_s = json.at("wall_s", "result").as_double("result.wall_s");
  if (json.has("max_error")) {
    const Json& m = json.at("max_error", "result");
    // A number, or the string "inf" (JSON has no infinity).
    r.max_error = m.is_object() || m.is_array() || m.is_null() ? 0 : INFINITY;
    try {
      r.max_error = m.as_double("result.max_error");
    } catch (const Error&) {
    }
  }
  KILN_USER_CHECK(r.error != ErrorKind::kNone || !r.costs_s.empty())
      << "a result without error has no costs_s";
  return r;
}

namespace {

/// The measured function, on the CPU or on a device: one checked call, timed batches of calls,
/// and the outputs brought to the host arrays.
struct Measured {
  std::function<void()> call;                   ///< one call, finished when it returns
  std::function<double(int64_t)> time_calls_s;  ///< seconds that `n` calls take
  std::function<void()> fetch_outputs;          ///< outputs into their host arrays
};

/// A shared object's function on the CPU, timed by the wall clock.
Measured measured_on_cpu(const RunRequest& request, std::vector<NDArray>& arrays) {
  if (request.threads > 0) set_num_threads(request.threads);
  Module module = Module::load_library(request.library);
  auto func = std::make_shared<Function>(module.function(request.function));
  auto call_args = std::make_shared<std::vector<Arg>>(arrays.begin(), arrays.end());
  return {[func, call_args] { func->call(*call_args); },
          [func, call_args](int64_t n) {
            const auto t0 = Clock::now();
            for (int64_t k = 0; k < n; ++k) func->call(*call_args);
            return seconds_since(t0);
          },
          [] {}};
}

/// Why a program could not be loaded: the device compiler's refusal is the candidate's compile
/// error, anything else (a malformed file, no device) a runtime error.
struct ProgramLoadError : Error {
  using Error::Error;
};

/// A DeviceProgram on device 0 of its kind, timed by the device's events: the inputs copied there
/// once, the outputs allocated there.
Measured measured_on_device(const RunRequest& request, TargetKind kind,
                            std::vector<NDArray>& arrays) {
  std::ifstream in(request.library, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "cannot read the device program '" << request.library << "'";
  std::stringstream text;
  text << in.rdbuf();
  DeviceProgram program =
      DeviceProgram::from_json(Json::parse(text.str(), request.library), request.library);
  KILN_USER_CHECK(program.name == request.function)
      << "the device program '" << request.library << "' is '" << program.name << "', not '"
      << request.function << "'";
  KILN_USER_CHECK(program.params.size() == arrays.size())
      << "the device program '" << program.name << "' takes " << program.params.size()
      << " tensors, the request passes " << arrays.size();
  DeviceAPI& device = DeviceAPI::get(kind);
  std::shared_ptr<LoadedDeviceProgram> loaded;
  try {
    loaded = std::make_shared<LoadedDeviceProgram>(device, std::move(program));
  } catch (const std::exception& e) {
    throw ProgramLoadError(error_text(e));
  }
  auto tensors = std::make_shared<std::vector<DeviceTensor>>();
  for (size_t i = 0; i < arrays.size(); ++i) {
    const DeviceProgram::Tensor& p = loaded->program().params[i];
    KILN_USER_CHECK(dtype_equal(p.dtype, arrays[i].dtype()) && p.shape == arrays[i].shape())
        << "args[" << i << "] is " << dtype_to_string(arrays[i].dtype()) << " "
        << arrays[i].shape_string() << ", the device program's tensor '" << p.name
        << "' is another dtype or shape";
    tensors->push_back(request.args[i].kind == RunArg::Kind::kInput
                           ? DeviceTensor::from_host(device, arrays[i])
                           : DeviceTensor::empty(device, arrays[i].shape(), arrays[i].dtype()));
  }
  auto buffers = std::make_shared<std::vector<const DeviceBuffer*>>();
  for (const DeviceTensor& t : *tensors) buffers->push_back(&t.buffer());
  auto launch = [loaded, buffers] {
    loaded->launch(std::span<const DeviceBuffer* const>(*buffers));
  };
  return {[launch, &device] {
            launch();
            device.synchronize();
          },
          [launch, &device](int64_t n) {
            return device.time_ms([&] {
              for (int64_t k = 0; k < n; ++k) launch();
            }) / 1000.0;
          },
          [tensors, &request, &arrays] {
            for (size_t i = 0; i < arrays.size(); ++i) {
              if (request.args[i].kind == RunArg::Kind::kOutput)
                (*tensors)[i].copy_to_host(arrays[i]);
            }
          }};
}

/// `result` as a failure of `kind`: no costs, no cycles, the time since `start`.
RunResult failed(RunResult& result, ErrorKind kind, std::string message, Clock::time_point start) {
  result.error = kind;
  result.message = std::move(message);
  result.costs_s.clear();
  result.cycles = 0;
  result.wall_s = seconds_since(start);
  return result;
}

/// A VDLA program on the simulator (vdla_run.h): one run, checked, whose cost is the cycle
/// model's time; `repeat`, `number` and the timing options do not apply (it is deterministic).
RunResult run_on_vdla(const RunRequest& request) {
  const auto start = Clock::now();
  RunResult result;
  auto fail = [&](ErrorKind kind, std::string message) {
    return failed(result, kind, std::move(message), start);
  };
  std::vector<NDArray> arrays;
  std::vector<NDArray> references(request.args.size());
  std::vector<bool> is_output;
  VdlaRun run;
  try {
    for (size_t i = 0; i < request.args.size(); ++i) {
      const RunArg& a = request.args[i];
      is_output.push_back(a.kind == RunArg::Kind::kOutput);
      if (a.kind == RunArg::Kind::kInput) {
        arrays.push_back(load_npy(a.input));
      } else {
        arrays.push_back(NDArray::empty(a.shape, parse_dtype(a.dtype)));
        if (!a.reference.empty()) references[i] = load_npy(a.reference);
      }
    }
    run = run_vdla_program(request.library, request.function, arrays, is_output);
  } catch (const std::exception& e) {
    // A malformed program, tensors that do not match it, a stream the device refuses (a row out
    // of range, a deadlock): the candidate's runtime error, named by the simulator.
    return fail(ErrorKind::kRuntimeError, error_text(e));
  }
  try {
    for (size_t i = 0; i < request.args.size(); ++i) {
      if (!references[i].defined()) continue;
      std::string bad = compare_output(arrays[i], references[i], request.args[i],
                                       static_cast<int>(i), &result.max_error);
      if (!bad.empty()) return fail(ErrorKind::kWrongAnswer, bad);
    }
  } catch (const std::exception& e) {
    return fail(ErrorKind::kRuntimeError, error_text(e));
  }
  result.costs_s = {run.seconds};
  result.cycles = static_cast<int64_t>(run.stats.cycles);
  result.number = 1;
  result.wall_s = seconds_since(start);
  return result;
}

}  // namespace

RunResult run_kernel(const RunRequest& request) {
  if (request.device == TargetKind::kVdla) return run_on_vdla(request);
  const auto start = Clock::now();
  RunResult result;
  auto fail = [&](ErrorKind kind, std::string message) {
    return failed(result, kind, std::move(message), start);
  };

  // Everything up to the first call: a failure here is a bad request or a bad library.
  Measured measured;
  std::vector<NDArray> arrays;
  std::vector<NDArray> references(request.args.size());
  try {
    KILN_USER_CHECK(!request.function.empty()) << "request.function must not be empty";
    KILN_USER_CHECK(request.number >= 1) << "request.number must be >= 1";
    KILN_USER_CHECK(request.repeat >= 1) << "request.repeat must be >= 1";
    arrays.reserve(request.args.size());
    for (size_t i = 0; i < request.args.size(); ++i) {
      const RunArg& a = request.args[i];
      if (a.kind == RunArg::Kind::kInput) {
        arrays.push_back(load_npy(a.input));
      } else {
        arrays.push_back(NDArray::empty(a.shape, parse_dtype(a.dtype)));
        if (!a.reference.empty()) references[i] = load_npy(a.reference);
      }
    }
    measured = request.device == TargetKind::kCpu
                   ? measured_on_cpu(request, arrays)
                   : measured_on_device(request, request.device, arrays);
  } catch (const ProgramLoadError& e) {
    return fail(ErrorKind::kCompileError, e.what());
  } catch (const std::exception& e) {
    return fail(ErrorKind::kRuntimeError, error_text(e));
  }

  try {
    // The warm-up call, whose outputs are checked.
    measured.call();
    measured.fetch_outputs();
    for (size_t i = 0; i < request.args.size(); ++i) {
      if (!references[i].defined()) continue;
      std::string bad = compare_output(arrays[i], references[i], request.args[i],
                                       static_cast<int>(i), &result.max_error);
      if (!bad.empty()) return fail(ErrorKind::kWrongAnswer, bad);
    }

    int64_t number = request.number;
    const double min_repeat_s = request.min_repeat_ms / 1000.0;
    double retry_left_s = request.disturbed_retry_ms / 1000.0;  // for disturbed repeats only
    for (int64_t rep = 0; rep < request.repeat; ++rep) {
      if (rep > 0 && request.cooldown_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(request.cooldown_ms));
      }
      if (request.flush_cache) flush_cache();
      for (;;) {
        const double wait0 = run_queue_wait_s();
        const auto t0 = Clock::now();
        const double dur = measured.time_calls_s(number);
        const double wall = seconds_since(t0);
        if (dur >= min_repeat_s || number >= (int64_t{1} << 40)) {
          const double cost = dur / static_cast<double>(number);
          // Disturbed: waited for a CPU more than 1% of the time (NaN compares false: never).
          if (run_queue_wait_s() - wait0 > 0.01 * wall) {
            ++result.disturbed_repeats;
            if (retry_left_s > 0) {
              retry_left_s -= wall;
              if (request.flush_cache) flush_cache();
              continue;  // time this repeat again
            }
            result.contended = true;  // kept: the allowance is spent
          }
          result.costs_s.push_back(cost);
          break;
        }
        // Too short: at least double, enough to reach the minimum at the measured speed.
        const double per_call = std::max(dur / static_cast<double>(number), 1e-9);
        const double needed = std::ceil(min_repeat_s / per_call) + 1;
        number = std::max(number * 2, static_cast<int64_t>(std::min(needed, 1e12)));
        if (request.flush_cache) flush_cache();
      }
    }
    result.number = number;
  } catch (const std::exception& e) {
    return fail(ErrorKind::kRuntimeError, error_text(e));
  }
  result.wall_s = seconds_since(start);
  return result;
}

RunResult run_kernel_json(const std::string& request_json) {
  RunRequest request;
  try {
    request = RunRequest::from_json(Json::parse(request_json, "request"));
  } catch (const std::exception& e) {
    RunResult r;
    r.error = ErrorKind::kRuntimeError;
    r.message = "bad request: " + error_text(e);
    return r;
  }
  return run_kernel(request);
}

}  // namespace kiln::runtime
