// Choosing the VDLA conv2d's config (conv2d_schedule.h) on the cycle model.
#pragma once

#include "compiler/vdla/conv2d_schedule.h"
#include "compiler/vdla/program.h"

namespace kiln::vdla_compiler {

/// The config, among vdla_conv2d_candidates', ranked first by a rough estimate of its cycles,
/// then the fastest of the best `measured` (0: all of them) on the cycle model (the program built
/// and timed without executing). Raises kiln::Error when none fits.
VdlaConv2dConfig choose_conv2d_config(const topi::VdlaConv2d& op, int vthreads,
                                      const vdla::Config& cfg, int measured = 3);

/// The cycles of `c` on the cycle model, and its program.
struct TimedConv2d {
  VdlaProgram program;
  vdla::Stats stats;
};
TimedConv2d time_conv2d(const topi::VdlaConv2d& op, const VdlaConv2dConfig& c,
                        const vdla::Config& cfg);

}  // namespace kiln::vdla_compiler
