// DeviceAPI's back-end-independent half: the process-wide registry of opened devices, buffer
// handles, and the checks every copy and launch passes before it reaches a back-end.
#include "deploy/runtime/device_api.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "deploy/runtime/device_backends.h"

namespace kiln::runtime {
namespace {

constexpr const char* kCpuHasNoDeviceAPI =
    "the CPU has no DeviceAPI: host code runs through Module";
constexpr const char* kVdlaHasNoDeviceAPI =
    "the VDLA has no DeviceAPI: its programs run on the VDLA's simulator (vdla_run.h)";

std::string format_bytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(text, sizeof text, "%lld KiB", static_cast<long long>(bytes / 1024));
  } else {
    std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

int device_count_of(TargetKind kind, std::string* why) noexcept {
  switch (kind) {
    case TargetKind::kCuda:
      return detail::cuda_device_count(why);
    case TargetKind::kOpenCL:
      return detail::opencl_device_count(why);
    case TargetKind::kCpu:
      break;
    case TargetKind::kVdla:
      if (why) *why = kVdlaHasNoDeviceAPI;
      return 0;
  }
  if (why) *why = kCpuHasNoDeviceAPI;
  return 0;
}

}  // namespace

std::string DeviceInfo::description() const {
  std::ostringstream os;
  os << name << " (";
  if (compute_capability_major > 0) {
    os << "sm_" << compute_capability_major << compute_capability_minor << ", " << multiprocessors
       << " SMs, ";
  } else {
    os << vendor << ", " << multiprocessors << " compute units, ";
  }
  os << format_bytes(memory_bytes) << ", " << max_threads_per_block << " threads/block, "
     << format_bytes(shared_memory_per_block) << " shared/block";
  if (max_shared_memory_per_block > shared_memory_per_block) {
    os << " (" << format_bytes(max_shared_memory_per_block) << " opt-in)";
  }
  os << ") on " << platform;
  return os.str();
}

// ---- the registry ----

DeviceAPI& DeviceAPI::get(TargetKind kind, int index) {
  // Never destroyed: buffers and modules held by static objects may be released after main.
  static auto* mutex = new std::mutex;
  static auto* devices = new std::map<std::pair<TargetKind, int>, std::unique_ptr<DeviceAPI>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*devices)[{kind, index}];
  if (slot) return *slot;
  KILN_USER_CHECK(kind != TargetKind::kCpu) << kCpuHasNoDeviceAPI;
  KILN_USER_CHECK(kind != TargetKind::kVdla) << kVdlaHasNoDeviceAPI;
  KILN_USER_CHECK(index >= 0) << "no " << device_kind_name(kind) << " device " << index;
  slot = kind == TargetKind::kCuda ? detail::open_cuda_device(index)
                                   : detail::open_opencl_device(index);
  return *slot;
}

int DeviceAPI::count(TargetKind kind, std::string* why) noexcept {
  return device_count_of(kind, why);
}

bool DeviceAPI::available(TargetKind kind, std::string* why) noexcept {
  return device_count_of(kind, why) > 0;
}

std::string DeviceAPI::description() const {
  return std::string(device_kind_name(kind_)) + ":" + std::to_string(index_) + " " +
         info_.description();
}

