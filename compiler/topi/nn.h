// Neural-network operators that are not convolutions or dense layers: batch normalization for
// inference (an injective compute), softmax and log-softmax along one axis (ONNX opset 13) in the
// numerically stable form max, exp, sum, normalize, with an x86 schedule, and ONNX Flatten.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/te/schedule.h"
#include "compiler/topi/reduce.h"

namespace kiln::topi {

/// y = (x - mean[c]) / sqrt(var[c] + epsilon) * gamma[c] + beta[c] with c the axis 1 of x (NCHW
/// or any rank >= 2); gamma, beta, mean and var are 1-D of size C.
te::Tensor batch_norm_inference(const te::Tensor& x, const te::Tensor& gamma,
                                const te::Tensor& beta, const te::Tensor& mean,
                                const te::Tensor& var, double epsilon = 1e-5,
                                const std::string& name = "batch_norm");

/// exp(x - max) / sum(exp(x - max)) along `axis` (negative from the end). The stages are
/// name.max (a max reduction), name.exp, name.sum (a sum reduction) and the result `name`; with
/// RowFold::kVectorLanes, name.max.lanes and name.sum.lanes before the reductions (reduce.h).
te::Tensor softmax(const te::Tensor& x, int64_t axis = -1, const std::string& name = "softmax",
                   RowFold fold = RowFold::kSerial);

/// x - max - log(sum(exp(x - max))) along `axis`; stages name.max, name.sum and `name`.
te::Tensor log_softmax(const te::Tensor& x, int64_t axis = -1,
                       const std::string& name = "log_softmax", RowFold fold = RowFold::kSerial);

/// The x86 schedule of softmax or log_softmax's output `out` (its other stages found from it by
/// name; producers of the input are left alone, inlined or not):
/// the axes before the softmax axis fused and run in parallel, the reductions and the exponentials
/// computed per outer iteration (one row when the axis is the last), the normalization vectorized
/// by 16 along the innermost axes.
void schedule_softmax_x86(te::Schedule& s, const te::Tensor& out);

/// ONNX Flatten: a 2-D tensor [d_0 * ... * d_{axis-1}, d_axis * ... * d_{n-1}] (axis in [-n, n]).
te::Tensor flatten(const te::Tensor& x, int64_t axis = 1, const std::string& name = "flatten");

}  // namespace kiln::topi
