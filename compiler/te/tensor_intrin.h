// Tensor intrinsics for the tensorize schedule primitive (the paper's §4.3): a hardware (or
// library) operation declared as a tensor expression over placeholders, plus its lowering.
//
//   Tensor a = placeholder({4}, kFloat32, "a"), b = placeholder({4}, kFloat32, "b");
//   IterVar k = reduce_axis({0, 4}, "k");
//   Tensor c = compute({1}, [&](Var i) { return sum(a(k) * b(k), {k}); }, "c");
//   TensorIntrin dot4 = decl_tensor_intrin(c, [](auto& in, auto& out) { ... }, "dot4");
//   s[C].tensorize(xi, dot4);
//
// Lowering checks that the loops from the tensorized axis inward compute what the declaration
// computes (same extents, same body once indices are taken relative to the region) and replaces
// them by the statements the lowering function returns for the regions' flat buffers
// (ir::IntrinBuffer: data, element offset, strides, scope).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/tensor_intrin.h"
#include "compiler/te/tensor.h"

namespace kiln::te {

struct TensorIntrinNode final : ir::TensorIntrinLoweringNode {
  Tensor op;                   ///< the compute the intrinsic performs
  std::vector<Tensor> inputs;  ///< its placeholders, in order of first use in op's body
};
using TensorIntrin = std::shared_ptr<const TensorIntrinNode>;

/// An intrinsic computing `op` (a compute over placeholders only), lowered by `lower`. Raises
/// kiln::Error when `op` is not such a compute.
TensorIntrin decl_tensor_intrin(const Tensor& op, ir::IntrinLowerFn lower, std::string name);

}  // namespace kiln::te
