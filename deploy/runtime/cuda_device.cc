// CUDA behind DeviceAPI, through the driver API loaded with dlopen("libcuda.so.1"): a binary
// linked to libcuda does not even start on a machine without the NVIDIA driver, and the runtime
// must start everywhere. The few types, constants and prototypes used are declared here as
// CUDA 13's cuda.h declares them (the driver's ABI keeps them), under the symbol names cuda.h maps
// to (cuMemAlloc is cuMemAlloc_v2, ...). A device is its primary context, made current on the
// calling thread before every call; launches go to the default stream.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_backends.h"

namespace kiln::runtime::detail {
namespace {

// ---- the driver API's declarations (cuda.h) ----
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr unsigned CU_EVENT_DEFAULT = 0;

/// The driver's entry points, named as the symbols libcuda.so.1 exports.
struct CudaDriver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* pointer, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr pointer);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options,
                                 int* options, void** option_values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent stop);
  CUresult (*cuEventDestroy_v2)(CUevent event);
};

/// The driver, loaded and initialized once per process, or why not.
struct LoadedDriver {
  CudaDriver api{};
  int device_count = 0;
  std::string error;  ///< empty when loaded and at least one device is seen
};

std::string error_name(const CudaDriver& cu, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out = cu.cuGetErrorName(result, &name) == CUDA_SUCCESS && name
                        ? name
                        : "CUDA error " + std::to_string(result);
  if (cu.cuGetErrorString(result, &text) == CUDA_SUCCESS && text)
    out += " (" + std::string(text) + ")";
  return out;
}

template <typename F>
bool bind(void* library, const char* symbol, F& function, std::string* error) {
  function = reinterpret_cast<F>(dlsym(library, symbol));
  if (function == nullptr && error->empty()) {
    *error = std::string("no CUDA device: libcuda.so.1 has no ") + symbol +
             " (the NVIDIA driver is too old)";
  }
  return function != nullptr;
}

LoadedDriver load_driver() {
  LoadedDriver driver;
  // Never closed: the driver stays loaded for the process, as linking it would.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    if (reason == nullptr || std::strstr(reason, "No such file") != nullptr) {
      driver.error = "no CUDA device: libcuda.so.1 not found (no NVIDIA driver on this machine)";
    } else {
      driver.error = std::string("no CUDA device: cannot load libcuda.so.1: ") + reason;
    }
    return driver;
  }
  CudaDriver& cu = driver.api;
  std::string* error = &driver.error;
#define KILN_BIND_CUDA(name) bind(library, #name, cu.name, error)
  KILN_BIND_CUDA(cuInit), KILN_BIND_CUDA(cuDriverGetVersion), KILN_BIND_CUDA(cuGetErrorName),
      KILN_BIND_CUDA(cuGetErrorString), KILN_BIND_CUDA(cuDeviceGetCount),
      KILN_BIND_CUDA(cuDeviceGet), KILN_BIND_CUDA(cuDeviceGetName),
      KILN_BIND_CUDA(cuDeviceGetAttribute), KILN_BIND_CUDA(cuDeviceTotalMem_v2),
      KILN_BIND_CUDA(cuDevicePrimaryCtxRetain), KILN_BIND_CUDA(cuCtxSetCurrent),
      KILN_BIND_CUDA(cuCtxSynchronize), KILN_BIND_CUDA(cuMemAlloc_v2), KILN_BIND_CUDA(cuMemFree_v2),
      KILN_BIND_CUDA(cuMemcpyHtoD_v2), KILN_BIND_CUDA(cuMemcpyDtoH_v2),
      KILN_BIND_CUDA(cuMemcpyDtoD_v2), KILN_BIND_CUDA(cuModuleLoadDataEx),
      KILN_BIND_CUDA(cuModuleUnload), KILN_BIND_CUDA(cuModuleGetFunction),
      KILN_BIND_CUDA(cuFuncSetAttribute), KILN_BIND_CUDA(cuLaunchKernel),
      KILN_BIND_CUDA(cuEventCreate), KILN_BIND_CUDA(cuEventRecord),
      KILN_BIND_CUDA(cuEventSynchronize), KILN_BIND_CUDA(cuEventElapsedTime),
      KILN_BIND_CUDA(cuEventDestroy_v2);
#undef KILN_BIND_CUDA
  if (!error->empty()) return driver;
  if (CUresult r = cu.cuInit(0); r != CUDA_SUCCESS) {
    *error = "no CUDA device: cuInit failed: " + error_name(cu, r);
    return driver;
  }
  if (CUresult r = cu.cuDeviceGetCount(&driver.device_count); r != CUDA_SUCCESS) {
    *error = "no CUDA device: cuDeviceGetCount failed: " + error_name(cu, r);
    driver.device_count = 0;
  } else if (driver.device_count == 0) {
    *error = "no CUDA device: the NVIDIA driver sees no GPU";
  }
  return driver;
}

