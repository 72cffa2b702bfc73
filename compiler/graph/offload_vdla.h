// offload_vdla: the heterogeneous build's pass (`kiln compile --target vdla`). Every QConv node
// (realize_qconv.h, the integer convolution's contract) that the VDLA's conv2d template
// (topi/vdla_conv2d.h) can run becomes a `VdlaQConv` node, which the graph build turns into a VDLA
// program (compiler/vdla/program.h) called by a graph node with "target": "vdla"; everything else
// stays on the host CPU, as in the paper's section 6.4 (ResNet-18's first convolution, 3 input
// channels, stays on the CPU).
//
//   x (int8 NCHW) -> LayoutTransform(0 -> 16) -> xb [1, C/16, H, W, 16]
//     -> VdlaQConv(xb, w_p, bias_p, shift_p) {k, stride, pad, relu, tile_oc, tile_ic, tile_h,
//                                             tile_w, vthreads, vthread_h, wgt_resident}
//     -> yb [1, OC/16, OH, OW, 16] -> LayoutTransform(16 -> 0) -> y (the QConv's output value)
//
// [1, C/16, H, W, 16] holds the bytes of the VDLA's blocked [C/16][H][W][1][16] (batch 1). The
// weights [OC, IC, K, K] are packed at build time into [OC/16][IC/16][K][K][16 out][16 in] (each
// block transposed, as WGT rows are), bias and shift [OC] into [OC/16][1][16] ACC rows: constants,
// so parameters of the bundle. Consecutive VDLA convolutions stay blocked: a QConv whose input is
// the NCHW conversion of an offloaded convolution's output reads that blocked output directly; the
// conversion back to NCHW is then left only where another reader (or a graph output) needs it
// (remove_dead_nodes drops the others).
//
// Supported: batch 1, group 1, dilation 1, a square kernel, one stride for both axes, equal pads
// (at most 15), input and output channels multiples of 16, constant weights, bias and shift, and a
// config that fits the VDLA's buffers. Each other QConv stays on the CPU with its reason in the
// report. The config of each offloaded convolution comes from `configs` when it holds the
// "vdla_conv2d" tunable template's task (the tuner's log), else from choose_conv2d_config on the
// cycle model (two virtual threads where a config fits, else one).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/graph/graph.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/vdla/conv2d_schedule.h"

namespace kiln::graph {

struct VdlaOffloadReport {
  size_t convolutions = 0;  ///< QConv nodes seen
  size_t offloaded = 0;     ///< of them, now VdlaQConv nodes
  /// "NODE: on the VDLA (shape, config)" for each offloaded one.
  std::vector<std::string> placed;
  /// "NODE stays on the CPU: REASON" for each other QConv.
  std::vector<std::string> kept_on_cpu;
  size_t layout_conversions = 0;  ///< LayoutTransform nodes made (before dead ones are removed)
};

/// Why QConv node `n` of `g` cannot run on the VDLA, or "" (its shape in `*shape` then).
std::string vdla_qconv_problem(const Graph& g, const Node& n, topi::VdlaConv2dShape* shape);

/// The rewrite described above; the caller then runs g.remove_dead_nodes().
VdlaOffloadReport offload_vdla(Graph& g, autotune::ConfigSource* configs = nullptr);

/// The template's compute and config of a VdlaQConv node (from its attributes).
topi::VdlaConv2d vdla_qconv_compute(const Node& n);
vdla_compiler::VdlaConv2dConfig vdla_qconv_config(const Node& n);

}  // namespace kiln::graph
