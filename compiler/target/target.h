// What a compilation target is: the back-end kind and its options, parsed from the strings users
// write ("llvm -mcpu=native", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53",
// "cuda -arch=sm_80", "opencl", "vdla"), with the device limits that schedules read (vector width,
// threads per block, shared memory). No LLVM here: resolving "-mcpu=native" to a CPU name and
// feature list is code generation's job; this file only knows whether the host has AVX-512 / AVX2.
#pragma once

#include <cstdint>
#include <string>

#include "base/target_kind.h"

namespace kiln::target {

struct Target {
  /// kCpu ("llvm" in the string), kCuda, kOpenCL or kVdla (base/target_kind.h).
  TargetKind kind = TargetKind::kCpu;
  /// llvm: the target triple ("aarch64-linux-gnu"); empty means the host's.
  std::string triple;
  /// llvm: the CPU ("znver4", "cortex-a53", "native"); empty means the triple's generic CPU.
  std::string cpu;
  /// llvm: comma-separated feature changes as LLVM writes them ("+avx2,+fma,-avx512f").
  std::string mattr;
  /// cuda: the GPU architecture ("sm_80").
  std::string arch;
  /// opencl: the device family ("mali"); free-form.
  std::string device;
  /// Any kind: a board model name ("rk3399"), kept for device keys; free-form.
  std::string model;

  /// Widest SIMD register in bits that schedules should vectorize for (llvm: 128, 256 or 512;
  /// GPUs and vdla: 0, not applicable).
  int vector_bits = 0;
  /// llvm: one core's level-1 data cache and level-2 cache in bytes, which CPU schedules size
  /// their blocking by: this machine's (sysconf) for a host target without a named CPU or with
  /// -mcpu=native, else a typical size for the CPU's kind (0 for other kinds).
  int64_t l1d_bytes = 0;
  int64_t l2_bytes = 0;
  /// GPUs: most threads per block / work-group (0 elsewhere).
  int max_num_threads = 0;
  /// GPUs: most threads of a block along x, y and z (CUDA 1024, 1024, 64; 0 elsewhere).
  int max_block_dims[3] = {0, 0, 0};
  /// GPUs: shared (local) memory per block in bytes (0 elsewhere).
  int max_shared_memory_per_block = 0;
  /// GPUs: threads that run in lockstep (CUDA warp 32; 1 where unknown).
  int thread_warp_size = 1;
  /// vdla: the accelerator's clock in MHz (0 elsewhere). A vdla target is the paper's prototype,
  /// `vdla::Config{}` (deploy/vdla/device/config.h: 16x16 int8 GEMM, 32 kB inputs, weights and
  /// micro-ops, 128 kB accumulators) at its 200 MHz; whoever measures for it (kiln-runner's
  /// `device: vdla`) reports the cycle model's cycles divided by this clock as seconds.
  double clock_mhz = 0;

  /// Parses a target string; raises kiln::Error naming an unknown kind or option, listing the
  /// known ones. Options are "-name=value" separated by spaces. Kiln generates code for every
  /// target that parses (llvm for x86_64 and aarch64, cuda, opencl, and vdla: VDLA programs for
  /// the tunable VDLA templates), so the farm's parse of a device's or a job's target is its check.
  static Target parse(const std::string& s);

  /// The canonical string: kind, then the options that are set in a fixed order. parse(str())
  /// gives back an equal target.
  std::string str() const;

  /// An LLVM target whose code runs on this machine (the host triple, or no triple).
  bool is_host() const;
  /// A GPU target (cuda or opencl): device programs, built by the GPU templates.
  bool is_gpu() const { return kiln::is_gpu(kind); }
  /// The CPU architecture of an llvm target: "x86_64" or "aarch64" (the host's when no triple).
  std::string arch_name() const;

  /// The LLVM triple to compile for: `triple`, or the host's ("x86_64-unknown-linux-gnu").
  std::string llvm_triple() const;

  bool operator==(const Target&) const = default;
};

/// The triple of the machine Kiln runs on, e.g. "x86_64-unknown-linux-gnu".
std::string host_triple();

}  // namespace kiln::target