const LoadedDriver& loaded_driver() {
  static const LoadedDriver driver = load_driver();  // thread-safe, once
  return driver;
}

/// Each kernel's parameter sizes in bytes, read from the PTX's `.entry name( .param .u64 p, ...)`
/// so that a launch with the wrong arguments is refused instead of reading past them. A kernel
/// whose parameters are not all scalars (an aggregate `.b8 p[16]`) is left out.
std::vector<std::pair<std::string, std::vector<int>>> ptx_entries(const std::string& ptx) {
  std::vector<std::pair<std::string, std::vector<int>>> entries;
  for (size_t at = ptx.find(".entry"); at != std::string::npos; at = ptx.find(".entry", at + 6)) {
    size_t name_begin = ptx.find_first_not_of(" \t\r\n", at + 6);
    size_t name_end = ptx.find_first_of(" \t\r\n(", name_begin);
    size_t open = ptx.find('(', name_end);
    size_t close = ptx.find(')', open);
    if (name_begin == std::string::npos || open == std::string::npos ||
        close == std::string::npos) {
      break;
    }
    std::vector<int> sizes;
    bool scalars = true;
    std::istringstream params(ptx.substr(open + 1, close - open - 1));
    for (std::string param; std::getline(params, param, ',');) {
      if (param.find(".param") == std::string::npos) continue;
      if (param.find('[') != std::string::npos) scalars = false;
      int bits = 0;
      for (const char* type : {".u", ".s", ".b", ".f"}) {
        for (size_t t = param.find(type); t != std::string::npos; t = param.find(type, t + 1)) {
          if (t + 2 < param.size() && std::isdigit(static_cast<unsigned char>(param[t + 2]))) {
            bits = std::atoi(param.c_str() + t + 2);
          }
        }
      }
      if (bits == 0) scalars = false;
      sizes.push_back(bits / 8);
    }
    if (scalars) entries.emplace_back(ptx.substr(name_begin, name_end - name_begin), sizes);
    at = close;
  }
  return entries;
}

class CudaDevice;

class CudaModule final : public DeviceModuleNode {
 public:
  CudaModule(CudaDevice& device, CUmodule module, const std::string& ptx)
      : device_(device), module_(module), entries_(ptx_entries(ptx)) {}
  ~CudaModule() override;
  void* kernel(const std::string& name) override;
  DeviceAPI& device() const override;

  /// The parameter sizes of kernel `name`, if the PTX declares them plainly.
  const std::vector<int>* parameter_sizes(const std::string& name) const {
    for (const auto& [entry, sizes] : entries_) {
      if (entry == name) return &sizes;
    }
    return nullptr;
  }

 private:
  CudaDevice& device_;
  CUmodule module_;
  std::vector<std::pair<std::string, std::vector<int>>> entries_;
};

class CudaDevice final : public DeviceAPI {
 public:
  CudaDevice(const CudaDriver& cu, int index, CUcontext context, DeviceInfo info)
      : DeviceAPI(TargetKind::kCuda, index, std::move(info)), cu_(cu), context_(context) {}

  const char* module_format() const override { return "ptx"; }
  const CudaDriver& driver() const { return cu_; }