// ---- buffers ----

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      native_(std::exchange(other.native_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, nullptr);
    native_ = std::exchange(other.native_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (device_ != nullptr) device_->deallocate(native_);
  device_ = nullptr;
  native_ = 0;
  bytes_ = 0;
}

DeviceBuffer DeviceAPI::alloc(int64_t bytes) {
  KILN_USER_CHECK(bytes >= 0) << description() << ": cannot allocate " << bytes << " bytes";
  KILN_USER_CHECK(bytes <= info_.memory_bytes)
      << description() << ": cannot allocate " << format_bytes(bytes) << ", the device has "
      << format_bytes(info_.memory_bytes);
  // Neither CUDA nor OpenCL allocates zero bytes; an empty tensor still gets a distinct buffer.
  return DeviceBuffer(this, allocate(bytes > 0 ? bytes : 1), bytes);
}

void DeviceAPI::check_buffer(const DeviceBuffer& buffer, const char* what, int64_t offset,
                             int64_t bytes) const {
  KILN_USER_CHECK(buffer.defined()) << what << ": null device buffer";
  KILN_USER_CHECK(buffer.device() == this)
      << what << ": the buffer is on " << buffer.device()->description() << ", not on "
      << description();
  KILN_USER_CHECK(offset >= 0 && bytes >= 0 && offset <= buffer.bytes() &&
                  bytes <= buffer.bytes() - offset)
      << what << ": bytes [" << offset << ", " << offset + bytes
      << ") are outside the device buffer of " << buffer.bytes() << " bytes";
}

void DeviceAPI::copy_to_device(const DeviceBuffer& dst, const void* src, int64_t bytes,
                               int64_t dst_offset) {
  check_buffer(dst, "copy_to_device", dst_offset, bytes);
  if (bytes > 0) write(dst.native(), dst_offset, src, bytes);
}

void DeviceAPI::copy_to_host(void* dst, const DeviceBuffer& src, int64_t bytes,
                             int64_t src_offset) {
  check_buffer(src, "copy_to_host", src_offset, bytes);
  if (bytes > 0) read(dst, src.native(), src_offset, bytes);
}

void DeviceAPI::copy_on_device(const DeviceBuffer& dst, const DeviceBuffer& src, int64_t bytes,
                               int64_t dst_offset, int64_t src_offset) {
  check_buffer(dst, "copy_on_device (destination)", dst_offset, bytes);
  check_buffer(src, "copy_on_device (source)", src_offset, bytes);
  if (bytes > 0) copy(dst.native(), dst_offset, src.native(), src_offset, bytes);
}

// ---- modules and launches ----

DeviceModule DeviceAPI::load_module(const std::string& code, const std::string& format) {
  KILN_USER_CHECK(format == module_format())
      << description() << " loads '" << module_format() << "' modules, not '" << format << "'";
  return DeviceModule(load(code));
}

DeviceKernelHandle DeviceModule::kernel(const std::string& name) const {
  KILN_USER_CHECK(node_ != nullptr) << "kernel '" << name << "' of a null device module";
  return DeviceKernelHandle(node_, node_->kernel(name), name);
}

void DeviceAPI::launch(const DeviceKernelHandle& kernel, const LaunchConfig& config,
                       std::span<const KernelArg> args) {
  KILN_USER_CHECK(kernel.defined()) << "launch of a null kernel on " << description();
  KILN_USER_CHECK(kernel.device() == this)
      << "kernel '" << kernel.name() << "' belongs to " << kernel.device()->description()
      << ", not to " << description();
  int64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    KILN_USER_CHECK(config.grid[d] >= 1 && config.grid[d] <= INT32_MAX && config.block[d] >= 1 &&
                    config.block[d] <= INT32_MAX)
        << "kernel '" << kernel.name() << "': grid and block extents must be in [1, 2^31), got "
        << "grid[" << d << "] = " << config.grid[d] << ", block[" << d << "] = " << config.block[d];
    threads *= config.block[d];
  }
  KILN_USER_CHECK(threads <= info_.max_threads_per_block)
      << "kernel '" << kernel.name() << "': a block of " << threads << " threads is more than the "
      << info_.max_threads_per_block << " of " << description();
  KILN_USER_CHECK(config.dyn_shared_bytes >= 0 &&
                  config.dyn_shared_bytes <= info_.max_shared_memory_per_block)
      << "kernel '" << kernel.name() << "': " << config.dyn_shared_bytes
      << " bytes of dynamic shared memory, the most per block is "
      << info_.max_shared_memory_per_block << " on " << description();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind() != KernelArg::Kind::kBuffer) continue;
    const DeviceBuffer& buffer = args[i].buffer();
    KILN_USER_CHECK(buffer.defined())
        << "kernel '" << kernel.name() << "': argument " << i << " is a null device buffer";
    KILN_USER_CHECK(buffer.device() == this)
        << "kernel '" << kernel.name() << "': argument " << i << " is a buffer on "
        << buffer.device()->description() << ", not on " << description();
  }
  enqueue(kernel, config, args);
}

}  // namespace kiln::runtime
