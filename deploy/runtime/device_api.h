// DeviceAPI: a GPU (or other accelerator) as the runtime sees it: memory, modules of device code,
// kernel launches, synchronization and timing with device events. One interface over two back-ends:
// CUDA through the driver API (cuda_device.cc) and OpenCL 1.2 (opencl_device.cc). Both load their
// library with dlopen at first use, so the runtime, which deployed bundles, kiln-run and the device
// agent link, starts on every machine, and a machine without the driver gets a clean kiln::Error
// ("no CUDA device: libcuda.so.1 not found ...") instead of a loader failure.
//
// Instances are process-wide, one per (kind, index), created on first use and never destroyed
// (buffers and modules may outlive main's locals). Every method is thread-safe. Copies and
// synchronize() return when the device is done; launches are asynchronous (in order on the device).
// Failures of the device or of its compiler are kiln::Error naming the call and the device's error.
//
// The launch shape is kiln::LaunchConfig (base/launch_config.h, docs/gpu.md): CUDA's grid of
// blocks; OpenCL's global size is grid x block per dimension and its local size block.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "base/launch_config.h"
#include "base/target_kind.h"

namespace kiln::runtime {

/// What a device is; the limits are the ones a launch is checked against.
struct DeviceInfo {
  std::string name;      ///< "NVIDIA H100 80GB HBM3", or the OpenCL device's name
  std::string vendor;    ///< "NVIDIA", or the OpenCL device's vendor
  std::string platform;  ///< "CUDA driver 12.4", or "<OpenCL platform> (OpenCL 1.2 ...)"
  int compute_capability_major = 0;  ///< CUDA only: 9 for an H100
  int compute_capability_minor = 0;
  int64_t memory_bytes = 0;
  int64_t max_threads_per_block = 0;    ///< OpenCL: the device's maximum work-group size
  int64_t shared_memory_per_block = 0;  ///< without opting in (CUDA: 48 KiB); OpenCL: local memory
  int64_t max_shared_memory_per_block = 0;  ///< the most a launch may ask for (CUDA's opt-in limit)
  int64_t multiprocessors = 0;  ///< CUDA streaming multiprocessors or OpenCL compute units

  /// One line: "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, 1024 threads/block, 48 KiB
  /// shared/block (227 KiB opt-in)) on CUDA driver 12.4".
  std::string description() const;
};

class DeviceAPI;

/// Device memory, freed when the handle goes. Move-only; a null handle (defined() false) is what a
/// default-constructed or moved-from one is.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  bool defined() const { return device_ != nullptr; }
  int64_t bytes() const { return bytes_; }
  /// The device that owns it (null for a null handle).
  DeviceAPI* device() const { return device_; }
  /// The back-end's handle: a CUdeviceptr, or a cl_mem cast to an integer.
  uint64_t native() const { return native_; }

 private:
  friend class DeviceAPI;
  DeviceBuffer(DeviceAPI* device, uint64_t native, int64_t bytes)
      : device_(device), native_(native), bytes_(bytes) {}
  void release() noexcept;

  DeviceAPI* device_ = nullptr;
  uint64_t native_ = 0;
  int64_t bytes_ = 0;
};

/// What a back-end's loaded module is: kernels found by name.
class DeviceModuleNode {
 public:
  virtual ~DeviceModuleNode() = default;
  /// The back-end's handle of kernel `name` (CUfunction, cl_kernel); kiln::Error naming it and the
  /// kernels the module has if it has no such kernel.
  virtual void* kernel(const std::string& name) = 0;
  virtual DeviceAPI& device() const = 0;
};

/// A kernel of a loaded module; keeps its module loaded.
class DeviceKernelHandle {
 public:
  DeviceKernelHandle() = default;
  bool defined() const { return native_ != nullptr; }
  const std::string& name() const { return name_; }
  /// The back-end's handle: a CUfunction or a cl_kernel.
  void* native() const { return native_; }
  /// The device whose module it is (null for a null handle).
  DeviceAPI* device() const { return module_ ? &module_->device() : nullptr; }
  /// The module it belongs to (null for a null handle).
  DeviceModuleNode* module() const { return module_.get(); }

 private:
  friend class DeviceModule;
  DeviceKernelHandle(std::shared_ptr<DeviceModuleNode> module, void* native, std::string name)
      : module_(std::move(module)), native_(native), name_(std::move(name)) {}

  std::shared_ptr<DeviceModuleNode> module_;
  void* native_ = nullptr;
  std::string name_;
};

/// Device code loaded on one device (PTX for CUDA, OpenCL C for OpenCL). Copies share the module,
/// which is unloaded when the last copy and the last of its kernels' handles go.
class DeviceModule {
 public:
  DeviceModule() = default;
  explicit DeviceModule(std::shared_ptr<DeviceModuleNode> node) : node_(std::move(node)) {}
  bool defined() const { return node_ != nullptr; }
  /// Kernel `name`; kiln::Error naming it (and the module's kernels) if there is none.
  DeviceKernelHandle kernel(const std::string& name) const;

 private:
  std::shared_ptr<DeviceModuleNode> node_;
};

/// One argument of a launch, in the kernel's parameter order: a buffer, or a scalar of exactly the
/// parameter's type (int32, int64 or float32; a double converts to none of them, on purpose).
class KernelArg {
 public:
  enum class Kind { kBuffer, kInt32, kInt64, kFloat32 };