  /// Makes this device's context current on the calling thread (cheap; every call needs it).
  void make_current() const { check(cu_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

  /// make_current for destructors: false instead of an error.
  bool try_make_current() const noexcept { return cu_.cuCtxSetCurrent(context_) == CUDA_SUCCESS; }

  void check(CUresult result, const std::string& call) const {
    KILN_USER_CHECK(result == CUDA_SUCCESS)
        << description() << ": " << call << " failed: " << error_name(cu_, result);
  }

  void synchronize() override {
    make_current();
    check(cu_.cuCtxSynchronize(), "cuCtxSynchronize");
  }

  double time_ms(const std::function<void()>& launches) override {
    make_current();
    struct Events {
      const CudaDriver& cu;
      CUevent start = nullptr, stop = nullptr;
      ~Events() {
        if (start) cu.cuEventDestroy_v2(start);
        if (stop) cu.cuEventDestroy_v2(stop);
      }
    } events{cu_};
    check(cu_.cuEventCreate(&events.start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(cu_.cuEventCreate(&events.stop, CU_EVENT_DEFAULT), "cuEventCreate");
    const int64_t launched_before = launch_count_.load();
    check(cu_.cuEventRecord(events.start, nullptr), "cuEventRecord");
    launches();
    make_current();  // `launches` may have used another device
    check(cu_.cuEventRecord(events.stop, nullptr), "cuEventRecord");
    check(cu_.cuEventSynchronize(events.stop), "cuEventSynchronize");
    KILN_USER_CHECK(launch_count_.load() > launched_before)
        << description() << ": time_ms: the work launched no kernel";
    float ms = 0;
    check(cu_.cuEventElapsedTime(&ms, events.start, events.stop), "cuEventElapsedTime");
    return ms;
  }

 protected:
  uint64_t allocate(int64_t bytes) override {
    make_current();
    CUdeviceptr pointer = 0;
    check(cu_.cuMemAlloc_v2(&pointer, static_cast<size_t>(bytes)),
          "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    return pointer;
  }

  void deallocate(uint64_t pointer) noexcept override {
    // Errors are ignored: at exit the driver may already have torn the context down.
    if (try_make_current()) cu_.cuMemFree_v2(pointer);
  }

  void write(uint64_t dst, int64_t dst_offset, const void* src, int64_t bytes) override {
    make_current();
    check(cu_.cuMemcpyHtoD_v2(dst + dst_offset, src, static_cast<size_t>(bytes)), "cuMemcpyHtoD");
  }

  void read(void* dst, uint64_t src, int64_t src_offset, int64_t bytes) override {
    make_current();
    check(cu_.cuMemcpyDtoH_v2(dst, src + src_offset, static_cast<size_t>(bytes)), "cuMemcpyDtoH");
  }

  void copy(uint64_t dst, int64_t dst_offset, uint64_t src, int64_t src_offset,
            int64_t bytes) override {
    make_current();
    check(cu_.cuMemcpyDtoD_v2(dst + dst_offset, src + src_offset, static_cast<size_t>(bytes)),
          "cuMemcpyDtoD");
    check(cu_.cuCtxSynchronize(), "cuCtxSynchronize after cuMemcpyDtoD");
  }

  std::shared_ptr<DeviceModuleNode> load(const std::string& ptx) override {
    make_current();
    std::string log(64 * 1024, '\0');
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
    CUmodule module = nullptr;
    const CUresult result = cu_.cuModuleLoadDataEx(&module, ptx.c_str(), 2, options, values);
    if (result != CUDA_SUCCESS) {
      log.resize(strnlen(log.c_str(), log.size()));
      std::istringstream lines(ptx);
      std::ostringstream head;
      std::string line;
      for (int n = 1; n <= 20 && std::getline(lines, line); ++n)
        head << "\n  " << n << "| " << line;
      std::string hint;
      if (result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
        const size_t version = ptx.find(".version");
        hint = "\nthe PTX's " +
               (version == std::string::npos
                    ? std::string("version")
                    : ptx.substr(version, ptx.find('\n', version) - version)) +
               " is newer than " + info().platform +
               " compiles (CUDA 13's NVRTC writes PTX ISA 9.0, which needs driver 580 or newer)";
      }
      KILN_USER_ERROR() << description() << ": the PTX does not load: cuModuleLoadDataEx failed: "
                        << error_name(cu_, result) << hint << "\nJIT log:\n"
                        << (log.empty() ? "(empty)" : log) << "\nPTX begins:" << head.str();
    }
    return std::make_shared<CudaModule>(*this, module, ptx);
  }

  void enqueue(const DeviceKernelHandle& kernel, const LaunchConfig& config,
               std::span<const KernelArg> args) override {
    const auto& module = static_cast<const CudaModule&>(*kernel.module());
    if (const std::vector<int>* sizes = module.parameter_sizes(kernel.name())) {
      KILN_USER_CHECK(sizes->size() == args.size())
          << "kernel '" << kernel.name() << "' takes " << sizes->size() << " arguments, got "
          << args.size();
      for (size_t i = 0; i < args.size(); ++i) {
        const int bytes =
            args[i].kind() == KernelArg::Kind::kInt32 || args[i].kind() == KernelArg::Kind::kFloat32
                ? 4
                : 8;
        KILN_USER_CHECK((*sizes)[i] == bytes)
            << "kernel '" << kernel.name() << "': argument " << i << " is " << bytes
            << " bytes, the PTX parameter " << (*sizes)[i];
      }
    }
    union Value {
      CUdeviceptr pointer;
      int32_t i32;
      int64_t i64;
      float f32;
    };
    std::vector<Value> values(args.size());
    std::vector<void*> params(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      switch (args[i].kind()) {
        case KernelArg::Kind::kBuffer:
          values[i].pointer = args[i].buffer().native();
          break;
        case KernelArg::Kind::kInt32:
          values[i].i32 = args[i].int32();
          break;
        case KernelArg::Kind::kInt64:
          values[i].i64 = args[i].int64();
          break;
        case KernelArg::Kind::kFloat32:
          values[i].f32 = args[i].float32();
          break;
      }
      params[i] = &values[i];
    }
    make_current();
    auto function = static_cast<CUfunction>(kernel.native());
    const int dynamic_shared = static_cast<int>(config.dyn_shared_bytes);
    if (dynamic_shared > info().shared_memory_per_block) {
      check(cu_.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   dynamic_shared),
            "kernel '" + kernel.name() + "': cuFuncSetAttribute(max dynamic shared memory " +
                std::to_string(dynamic_shared) + ")");
    }
    auto u = [](int64_t v) { return static_cast<unsigned>(v); };
    check(cu_.cuLaunchKernel(function, u(config.grid[0]), u(config.grid[1]), u(config.grid[2]),
                             u(config.block[0]), u(config.block[1]), u(config.block[2]),
                             u(config.dyn_shared_bytes), nullptr, params.data(), nullptr),
          "kernel '" + kernel.name() + "': cuLaunchKernel");
    ++launch_count_;
  }

 private:
  const CudaDriver& cu_;
  CUcontext context_;
  std::atomic<int64_t> launch_count_{0};
};

CudaModule::~CudaModule() {
  // Errors are ignored: at exit the driver may already have torn the context down.
  if (device_.try_make_current()) device_.driver().cuModuleUnload(module_);
}

void* CudaModule::kernel(const std::string& name) {
  device_.make_current();
  CUfunction function = nullptr;
  const CUresult result = device_.driver().cuModuleGetFunction(&function, module_, name.c_str());
  if (result == CUDA_ERROR_NOT_FOUND) {
    std::string names;
    for (const auto& [entry, sizes] : entries_) names += (names.empty() ? "" : ", ") + entry;
    KILN_USER_ERROR() << "no kernel '" << name << "' in the PTX module loaded on "
                      << device_.description()
                      << " (its kernels: " << (names.empty() ? "none" : names) << ")";
  }
  device_.check(result, "cuModuleGetFunction('" + name + "')");
  return function;
}

DeviceAPI& CudaModule::device() const { return device_; }

DeviceInfo query_info(const CudaDriver& cu, CUdevice device) {
  auto check = [&](CUresult result, const char* call) {
    KILN_USER_CHECK(result == CUDA_SUCCESS)
        << "CUDA device " << device << ": " << call << " failed: " << error_name(cu, result);
  };
  auto attribute = [&](int which) {
    int value = 0;
    check(cu.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
    return value;
  };
  DeviceInfo info;
  char name[256] = {};
  check(cu.cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName");
  info.name = name;
  info.vendor = "NVIDIA";
  int version = 0;
  check(cu.cuDriverGetVersion(&version), "cuDriverGetVersion");
  info.platform =
      "CUDA driver " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  info.compute_capability_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.compute_capability_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  size_t memory = 0;
  check(cu.cuDeviceTotalMem_v2(&memory, device), "cuDeviceTotalMem");
  info.memory_bytes = static_cast<int64_t>(memory);
  info.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.shared_memory_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  info.max_shared_memory_per_block =
      std::max<int64_t>(info.shared_memory_per_block,
                        attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  info.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  return info;
}

}  // namespace

int cuda_device_count(std::string* why) noexcept {
  const LoadedDriver& driver = loaded_driver();
  if (why) *why = driver.error;
  return driver.error.empty() ? driver.device_count : 0;
}

std::unique_ptr<DeviceAPI> open_cuda_device(int index) {
  const LoadedDriver& driver = loaded_driver();
  KILN_USER_CHECK(driver.error.empty()) << driver.error;
  KILN_USER_CHECK(index < driver.device_count)
      << "no CUDA device " << index << ": the NVIDIA driver sees " << driver.device_count;
  const CudaDriver& cu = driver.api;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUresult result = cu.cuDeviceGet(&device, index);
  if (result == CUDA_SUCCESS) result = cu.cuDevicePrimaryCtxRetain(&context, device);
  if (result == CUDA_SUCCESS) result = cu.cuCtxSetCurrent(context);
  KILN_USER_CHECK(result == CUDA_SUCCESS)
      << "no CUDA device " << index << ": cannot open its context: " << error_name(cu, result);
  return std::make_unique<CudaDevice>(cu, index, context, query_info(cu, device));
}

}  // namespace kiln::runtime::detail
