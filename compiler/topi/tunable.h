// The tunable templates by name: what the graph build and the tuner need of an operator's x86 or
// GPU schedule template (its config space for a given output, the default point, and the schedule
// of one point) behind one interface, so that both choose configs the same way.
//
//   const TunableTemplate& t = tunable_template("conv2d_nchwc_x86");  // schedules conv2d_nchwc
//   space::ConfigSpace space = t.space(out);
//   space::Config d = t.default_config(out, space, target::Target::parse("llvm -mcpu=native"));
//   te::Schedule s = te::create_schedule({out});
//   t.schedule(s, out, space.get(42), out);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi {

struct TunableTemplate {
  std::string name;  ///< "conv2d_nchwc_x86": the operator and the target family
  /// The topi computes (Workload::compute) whose outputs it schedules.
  std::vector<std::string> computes;
  std::function<space::ConfigSpace(const te::Tensor& out)> space;
  /// The default point of `space` (made by `space(out)`) for `target`.
  std::function<space::Config(const te::Tensor& out, const space::ConfigSpace& space,
                              const target::Target& target)>
      default_config;
  /// Schedules `out` with `config`; `output` is `out` or an elementwise epilogue of it to compute
  /// in the template's tile (topi::epilogue_stage); templates without epilogue support refuse one.
  std::function<void(te::Schedule&, const te::Tensor& out, const space::Config&,
                     const te::Tensor& output)>
      schedule;
};

/// Every template: conv2d_nchw_x86, depthwise_conv2d_nchw_x86, conv2d_nchwc_x86,
/// conv2d_nchwc_winograd_x86,
/// conv2d_nchwc_int8_x86, depthwise_conv2d_nchwc_x86, conv2d_transpose_nchw_x86, dense_x86,
/// dense_int8_x86, batch_matmul_x86,
/// pool2d_x86; for GPU targets (cuda, opencl) conv2d_nchw_gpu (groups = 1),
/// depthwise_conv2d_nchw_gpu (groups > 1), conv2d_transpose_nchw_gpu, matmul_gpu (dense; the LSTM's
/// dense_packed products),
/// batch_matmul_gpu and pool2d_gpu; and those registered by the libraries above topi: for the VDLA
/// (vdla) vdla_conv2d (compiler/vdla/conv2d_template.h, vdla_compiler::register_templates).
std::vector<TunableTemplate> tunable_templates();

/// Adds template `t` to the registry (a back-end above topi registers its own, so that topi does
/// not depend on it); kiln::InternalError when one of its name is there. Thread-safe; references
/// that tunable_template returned stay valid.
void register_tunable_template(TunableTemplate t);

/// The template called `name`; kiln::Error listing the known names otherwise.
const TunableTemplate& tunable_template(const std::string& name);

/// Checks that template `t` schedules outputs of `compute`; kiln::Error naming both otherwise.
void check_template_compute(const TunableTemplate& t, const std::string& compute);

}  // namespace kiln::topi
