// Batch-norm folding: an inference BatchNormalization right after a Conv, ConvTranspose, Gemm or
// MatMul with constant weights becomes part of that op's weight and bias, so the network runs one
// op fewer and the conv's epilogue shrinks.
//
//   %c = Conv(%x, %w, %b)                               %y = Conv(%x, %w', %b')
//   %y = BatchNormalization(%c, %g, %beta, %m, %v)  =>
//
//   s  = g / sqrt(v + epsilon)          (per output channel, computed in double)
//   w' = w * s                          (each output channel's filter; dim 0 of a Conv weight,
//                                        dim 1 of a ConvTranspose's [C, M/group, k...] within
//                                        each group's rows)
//   b' = (b - m) * s + beta             (b = 0 when the conv has no bias)
//
// Conditions: all of the batch norm's parameters are float32 constants; the op's weight (and
// bias, if any) are float32 constants; the op's output is read by the batch norm alone and is not a
// graph output. For Gemm (Y = alpha * A * B + beta * C) the channel is Y's column, B's columns
// (rows when transB) are scaled and C becomes (beta * C - m) * s + beta_bn with beta = 1. A MatMul
// of a matrix by a constant matrix becomes such a Gemm. The conv/dense node takes over the batch
// norm's output value (name and all) and the batch norm node is removed; the new weights are new
// constants named "<old name>.bn_folded".
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Folds every batch norm that meets the conditions above; returns how many it folded.
size_t fold_batch_norm(Graph& graph);

}  // namespace kiln::graph
