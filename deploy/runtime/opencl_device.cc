// OpenCL 1.2 behind DeviceAPI. The ICD loader (libOpenCL.so.1) is loaded with dlopen rather than
// linked: kiln_runtime is linked by kiln-run, kiln-runner and kiln-agent, which must start on
// boards without any OpenCL (and the arm64 build has no arm64 libOpenCL to link), so a missing
// loader is a clean "no OpenCL platform" error, as a missing CUDA driver is. The prototypes come
// from the Khronos headers (opencl-headers), through decltype, so they cannot drift.
//
// One context and one in-order command queue (with profiling) per device. A launch sets the
// kernel's arguments and enqueues it under the device's launch lock, because clSetKernelArg is
// the one OpenCL call that is not thread-safe on a shared kernel object.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_backends.h"

namespace kiln::runtime::detail {
namespace {

/// The ICD loader's entry points used here.
struct OpenCLLibrary {
#define KILN_CL_FUNCTION(name) decltype(&::name) name = nullptr
  KILN_CL_FUNCTION(clGetPlatformIDs);
  KILN_CL_FUNCTION(clGetPlatformInfo);
  KILN_CL_FUNCTION(clGetDeviceIDs);
  KILN_CL_FUNCTION(clGetDeviceInfo);
  KILN_CL_FUNCTION(clCreateContext);
  KILN_CL_FUNCTION(clCreateCommandQueue);
  KILN_CL_FUNCTION(clCreateBuffer);
  KILN_CL_FUNCTION(clReleaseMemObject);
  KILN_CL_FUNCTION(clEnqueueWriteBuffer);
  KILN_CL_FUNCTION(clEnqueueReadBuffer);
  KILN_CL_FUNCTION(clEnqueueCopyBuffer);
  KILN_CL_FUNCTION(clCreateProgramWithSource);
  KILN_CL_FUNCTION(clBuildProgram);
  KILN_CL_FUNCTION(clGetProgramBuildInfo);
  KILN_CL_FUNCTION(clGetProgramInfo);
  KILN_CL_FUNCTION(clReleaseProgram);
  KILN_CL_FUNCTION(clCreateKernel);
  KILN_CL_FUNCTION(clGetKernelInfo);
  KILN_CL_FUNCTION(clReleaseKernel);
  KILN_CL_FUNCTION(clSetKernelArg);
  KILN_CL_FUNCTION(clEnqueueNDRangeKernel);
  KILN_CL_FUNCTION(clFinish);
  KILN_CL_FUNCTION(clWaitForEvents);
  KILN_CL_FUNCTION(clGetEventProfilingInfo);
  KILN_CL_FUNCTION(clReleaseEvent);
#undef KILN_CL_FUNCTION
};

const char* error_name(cl_int code) {
  switch (code) {
#define KILN_CL_ERROR(name) \
  case name:                \
    return #name
    KILN_CL_ERROR(CL_DEVICE_NOT_FOUND);
    KILN_CL_ERROR(CL_DEVICE_NOT_AVAILABLE);
    KILN_CL_ERROR(CL_COMPILER_NOT_AVAILABLE);
    KILN_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    KILN_CL_ERROR(CL_OUT_OF_RESOURCES);
    KILN_CL_ERROR(CL_OUT_OF_HOST_MEMORY);
    KILN_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE);
    KILN_CL_ERROR(CL_BUILD_PROGRAM_FAILURE);
    KILN_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    KILN_CL_ERROR(CL_INVALID_VALUE);
    KILN_CL_ERROR(CL_INVALID_DEVICE_TYPE);
    KILN_CL_ERROR(CL_INVALID_PLATFORM);
    KILN_CL_ERROR(CL_INVALID_DEVICE);
    KILN_CL_ERROR(CL_INVALID_CONTEXT);
    KILN_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES);
    KILN_CL_ERROR(CL_INVALID_COMMAND_QUEUE);
    KILN_CL_ERROR(CL_INVALID_MEM_OBJECT);
    KILN_CL_ERROR(CL_INVALID_BUILD_OPTIONS);
    KILN_CL_ERROR(CL_INVALID_PROGRAM);
    KILN_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE);
    KILN_CL_ERROR(CL_INVALID_KERNEL_NAME);
    KILN_CL_ERROR(CL_INVALID_KERNEL_DEFINITION);
    KILN_CL_ERROR(CL_INVALID_KERNEL);
    KILN_CL_ERROR(CL_INVALID_ARG_INDEX);
    KILN_CL_ERROR(CL_INVALID_ARG_VALUE);
    KILN_CL_ERROR(CL_INVALID_ARG_SIZE);
    KILN_CL_ERROR(CL_INVALID_KERNEL_ARGS);
    KILN_CL_ERROR(CL_INVALID_WORK_DIMENSION);
    KILN_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE);
    KILN_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE);
    KILN_CL_ERROR(CL_INVALID_GLOBAL_OFFSET);
    KILN_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST);
    KILN_CL_ERROR(CL_INVALID_EVENT);
    KILN_CL_ERROR(CL_INVALID_OPERATION);
    KILN_CL_ERROR(CL_INVALID_BUFFER_SIZE);
    KILN_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE);
