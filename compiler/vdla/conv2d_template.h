// The VDLA conv2d as a tunable template ("vdla_conv2d" in compiler/topi/tunable.h's registry, put
// there by register_templates below): what the tuner needs of conv2d_schedule.h, behind the
// TunableTemplate interface, which knows a compute only by its output.
//
// The config space has one knob per field of VdlaConv2dConfig, each over the values that some
// config of vdla_conv2d_space (one and two virtual threads, both thread axes) takes:
//   tile_oc, tile_ic, tile_h   output channel blocks, input channel blocks per step, output rows
//   tile_w                     output columns per tile (0: the whole width)
//   vthreads                   1 or 2 `cthread` virtual threads
//   vthread_axis               0: the threads split the oc tiles, 1: the row tiles (one thread:
//                              the same program either way, measured once)
//   wgt_resident               0 / 1: the weights loaded once per output-channel tile
// Their product also holds configs that do not fit (a tile too big for a buffer, a factor that
// does not divide together with another): those do not lower, with vdla_conv2d_problem's reason,
// and the tuner records them as compile errors without building anything.
// The default is the first of vdla_conv2d_candidates with two threads where one fits, else with
// one: the largest tiles that fit (channel tiles, then the width, then the tallest row tile),
// with latency hiding. A cheap rule (no build), close on most of ResNet-18's offloaded layers to
// conv2d.h's choose_conv2d_config (which times three candidates on the cycle model) but not
// on every one (a 1x1 layer such as C8): tuning finds the rest (`scripts/bench.sh vdla`).
//
//   te::Tensor out = topi::vdla_conv2d(shape, /*relu=*/true).out;  // carries its workload
//   space::ConfigSpace space = vdla_conv2d_config_space(out);
//   VdlaConv2dConfig c = vdla_conv2d_config_of(space.get(7));
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/topi/tunable.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/vdla/conv2d_schedule.h"

namespace kiln::vdla_compiler {

/// The stages of the vdla_conv2d compute whose output is `out` (found through its producers, its
/// shape and relu read from the workload it carries); kiln::InternalError for another tensor.
topi::VdlaConv2d vdla_conv2d_stages(const te::Tensor& out);

/// The space described above, for the paper's prototype (vdla::Config{}).
space::ConfigSpace vdla_conv2d_config_space(const te::Tensor& out);

/// The default described above.
space::Config vdla_conv2d_default(const te::Tensor& out, const space::ConfigSpace& space,
                                  const target::Target& target);

/// The template's config of a point of the space.
VdlaConv2dConfig vdla_conv2d_config_of(const space::Config& config);

/// The point of `space` that is `c`; kiln::Error naming the knob whose value the space lacks.
space::Config vdla_conv2d_point(const space::ConfigSpace& space, const VdlaConv2dConfig& c);

/// schedule_vdla_conv2d at `config` into `s` (which must be create_schedule({out})'s: it is
/// replaced). No epilogue: `output` must be `out`. kiln::Error for a config that does not fit.
void schedule_vdla_conv2d_config(te::Schedule& s, const te::Tensor& out,
                                 const space::Config& config, const te::Tensor& output);

/// The template "vdla_conv2d" (computes: vdla_conv2d) of the functions above.
topi::TunableTemplate conv2d_template();

/// Adds the VDLA's templates (vdla_conv2d) to topi's registry, once however often it is called
/// (from any thread): what asks topi for a template by name, the tuning task (compiler/autotune)
/// and the graph's VDLA offload, calls it first, so that topi never names the VDLA.
void register_templates();

}  // namespace kiln::vdla_compiler
