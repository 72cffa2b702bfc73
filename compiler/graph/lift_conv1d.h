// 1-D convolutions as 2-D ones of height 1, in the graph, so that alter_layout moves them to
// NCHW[x]c like any other convolution: its template vectorizes over the output channels and tiles
// the width, where the NCHW template that lowers a 1-D Conv directly vectorizes the width in one
// vector per register row (~40-100 GFLOP/s on an audio model's layers).
//
//   %y = Conv(%x, %w) {kernel_shape=[k], strides=[s], dilations=[d], pads=[p0,p1]}   x [N,C,T]
//     =>
//   %x2 = Reshape(%x) {shape=[N,C,1,T]}
//   %y2 = Conv(%x2, %w.2d) {kernel_shape=[1,k], strides=[1,s], dilations=[1,d], pads=[0,p0,0,p1]}
//   %y  = Reshape(%y2) {shape=[N,O,T']}
//
// Conditions: a Conv with a rank-3 input and a float32 constant weight (reshaped into a new
// constant "<name>.2d"). sink_reshapes then lifts the layers between lifted convolutions too
// (elementwise operators, residual Adds, 1-D poolings, channel Concats), so that a chain of 1-D
// layers stays 4-D (and blocked):
//
//   Conv1d -> Relu -> MaxPool1d -> Conv1d      Reshape -> Conv -> Relu -> MaxPool -> Conv ->
//   Reshape
//
// Run only where alter_layout runs (a CPU target); elsewhere the Conv's lowering lifts a 1-D
// convolution itself.
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Lifts every Conv that meets the conditions above; returns how many it lifted.
size_t lift_conv1d(Graph& graph);

}  // namespace kiln::graph