#undef KILN_CL_ERROR
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "an unknown OpenCL error";
  }
}

std::string error_text(cl_int code) {
  return std::string(error_name(code)) + " (" + std::to_string(code) + ")";
}

/// One device of one platform, as enumerated.
struct DeviceEntry {
  cl_platform_id platform;
  cl_device_id device;
};

/// The ICD loader and the devices it sees, found once per process, or why not.
struct LoadedOpenCL {
  OpenCLLibrary api;
  std::vector<DeviceEntry> devices;  ///< GPUs, then CPUs, then the rest; KILN_OPENCL_DEVICE first
  std::string error;                 ///< empty when at least one device is usable
};

template <typename F>
void bind(void* library, const char* symbol, F& function, std::string* error) {
  function = reinterpret_cast<F>(dlsym(library, symbol));
  if (function == nullptr && error->empty()) {
    *error = std::string("no OpenCL platform: libOpenCL.so.1 has no ") + symbol;
  }
}

std::string device_string(const OpenCLLibrary& cl, cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (cl.clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (cl.clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  text.resize(strnlen(text.c_str(), text.size()));
  return text;
}

std::string platform_string(const OpenCLLibrary& cl, cl_platform_id platform,
                            cl_platform_info what) {
  size_t size = 0;
  if (cl.clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) {
    return "";
  }
  std::string text(size, '\0');
  if (cl.clGetPlatformInfo(platform, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  text.resize(strnlen(text.c_str(), text.size()));
  return text;
}

template <typename T>
T device_value(const OpenCLLibrary& cl, cl_device_id device, cl_device_info what) {
  T value{};
  cl_int result = cl.clGetDeviceInfo(device, what, sizeof value, &value, nullptr);
  KILN_USER_CHECK(result == CL_SUCCESS)
      << "OpenCL device '" << device_string(cl, device, CL_DEVICE_NAME)
      << "': clGetDeviceInfo failed: " << error_text(result);
  return value;
}

LoadedOpenCL load_opencl() {
  LoadedOpenCL loaded;
  // Never closed: the ICD loader and its drivers stay loaded for the process.
  void* library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    loaded.error =
        reason == nullptr || std::strstr(reason, "No such file") != nullptr
            ? "no OpenCL platform: libOpenCL.so.1 not found (no OpenCL ICD loader on this machine)"
            : std::string("no OpenCL platform: cannot load libOpenCL.so.1: ") + reason;
    return loaded;
  }
  OpenCLLibrary& cl = loaded.api;
#define KILN_BIND_CL(name) bind(library, #name, cl.name, &loaded.error)
  KILN_BIND_CL(clGetPlatformIDs);
  KILN_BIND_CL(clGetPlatformInfo);
  KILN_BIND_CL(clGetDeviceIDs);
  KILN_BIND_CL(clGetDeviceInfo);
  KILN_BIND_CL(clCreateContext);
  KILN_BIND_CL(clCreateCommandQueue);
  KILN_BIND_CL(clCreateBuffer);
  KILN_BIND_CL(clReleaseMemObject);
  KILN_BIND_CL(clEnqueueWriteBuffer);
  KILN_BIND_CL(clEnqueueReadBuffer);
  KILN_BIND_CL(clEnqueueCopyBuffer);
  KILN_BIND_CL(clCreateProgramWithSource);
  KILN_BIND_CL(clBuildProgram);
  KILN_BIND_CL(clGetProgramBuildInfo);
  KILN_BIND_CL(clGetProgramInfo);
  KILN_BIND_CL(clReleaseProgram);
  KILN_BIND_CL(clCreateKernel);
  KILN_BIND_CL(clGetKernelInfo);
  KILN_BIND_CL(clReleaseKernel);
  KILN_BIND_CL(clSetKernelArg);
  KILN_BIND_CL(clEnqueueNDRangeKernel);
  KILN_BIND_CL(clFinish);
  KILN_BIND_CL(clWaitForEvents);
  KILN_BIND_CL(clGetEventProfilingInfo);
  KILN_BIND_CL(clReleaseEvent);
#undef KILN_BIND_CL
  if (!loaded.error.empty()) return loaded;

  cl_uint platform_count = 0;
  cl_int result = cl.clGetPlatformIDs(0, nullptr, &platform_count);
  if (result != CL_SUCCESS || platform_count == 0) {
    loaded.error = "no OpenCL platform: the ICD loader found none (" +
                   (result == CL_SUCCESS ? std::string("0 platforms") : error_text(result)) +
                   "; install an OpenCL driver, e.g. pocl-opencl-icd)";
    return loaded;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  result = cl.clGetPlatformIDs(platform_count, platforms.data(), nullptr);
  if (result != CL_SUCCESS) {
    loaded.error = "no OpenCL platform: clGetPlatformIDs failed: " + error_text(result);
    return loaded;
  }
  // GPUs first, then CPUs, then the rest (accelerators).
  for (cl_device_type type :
       {cl_device_type{CL_DEVICE_TYPE_GPU}, cl_device_type{CL_DEVICE_TYPE_CPU},
        cl_device_type{CL_DEVICE_TYPE_ACCELERATOR}}) {
    for (cl_platform_id platform : platforms) {
      cl_uint count = 0;
      if (cl.clGetDeviceIDs(platform, type, 0, nullptr, &count) != CL_SUCCESS || count == 0) {
        continue;
      }
      std::vector<cl_device_id> devices(count);
      if (cl.clGetDeviceIDs(platform, type, count, devices.data(), nullptr) != CL_SUCCESS) continue;
      for (cl_device_id device : devices) loaded.devices.push_back({platform, device});
    }
  }
  if (loaded.devices.empty()) {
    loaded.error = "no OpenCL device: " + std::to_string(platform_count) +
                   " OpenCL platform(s) but none has a GPU, CPU or accelerator device";
    return loaded;
  }
  if (const char* chosen = std::getenv("KILN_OPENCL_DEVICE"); chosen != nullptr && *chosen) {
    char* end = nullptr;
    const long index = std::strtol(chosen, &end, 10);
    if (*end != '\0' || index < 0 || index >= static_cast<long>(loaded.devices.size())) {
      loaded.error = "no OpenCL device: KILN_OPENCL_DEVICE=" + std::string(chosen) +
                     " is not a device index (there are " + std::to_string(loaded.devices.size()) +
                     ": 0 to " + std::to_string(loaded.devices.size() - 1) + ")";
      loaded.devices.clear();
      return loaded;
    }
    std::swap(loaded.devices[0], loaded.devices[static_cast<size_t>(index)]);
  }
  return loaded;
}

const LoadedOpenCL& loaded_opencl() {
  static const LoadedOpenCL loaded = load_opencl();  // thread-safe, once
  return loaded;
}

/// The launches that time_ms is timing on this thread: their events, released when it is done.
struct TimedLaunches {
  const DeviceAPI* device;
  const OpenCLLibrary& cl;
  std::vector<cl_event> events;
  ~TimedLaunches() {
    for (cl_event event : events) cl.clReleaseEvent(event);
  }
};
thread_local TimedLaunches* t_timed_launches = nullptr;

class OpenCLDevice;

class OpenCLModule final : public DeviceModuleNode {
 public:
  OpenCLModule(OpenCLDevice& device, cl_program program) : device_(device), program_(program) {}
  ~OpenCLModule() override;
  void* kernel(const std::string& name) override;
  DeviceAPI& device() const override;

 private:
  OpenCLDevice& device_;
  cl_program program_;
  std::mutex mutex_;
  std::map<std::string, cl_kernel> kernels_;  ///< created once per name, released with the module
};

class OpenCLDevice final : public DeviceAPI {
 public:
  OpenCLDevice(const OpenCLLibrary& cl, int index, cl_device_id device, cl_context context,
               cl_command_queue queue, DeviceInfo info)
      : DeviceAPI(TargetKind::kOpenCL, index, std::move(info)),
        cl_(cl),
        device_(device),
        context_(context),
        queue_(queue) {}

  const char* module_format() const override { return "cl"; }
  const OpenCLLibrary& library() const { return cl_; }

  void check(cl_int result, const std::string& call) const {
    KILN_USER_CHECK(result == CL_SUCCESS)
        << description() << ": " << call << " failed: " << error_text(result);
  }

  void synchronize() override { check(cl_.clFinish(queue_), "clFinish"); }

  double time_ms(const std::function<void()>& launches) override {
    KILN_USER_CHECK(t_timed_launches == nullptr) << "time_ms: already timing on this thread";
    TimedLaunches timed{this, cl_, {}};
    t_timed_launches = &timed;
    try {
      launches();
    } catch (...) {
      t_timed_launches = nullptr;
      throw;
    }
    t_timed_launches = nullptr;
    KILN_USER_CHECK(!timed.events.empty())
        << description() << ": time_ms: the work launched no kernel";
    check(cl_.clWaitForEvents(static_cast<cl_uint>(timed.events.size()), timed.events.data()),
          "clWaitForEvents");
    cl_ulong start = 0, end = 0;
    check(cl_.clGetEventProfilingInfo(timed.events.front(), CL_PROFILING_COMMAND_START,
                                      sizeof start, &start, nullptr),
          "clGetEventProfilingInfo");
    check(cl_.clGetEventProfilingInfo(timed.events.back(), CL_PROFILING_COMMAND_END, sizeof end,
                                      &end, nullptr),
          "clGetEventProfilingInfo");
    return end > start ? static_cast<double>(end - start) * 1e-6 : 0.0;
  }

 protected:
  uint64_t allocate(int64_t bytes) override {
    cl_int result = CL_SUCCESS;
    cl_mem buffer = cl_.clCreateBuffer(context_, CL_MEM_READ_WRITE, static_cast<size_t>(bytes),
                                       nullptr, &result);
    check(result, "clCreateBuffer(" + std::to_string(bytes) + " bytes)");
    return reinterpret_cast<uint64_t>(buffer);
  }

  void deallocate(uint64_t buffer) noexcept override {
    cl_.clReleaseMemObject(reinterpret_cast<cl_mem>(buffer));
  }

  void write(uint64_t dst, int64_t dst_offset, const void* src, int64_t bytes) override {
    check(cl_.clEnqueueWriteBuffer(queue_, reinterpret_cast<cl_mem>(dst), CL_TRUE,
                                   static_cast<size_t>(dst_offset), static_cast<size_t>(bytes), src,
                                   0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
  }

  void read(void* dst, uint64_t src, int64_t src_offset, int64_t bytes) override {
    check(cl_.clEnqueueReadBuffer(queue_, reinterpret_cast<cl_mem>(src), CL_TRUE,
                                  static_cast<size_t>(src_offset), static_cast<size_t>(bytes), dst,
                                  0, nullptr, nullptr),
          "clEnqueueReadBuffer");
  }

  void copy(uint64_t dst, int64_t dst_offset, uint64_t src, int64_t src_offset,
            int64_t bytes) override {
    check(cl_.clEnqueueCopyBuffer(queue_, reinterpret_cast<cl_mem>(src),
                                  reinterpret_cast<cl_mem>(dst), static_cast<size_t>(src_offset),
                                  static_cast<size_t>(dst_offset), static_cast<size_t>(bytes), 0,
                                  nullptr, nullptr),
          "clEnqueueCopyBuffer");
    check(cl_.clFinish(queue_), "clFinish after clEnqueueCopyBuffer");
  }

  std::shared_ptr<DeviceModuleNode> load(const std::string& source) override {
    const char* text = source.c_str();
    const size_t length = source.size();
    cl_int result = CL_SUCCESS;
    cl_program program = cl_.clCreateProgramWithSource(context_, 1, &text, &length, &result);
    check(result, "clCreateProgramWithSource");
    result = cl_.clBuildProgram(program, 1, &device_, "", nullptr, nullptr);
    if (result != CL_SUCCESS) {
      std::string log;
      size_t size = 0;
      if (cl_.clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) ==
              CL_SUCCESS &&
          size > 0) {
        log.resize(size);
        cl_.clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, size, log.data(),
                                  nullptr);
        log.resize(strnlen(log.c_str(), log.size()));
      }
      cl_.clReleaseProgram(program);
      std::istringstream lines(source);
      std::ostringstream head;
      std::string line;
      for (int n = 1; n <= 20 && std::getline(lines, line); ++n)
        head << "\n  " << n << "| " << line;
      KILN_USER_ERROR() << description() << ": the OpenCL C does not build: clBuildProgram failed: "
                        << error_text(result) << "\nbuild log:\n"
                        << (log.empty() ? "(empty)" : log) << "\nsource begins:" << head.str();
    }
    return std::make_shared<OpenCLModule>(*this, program);
  }

  void enqueue(const DeviceKernelHandle& kernel, const LaunchConfig& config,
               std::span<const KernelArg> args) override {
    auto cl_kernel_of = static_cast<cl_kernel>(kernel.native());
    const std::string what = "kernel '" + kernel.name() + "'";
    std::lock_guard<std::mutex> lock(launch_mutex_);
    cl_uint declared = 0;
    check(
        cl_.clGetKernelInfo(cl_kernel_of, CL_KERNEL_NUM_ARGS, sizeof declared, &declared, nullptr),
        what + ": clGetKernelInfo");
    const size_t given = args.size() + (config.dyn_shared_bytes > 0 ? 1 : 0);
    KILN_USER_CHECK(declared == given)
        << what << " takes " << declared << " arguments, got " << args.size()
        << (config.dyn_shared_bytes > 0 ? " and the __local one of the dynamic shared memory" : "");
    for (size_t i = 0; i < args.size(); ++i) {
      const auto index = static_cast<cl_uint>(i);
      const std::string call = what + ": clSetKernelArg(" + std::to_string(i) + ")";
      switch (args[i].kind()) {
        case KernelArg::Kind::kBuffer: {
          cl_mem buffer = reinterpret_cast<cl_mem>(args[i].buffer().native());
          check(cl_.clSetKernelArg(cl_kernel_of, index, sizeof buffer, &buffer), call);
          break;
        }
        case KernelArg::Kind::kInt32: {
          const cl_int value = args[i].int32();
          check(cl_.clSetKernelArg(cl_kernel_of, index, sizeof value, &value), call);
          break;
        }
        case KernelArg::Kind::kInt64: {
          const cl_long value = args[i].int64();
          check(cl_.clSetKernelArg(cl_kernel_of, index, sizeof value, &value), call);
          break;
        }
        case KernelArg::Kind::kFloat32: {
          const cl_float value = args[i].float32();
          check(cl_.clSetKernelArg(cl_kernel_of, index, sizeof value, &value), call);
          break;
        }
      }
    }
    if (config.dyn_shared_bytes > 0) {
      check(cl_.clSetKernelArg(cl_kernel_of, static_cast<cl_uint>(args.size()),
                               static_cast<size_t>(config.dyn_shared_bytes), nullptr),
            what + ": clSetKernelArg(dynamic __local memory)");
    }
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      global[d] = static_cast<size_t>(config.grid[d] * config.block[d]);
      local[d] = static_cast<size_t>(config.block[d]);
    }
    const bool timed = t_timed_launches != nullptr && t_timed_launches->device == this;
    cl_event event = nullptr;
    check(cl_.clEnqueueNDRangeKernel(queue_, cl_kernel_of, 3, nullptr, global, local, 0, nullptr,
                                     timed ? &event : nullptr),
          what + ": clEnqueueNDRangeKernel");
    if (timed) t_timed_launches->events.push_back(event);
  }

 private:
  const OpenCLLibrary& cl_;
  cl_device_id device_;
  cl_context context_;
  cl_command_queue queue_;
  std::mutex launch_mutex_;
};

OpenCLModule::~OpenCLModule() {
  const OpenCLLibrary& cl = device_.library();
  for (const auto& [name, kernel] : kernels_) cl.clReleaseKernel(kernel);
  cl.clReleaseProgram(program_);
}

void* OpenCLModule::kernel(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = kernels_.find(name); found != kernels_.end()) return found->second;
  const OpenCLLibrary& cl = device_.library();
  cl_int result = CL_SUCCESS;
  cl_kernel kernel = cl.clCreateKernel(program_, name.c_str(), &result);
  if (result == CL_INVALID_KERNEL_NAME) {
    std::string names;
    size_t size = 0;
    if (cl.clGetProgramInfo(program_, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size) == CL_SUCCESS &&
        size > 0) {
      names.resize(size);
      cl.clGetProgramInfo(program_, CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr);
      names.resize(strnlen(names.c_str(), names.size()));
      for (char& c : names) c = c == ';' ? ',' : c;
    }
    KILN_USER_ERROR() << "no kernel '" << name << "' in the OpenCL module loaded on "
                      << device_.description()
                      << " (its kernels: " << (names.empty() ? "none" : names) << ")";
  }
  device_.check(result, "clCreateKernel('" + name + "')");
  kernels_.emplace(name, kernel);
  return kernel;
}

DeviceAPI& OpenCLModule::device() const { return device_; }

DeviceInfo query_info(const OpenCLLibrary& cl, const DeviceEntry& entry) {
  DeviceInfo info;
  info.name = device_string(cl, entry.device, CL_DEVICE_NAME);
  info.vendor = device_string(cl, entry.device, CL_DEVICE_VENDOR);
  info.platform = platform_string(cl, entry.platform, CL_PLATFORM_NAME) + " (" +
                  device_string(cl, entry.device, CL_DEVICE_VERSION) + ")";
  info.memory_bytes =
      static_cast<int64_t>(device_value<cl_ulong>(cl, entry.device, CL_DEVICE_GLOBAL_MEM_SIZE));
  info.max_threads_per_block =
      static_cast<int64_t>(device_value<size_t>(cl, entry.device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  info.shared_memory_per_block =
      static_cast<int64_t>(device_value<cl_ulong>(cl, entry.device, CL_DEVICE_LOCAL_MEM_SIZE));
  info.max_shared_memory_per_block = info.shared_memory_per_block;
  info.multiprocessors = device_value<cl_uint>(cl, entry.device, CL_DEVICE_MAX_COMPUTE_UNITS);
  return info;
}

}  // namespace

int opencl_device_count(std::string* why) noexcept {
  const LoadedOpenCL& loaded = loaded_opencl();
  if (why) *why = loaded.error;
  return static_cast<int>(loaded.devices.size());
}

std::unique_ptr<DeviceAPI> open_opencl_device(int index) {
  const LoadedOpenCL& loaded = loaded_opencl();
  KILN_USER_CHECK(loaded.error.empty()) << loaded.error;
  KILN_USER_CHECK(index < static_cast<int>(loaded.devices.size()))
      << "no OpenCL device " << index << ": there are " << loaded.devices.size();
  const OpenCLLibrary& cl = loaded.api;
  const DeviceEntry& entry = loaded.devices[static_cast<size_t>(index)];
  DeviceInfo info = query_info(cl, entry);
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(entry.platform), 0};
  cl_int result = CL_SUCCESS;
  cl_context context = cl.clCreateContext(properties, 1, &entry.device, nullptr, nullptr, &result);
  KILN_USER_CHECK(result == CL_SUCCESS) << "OpenCL device " << index << " '" << info.name
                                        << "': clCreateContext failed: " << error_text(result);
  cl_command_queue queue =
      cl.clCreateCommandQueue(context, entry.device, CL_QUEUE_PROFILING_ENABLE, &result);
  KILN_USER_CHECK(result == CL_SUCCESS) << "OpenCL device " << index << " '" << info.name
                                        << "': clCreateCommandQueue failed: " << error_text(result);
  return std::make_unique<OpenCLDevice>(cl, index, entry.device, context, queue, std::move(info));
}

}  // namespace kiln::runtime::detail
