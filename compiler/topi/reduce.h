// Reductions over a set of axes (ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare) and the index reductions
// ArgMax / ArgMin, with their x86 schedule. A reduction is one stage `name.red` (the combiner over
// the reduced axes, the output's shape: the reduced axes kept with size 1 or dropped), followed,
// where the operator needs it, by an elementwise stage `name` (Mean's division, L2's square root,
// LogSum's logarithm); LogSumExp subtracts a max stage `name.max` first, so that it never
// overflows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::topi {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

/// How a reduction of the last axis alone folds each row: in one stage (GPU templates spread a
/// row across threads), or for CPUs, when the row has at least 32 elements, in two: S.lanes folds
/// every 16th element of the row's whole chunks of 16 into 16 lanes (one vector; a scalar chain
/// waits out the combiner's latency at every element), then the stage S folds the lanes and the
/// row's last n % 16 elements. Other reductions fold in one stage either way.
enum class RowFold { kSerial, kVectorLanes };

/// The reduction `op` of x over `axes` (each in [-rank, rank), none twice; empty: every axis), the
/// reduced axes kept with size 1 when `keepdims`. Mean, L2, LogSum and LogSumExp need a
/// floating-point x. kiln::Error naming `name` for a bad axis or dtype.
te::Tensor reduce(const te::Tensor& x, ReduceOp op, const std::vector<int64_t>& axes, bool keepdims,
                  const std::string& name = "reduce", RowFold row_fold = RowFold::kSerial);

/// One reduction stage `name` of `kind` along `axis` of x, the axis kept with size 1, folding
/// value(input point): softmax's max and sum.
te::Tensor reduce_along(const te::Tensor& x, int axis, ir::ReduceKind kind, const std::string& name,
                        RowFold row_fold,
                        const std::function<ir::Expr(const std::vector<ir::Expr>&)>& value);

/// The x86 schedule of a S.lanes stage: the rows in parallel, the fold loop outside the lanes,
/// which are one vector.
void schedule_row_lanes_x86(te::Schedule& s, const te::Tensor& lanes);

/// The int64 index of the largest (`is_max`) or smallest element along `axis`: the first such
/// index, or the last one with `select_last_index`; the axis kept with size 1 when `keepdims`.
/// Stages `name.ext` (the extreme value) and `name`.
te::Tensor arg_reduce(const te::Tensor& x, bool is_max, int64_t axis, bool keepdims,
                      bool select_last_index, const std::string& name = "arg_reduce");

/// ONNX CumSum along `axis`: out[..., i, ...] = the sum of x over k <= i (k < i when
/// `exclusive`; k >= i, or k > i, when `reverse`). One reduction stage.
te::Tensor cumsum(const te::Tensor& x, int64_t axis, bool exclusive, bool reverse,
                  const std::string& name = "cumsum");

/// ONNX Hardmax along `axis`: 1 where x holds the first largest element of its row, else 0.
/// Stages name.arg (an arg_reduce) and `name`.
te::Tensor hardmax(const te::Tensor& x, int64_t axis, const std::string& name = "hardmax");

/// ONNX LayerNormalization over the axes from `axis` on: y = (x - mean) * inv_std_dev * scale +
/// bias (scale and bias, bias optional, broadcast against those axes), with mean and inv_std_dev =
/// 1 / sqrt(var + epsilon) of x's shape with the normalized axes of size 1 (the variance computed
/// from the deviations, two passes). Stages name.mean(.red), name.var(.red), name.inv_std_dev
/// and `name`.
struct LayerNormOutputs {
  te::Tensor y, mean, inv_std_dev;
  te::Tensor var, deviations2;  ///< inner stages, for the schedule
};
/// With `per_channel`, scale and bias are [C] vectors over axis 1 instead (InstanceNormalization:
/// axis 2, the statistics per sample and channel).
LayerNormOutputs layer_norm(const te::Tensor& x, const te::Tensor& scale, const te::Tensor& bias,
                            int64_t axis, double epsilon, const std::string& name = "layer_norm",
                            bool per_channel = false, RowFold row_fold = RowFold::kSerial);
/// Its x86 schedule: the two reductions as schedule_reduce_x86, the rest injective.
void schedule_layer_norm_x86(te::Schedule& s, const LayerNormOutputs& o);

/// The x86 schedule of a reduce() or arg_reduce() output `out` (its own stages found from it by
/// name; producers of the input inlined into it by the caller stay inlined): each reduction stage
/// with its output axes fused and run in parallel when there are many, the elementwise stage
/// after it by schedule_injective_x86.
void schedule_reduce_x86(te::Schedule& s, const te::Tensor& out);

}  // namespace kiln::topi
