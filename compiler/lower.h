// The compiler driver: a schedule in, a lowered function or a runnable module out. lower() runs
// the passes in order (lower.cc lists them on one page); with KILN_DUMP_IR=1 it prints the IR
// after each one to stderr.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/pass/split_host_device.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/module.h"

namespace kiln::compiler {

struct LowerOptions {
  /// Innermost serial loops with at most this many iterations (and no loops inside) are unrolled.
  int auto_unroll_max_step = 0;
};

/// The loop program of a schedule, before storage flattening: tensors are still indexed as
/// tensors. This is what the paper's listings show.
ir::Stmt lower_loops(const te::Schedule& sch);

/// A lowered function taking `args` (inputs and outputs, in the order the caller will pass them).
ir::PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                   const std::string& name, const LowerOptions& options = {});

/// Lowers for a GPU target ("cuda", "opencl"): the CPU pipeline without its CPU-only passes,
/// then inject_virtual_thread, thread_sync("shared"), verify_gpu against the target's limits and
/// split_host_device (docs/gpu.md). Shapes must be constant; a parallel loop is a kiln::Error.
pass::DeviceFunction lower_device(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                  const std::string& name, const target::Target& target,
                                  const LowerOptions& options = {});

/// lower_device's program before the host/device split: one function whose body holds every kernel
/// under its thread_extent attributes, with its shared and local allocations, after verify_gpu.
/// What the tuner compares and reads features from; pass::split_host_device(f) finishes it.
ir::PrimFunc lower_device_program(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                  const std::string& name, const target::Target& target,
                                  const LowerOptions& options = {});

/// How many programs lower() and lower_device_program() have finished in this process (all
/// threads together): a statistic, as LLVM's STATISTIC counters, by which the tuner's tests check
/// that its search pays for no full lowering (lower_for_analysis is not counted).
uint64_t full_lowerings();

/// The program of a candidate as the tuner's cost model reads it (autotune/features.h), at a
/// fraction of a full lowering's cost: lower()'s pipeline (a CPU target) or
/// lower_device_program()'s (a GPU target: virtual threads injected, barriers planned, verify_gpu
/// against the target's limits) up to vectorization, without the passes that multiply the code
/// (loop partitioning, unrolling and what cleans up after them) and without the IR verifier
/// between passes. Loops marked for unrolling stay loops of kind kUnrolled. kiln::Error where
/// the full lowering would raise one for the schedule's structure or the target's limits.
ir::PrimFunc lower_for_analysis(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                const std::string& name, const target::Target& target);

/// Lowers for a GPU target and compiles the kernels (codegen/build_device.h): CUDA C to PTX with
/// NVRTC (sm_75 and newer), PTX from LLVM's NVPTX back-end (older archs), or OpenCL C; the
/// program takes the tensors of `args` in order.
runtime::DeviceProgram build_gpu(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                 const target::Target& target, const std::string& name,
                                 const LowerOptions& options = {});

/// Lowers for the VDLA (compiler/vdla/program.h turns the result into its driver calls): the
/// loop program flattened, tensorized nests replaced by the intrinsics' statements, and `cthread`
/// virtual threads interleaved block by block with every local buffer replicated per thread.
/// Loops stay loops: the VDLA program builder runs them at build time, since shapes are static.
ir::PrimFunc lower_vdla(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                        const std::string& name);

/// Lowers and compiles for the host (`target` like "llvm -mcpu=native"); the module's function
/// `name` takes the tensors of `args` in order. `optimize` as codegen::build's.
runtime::Module build(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                      const std::string& target, const std::string& name,
                      const LowerOptions& options = {}, bool optimize = true);

}  // namespace kiln::compiler
