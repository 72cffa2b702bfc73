// A tuning task: one tunable operator workload (a template applied to a tensor expression with
// fixed shapes and dtypes) on one target. The graph build meets each tunable operator through a
// ConfigSource, which picks the config of its template; the tuner extracts the distinct tasks of
// a model by recording them there, and the record log keys measurements by task key and target.
// A task describes itself: its workload (topi/workload.h) rebuilds it in any process, so a worker
// builds a candidate from (template, workload, target, config) alone.
//
//   Task t = Task::make("conv2d_nchwc_x86", conv_out, "llvm -mcpu=native");
//   t.key;                                   // "conv2d_nchwc_x86:1x4x56x56x16:5c0f9d3e1a2b4c77"
//   Task u = Task::from_workload(t.template_name, t.workload, t.target);  // the same task
//   te::Schedule s = t.schedule(t.space.get(17));
//   ir::PrimFunc f = t.lower(t.space.get(17));  // compiler::lower, or the GPU program for
//                                               // cuda/opencl, or compiler::lower_vdla for vdla
//   ir::PrimFunc g = t.lower_for_features(t.space.get(17));  // what the cost model reads
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/space/space.h"
#include "compiler/te/schedule.h"
#include "deploy/runtime/random_fill.h"

namespace kiln::autotune {

struct Task {
  std::string template_name;  ///< a topi::tunable_template
  /// The operator as a topi::Workload's canonical JSON text: what rebuilds the task anywhere.
  std::string workload;
  /// "<template>:<output shape>:<hash>": the hash combines the structural hash of the operator's
  /// lowered naive loop program with the config space's knobs and candidates, so the same workload
  /// gets the same key in every model, layer, run and process, different shapes, strides or
  /// paddings get different keys, and records (which name configs by index) never outlive a
  /// change to the template's space or to the compute's program: a new space is a new task.
  std::string key;
  std::string target;
  te::Tensor out;                  ///< the operator's output, built from the workload
  std::vector<te::Tensor> inputs;  ///< the placeholders it reads, in a fixed order
  space::ConfigSpace space;
  space::Config default_config;
  double flops = 0;  ///< multiply-adds count 2; per run
  /// How each of `inputs` is generated from the task's seed (runtime::fill_input): none for a
  /// float input (uniform in [-1, 1)), the values an integer input takes (topi::input_ranges:
  /// int8 data in [-128, 127], a per-channel shift in [0, 31], ...).
  std::vector<std::optional<runtime::ValueRange>> input_ranges;

  /// The task of `template_name` applied to `out`, the output of a tunable topi compute (which
  /// carries its workload; anything else is an internal error). The task is rebuilt from that
  /// workload: only the operator's own stages, over fresh placeholders, whatever `out` reads.
  static Task make(const std::string& template_name, const te::Tensor& out,
                   const std::string& target);
  /// The task of `template_name` applied to the workload in `workload_json` on `target`: the
  /// same task (key, space, default, flops, programs) as the one the workload was taken from.
  /// kiln::Error naming the field on a bad template, workload, pairing or target.
  static Task from_workload(const std::string& template_name, const std::string& workload_json,
                            const std::string& target);

  /// The arguments of a candidate's function: inputs, then out.
  std::vector<te::Tensor> args() const;
  /// A schedule of `out` alone with the template at `config`.
  te::Schedule schedule(const space::Config& config) const;
  /// Whether the target is a GPU (cuda, opencl): candidates are device programs, not libraries.
  bool on_gpu() const;
  /// Whether the target is the VDLA: candidates are VDLA programs (compiler/vdla/program.h).
  bool on_vdla() const;
  /// The candidate program of `config`, entry "candidate": compiler::lower for CPU targets,
  /// compiler::lower_device_program (kernels under their thread_extent attributes, checked against
  /// the target's limits) for GPU ones, compiler::lower_vdla (the loop program whose run at build
  /// time records the VDLA program) for vdla. kiln::Error for a config that does not lower.
  ir::PrimFunc lower(const space::Config& config) const;
  /// The program of `config` the cost model's features read (features.h): for a CPU or GPU
  /// target compiler::lower_for_analysis (lower's pipeline without unrolling and loop
  /// partitioning, a fraction of its cost: what scoring a candidate costs the search), for vdla
  /// lower() itself (it never unrolls). kiln::Error for a config that does not lower.
  ir::PrimFunc lower_for_features(const space::Config& config) const;
  /// The reference schedule: every stage at its default loop nest (the naive program), whose
  /// output each candidate's is compared with.
  te::Schedule reference_schedule() const;
};

/// What the graph build asks for every tunable operator: the config to schedule it with.
class ConfigSource {
 public:
  virtual ~ConfigSource() = default;
  virtual space::Config choose(const Task& task) = 0;
};

}  // namespace kiln::autotune
