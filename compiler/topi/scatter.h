// ONNX GatherND, ScatterElements and ScatterND (opsets 11 to 18), with their x86 schedule.
//
// GatherND is a gather: each output element reads one data element, an injective compute that
// schedule_injective_x86 schedules (producers inlined, consumers fused) like take.
//
// A scatter is not: an output element depends on which updates hit it. In tensor expressions the
// only way to say so is a reduction over the updates, which these computes do, so that the naive
// schedule (and a GPU's one thread per output) computes exactly the operator:
//
//   reduction none (the last update wins, as ONNX Runtime does):
//     name.winner[s] = max over j of (index(j) == s ? j : -1)       int32, one per slot s
//     name[o]        = winner[slot(o)] >= 0 ? updates[winner, ...] : data[o]
//   reduction add / mul / max / min (every update combines: data first, then in update order):
//     name[o] = combine over j in [0, n] of
//               (j == 0 ? data[o] : update j - 1 hits o ? its value : identity)
//
// A slot is what one index addresses: ScatterND's first k coordinates of data (k: the indices'
// last dimension), ScatterElements' element with its axis coordinate. Evaluated as written, that is
// O(slots x updates): 75648 x 3000 compares for a [1, 197, 384] tensor hit elementwise by 3000
// indices. So the x86 schedule tensorizes that reduction stage with an intrinsic whose declaration
// is the same compute (tensorize checks that the stage computes it) and whose lowering is the loop
// ONNX Runtime runs: fill (winner = -1, or out = data), then one pass over the indices, in order,
// writing or combining at the index each names: O(slots + updates), the last update winning by the
// loop's order. ScatterND's name stage is then a gather, O(output), vectorized and in parallel.
//
// Negative indices count from the end of their axis; an index still outside it (ONNX calls that an
// error, and a run-time tensor cannot be checked when building) is skipped by the scatters and
// clamped by GatherND, never a write or read out of bounds.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/te/schedule.h"

namespace kiln::topi {

/// ONNX's `reduction` attribute of ScatterElements and ScatterND (none, add, mul from opset 16,
/// max, min from opset 18).
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul, kMax, kMin };

/// The reduction named by the attribute's string; kiln::Error naming `op` and the value otherwise.
ScatterReduction parse_scatter_reduction(const std::string& value, const std::string& op);

/// ONNX GatherND: data of rank r, integer indices of rank q >= 1 whose last dimension k is in
/// [1, r - batch_dims], the first batch_dims dimensions of both equal; out[b, j, t] =
/// data[b, indices[b, j, 0..k), t], of shape indices.shape[:-1] + data.shape[batch_dims + k:].
te::Tensor gather_nd(const te::Tensor& data, const te::Tensor& indices, int64_t batch_dims = 0,
                     const std::string& name = "gather_nd");

/// ONNX ScatterElements (and opset 9's Scatter): a copy of data where, for every position p of
/// indices (integer, data's rank, each dimension but `axis` at most data's; updates of the same
/// shape and data's dtype), the element at p with its `axis` coordinate replaced by indices[p] is
/// updates[p] (kNone; the last such p wins), or combined with it. Stages: `name.winner` (kNone
/// only) and `name`.
te::Tensor scatter_elements(const te::Tensor& data, const te::Tensor& indices,
                            const te::Tensor& updates, int64_t axis,
                            ScatterReduction reduction = ScatterReduction::kNone,
                            const std::string& name = "scatter_elements");

/// ONNX ScatterND: a copy of data (rank r) where, for every index tuple u of indices (integer, rank
/// q >= 1, last dimension k in [1, r]), the slice data[indices[u, 0..k)] (of shape data.shape[k:])
/// is updates[u] (kNone; the last such u wins), or combined with it; updates has the shape
/// indices.shape[:-1] + data.shape[k:] and data's dtype. Stages: `name.winner` (kNone only) and
/// `name`.
te::Tensor scatter_nd(const te::Tensor& data, const te::Tensor& indices, const te::Tensor& updates,
                      ScatterReduction reduction = ScatterReduction::kNone,
                      const std::string& name = "scatter_nd");

/// The x86 schedule of a scatter_elements or scatter_nd output `out` (found by the attribute its
/// compute carries): the reduction stage tensorized into the fill-and-scatter loop (computed at
/// the root; its inputs must be stages of their own, not inlined into it), and for kNone `out` by
/// schedule_injective_x86. kiln::Error when `out` is not a scatter's output.
void schedule_scatter_x86(te::Schedule& s, const te::Tensor& out);

/// The reduction stage of a scatter output `out` (itself, or its `name.winner`), or an undefined
/// tensor when `out` is not a scatter's output.
te::Tensor scatter_stage(const te::Tensor& out);

}  // namespace kiln::topi
