// The lowering half of a tensor intrinsic (te::TensorIntrin, compiler/te/tensor_intrin.h, is the
// declaration half): what the tensorize schedule primitive hands to the intrinsic once the
// program's tensors are flat buffers.
//
// Between schedule_ops and lower_tensor_intrin (the pass after storage_flatten), a tensorized
// loop nest is the statement
//
//   attr [intrin] tensorize = "body" | "reset" | "update"
//     kiln.tensorize_args(n0, T0[begin], T0[begin + e_0], ..., n1, T1[begin], ...)
//
// with one group per buffer of the intrinsic (its inputs in order, then its output): the number
// n of dimensions the intrinsic sees, the element where the region starts, and the elements one
// step along each of those dimensions (a reset's inputs are a lone -1: not live there). Storage
// flattening turns the reads into flat loads, from which the pass takes each buffer's data, offset
// and strides.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

/// One tensor of an intrinsic, as its lowering sees it: a region of a flat buffer.
struct IntrinBuffer {
  Var data;                   ///< the flat buffer
  Expr elem_offset;           ///< index of the region's first element, in elements
  std::vector<Expr> strides;  ///< elements per step along each dimension of the intrinsic's tensor
  std::string scope;          ///< "global", "local", "local.acc_buffer", ...
  DataType dtype;
  std::string name;  ///< the program's tensor

  /// The flat index of element `indices` of the region.
  Expr offset(const std::vector<Expr>& indices) const;
  /// data[offset(indices)]
  Expr load(const std::vector<Expr>& indices) const;
  /// data[offset(indices)] = value
  Stmt store(const std::vector<Expr>& indices, Expr value) const;
};

/// What an intrinsic lowers to. The lowering is called once per part a nest needs; for `reset` the
/// inputs are default IntrinBuffers (no data): only the output is live there. A reduction's
/// tensorized nest is `body` when every reduction loop is inside it; when some are outside, `reset`
/// (the output zeroed, before the first reduction loop) and `update` (one accumulation step, inside
/// them). A non-reduction uses `body` only.
struct IntrinStmts {
  Stmt body, reset, update;
};

/// The lowering: the intrinsic's inputs in order and its output, to its statements.
using IntrinLowerFn =
    std::function<IntrinStmts(const std::vector<IntrinBuffer>& inputs, const IntrinBuffer& output)>;

struct TensorIntrinLoweringNode : Object {
  std::string name;
  IntrinLowerFn lower;
};

namespace attr {
inline constexpr const char* kTensorize =
    "tensorize";  ///< node: TensorIntrinLoweringNode; value: part
}  // namespace attr
inline constexpr const char* kTensorizeArgs = "kiln.tensorize_args";

}  // namespace kiln::ir