  KernelArg(const DeviceBuffer& buffer) : kind_(Kind::kBuffer), buffer_(&buffer) {}  // NOLINT
  KernelArg(int32_t v) : kind_(Kind::kInt32), i32_(v) {}                             // NOLINT
  KernelArg(int64_t v) : kind_(Kind::kInt64), i64_(v) {}                             // NOLINT
  KernelArg(float v) : kind_(Kind::kFloat32), f32_(v) {}                             // NOLINT

  Kind kind() const { return kind_; }
  const DeviceBuffer& buffer() const { return *buffer_; }
  int32_t int32() const { return i32_; }
  int64_t int64() const { return i64_; }
  float float32() const { return f32_; }

 private:
  Kind kind_;
  const DeviceBuffer* buffer_ = nullptr;
  int32_t i32_ = 0;
  int64_t i64_ = 0;
  float f32_ = 0;
};

class DeviceAPI {
 public:
  /// The process-wide device `index` of `kind` (CUDA: the driver's ordinal; OpenCL: the position
  /// in the list GPUs first, then CPUs, then the rest, where KILN_OPENCL_DEVICE=i moves device i
  /// to the front). Opened on first use. kiln::Error saying why there is none: "no CUDA device:
  /// libcuda.so.1 not found (no NVIDIA driver on this machine)", "no CUDA device: cuInit failed:
  /// CUDA_ERROR_NO_DEVICE", "no OpenCL platform: ...". kCpu has no DeviceAPI (host code runs
  /// through Module), nor has kVdla (its programs run on the VDLA's simulator, vdla_run.h).
  static DeviceAPI& get(TargetKind kind, int index = 0);
  /// Whether get(kind) would succeed; if not, and `why` is given, the reason. Never throws.
  static bool available(TargetKind kind, std::string* why = nullptr) noexcept;
  /// How many devices of `kind` there are (0 if none; `why` as available()). Never throws.
  static int count(TargetKind kind, std::string* why = nullptr) noexcept;

  DeviceAPI(const DeviceAPI&) = delete;
  DeviceAPI& operator=(const DeviceAPI&) = delete;
  virtual ~DeviceAPI() = default;

  TargetKind kind() const { return kind_; }
  int index() const { return index_; }
  const DeviceInfo& info() const { return info_; }
  /// "cuda:0 NVIDIA H100 ... " — kind, index and info().description().
  std::string description() const;
  /// The code load_module takes: "ptx" (CUDA) or "cl" (OpenCL C source).
  virtual const char* module_format() const = 0;

  /// `bytes` of device memory (contents undefined). kiln::Error if the device has not that much.
  DeviceBuffer alloc(int64_t bytes);
  /// Copies `bytes` from host `src` to `dst` at `dst_offset`; kiln::Error if out of the buffer.
  void copy_to_device(const DeviceBuffer& dst, const void* src, int64_t bytes,
                      int64_t dst_offset = 0);
  /// Copies `bytes` of `src` from `src_offset` to host `dst`, after the work launched before.
  void copy_to_host(void* dst, const DeviceBuffer& src, int64_t bytes, int64_t src_offset = 0);
  /// Copies `bytes` between two buffers of this device.
  void copy_on_device(const DeviceBuffer& dst, const DeviceBuffer& src, int64_t bytes,
                      int64_t dst_offset = 0, int64_t src_offset = 0);

  /// Loads `code` of `format` (module_format(): "ptx" or "cl"). kiln::Error with the device
  /// compiler's log if it does not build.
  DeviceModule load_module(const std::string& code, const std::string& format);

  /// Launches `kernel` (of a module of this device) with `args` in its parameter order. Checks the
  /// shape against the device's limits first; kiln::Error naming the kernel if the device refuses.
  void launch(const DeviceKernelHandle& kernel, const LaunchConfig& config,
              std::span<const KernelArg> args);
  void launch(const DeviceKernelHandle& kernel, const LaunchConfig& config,
              std::initializer_list<KernelArg> args) {
    launch(kernel, config, std::span<const KernelArg>(args.begin(), args.size()));
  }

  /// Waits until everything launched on this device is done.
  virtual void synchronize() = 0;

  /// Calls `launches`, which launches kernels on this device, and returns the milliseconds from
  /// the start of its first launch to the end of its last, measured with device events (CUDA
  /// events; OpenCL profiling of each launch from this thread). kiln::Error if it launched none.
  virtual double time_ms(const std::function<void()>& launches) = 0;

 protected:
  DeviceAPI(TargetKind kind, int index, DeviceInfo info)
      : kind_(kind), index_(index), info_(std::move(info)) {}

  // What each back-end implements; arguments are checked before these are called.
  virtual uint64_t allocate(int64_t bytes) = 0;
  virtual void deallocate(uint64_t native) noexcept = 0;
  virtual void write(uint64_t dst, int64_t dst_offset, const void* src, int64_t bytes) = 0;
  virtual void read(void* dst, uint64_t src, int64_t src_offset, int64_t bytes) = 0;
  virtual void copy(uint64_t dst, int64_t dst_offset, uint64_t src, int64_t src_offset,
                    int64_t bytes) = 0;
  virtual std::shared_ptr<DeviceModuleNode> load(const std::string& code) = 0;
  virtual void enqueue(const DeviceKernelHandle& kernel, const LaunchConfig& config,
                       std::span<const KernelArg> args) = 0;

 private:
  friend class DeviceBuffer;
  void check_buffer(const DeviceBuffer& buffer, const char* what, int64_t offset,
                    int64_t bytes) const;

  TargetKind kind_;
  int index_;
  DeviceInfo info_;
};

}  // namespace kiln::runtime
