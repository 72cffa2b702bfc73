// dot4_u8s8_intrin: its declaration as a tensor expression and its lowering to vector loads, one
// dot4_u8s8 call and a vector store.
#include "compiler/topi/dot4_intrin.h"

#include <string>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/te/tensor.h"

namespace kiln::topi {

namespace {

/// The contiguous vector of `lanes` elements of `buf` from its region's start; an internal error
/// where the schedule gave the intrinsic a strided region (its templates never do).
ir::Expr contiguous(const ir::IntrinBuffer& buf, int lanes, std::vector<int64_t> strides) {
  KILN_ICHECK(buf.strides.size() == strides.size());
  for (size_t d = 0; d < strides.size(); ++d) {
    KILN_ICHECK(ir::is_const_int(buf.strides[d], strides[d]))
        << "dot4_u8s8: '" << buf.name << "' has stride " << ir::to_string(buf.strides[d])
        << " along dimension " << d << ", the intrinsic needs " << strides[d];
  }
  return ir::ramp(buf.offset(std::vector<ir::Expr>(strides.size(), ir::Expr(0))), 1, lanes);
}

}  // namespace

te::TensorIntrin dot4_u8s8_intrin(int lanes) {
  KILN_ICHECK(lanes > 1) << "dot4_u8s8_intrin: " << lanes << " lanes";
  te::Tensor a = te::placeholder({4}, ir::DataType::UInt(8), "a");
  te::Tensor b = te::placeholder({lanes, 4}, ir::kInt8, "b");
  te::IterVar k = te::reduce_axis({0, 4}, "k");
  te::Tensor out =
      te::compute({lanes},
                  [&](ir::Var j) {
                    return te::sum(ir::cast(ir::kInt32, a(k)) * ir::cast(ir::kInt32, b(j, k)), {k});
                  },
                  "dot4", {"j"});
  return te::decl_tensor_intrin(
      out,
      [lanes](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& o) {
        const ir::DataType acc_t = ir::DataType::Int(32, lanes);
        const ir::Expr out_index = contiguous(o, lanes, {1});
        ir::Stmt reset = ir::store(o.data, ir::make_zero(acc_t), out_index);
        if (!in[0].data.defined()) return ir::IntrinStmts{ir::Stmt(), reset, ir::Stmt()};
        const ir::Expr av =
            ir::load(ir::DataType::UInt(8, 4), in[0].data, contiguous(in[0], 4, {1}));
        const ir::Expr bv = ir::load(ir::DataType::Int(8, 4 * lanes), in[1].data,
                                     contiguous(in[1], 4 * lanes, {4, 1}));
        auto step = [&](ir::Expr acc) {
          return ir::store(o.data, ir::dot4_u8s8(std::move(acc), av, bv), out_index);
        };
        return ir::IntrinStmts{step(ir::make_zero(acc_t)), reset,
                               step(ir::load(acc_t, o.data, out_index))};
      },
      "dot4_u8s8_x" + std::to_string(lanes));
}

}  // namespace kiln::topi
