// The VDLA's GEMM intrinsic.
#include "compiler/vdla/intrin.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::vdla_compiler {

te::TensorIntrin gemm_intrin(const vdla::Config& cfg) {
  const int b = cfg.batch(), bi = cfg.block_in(), bo = cfg.block_out();
  te::Tensor inp = te::placeholder({b, bi}, ir::kInt8, "inp");
  te::Tensor wgt = te::placeholder({bo, bi}, ir::kInt8, "wgt");
  te::IterVar k = te::reduce_axis({0, bi}, "k");
  te::Tensor out = te::compute(
      {b, bo},
      [&](ir::Var i, ir::Var j) {
        return te::sum(ir::cast(ir::kInt32, inp(i, k)) * ir::cast(ir::kInt32, wgt(j, k)), {k});
      },
      "out", {"i", "j"});
  return te::decl_tensor_intrin(
      out,
      [](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& acc) {
        const std::pair<const ir::IntrinBuffer*, const char*> scopes[] = {
            {&in[0], kInpScope}, {&in[1], kWgtScope}, {&acc, kAccScope}};
        for (const auto& [buf, scope] : scopes) {
          KILN_USER_CHECK(!buf->data.defined() || buf->scope == scope)
              << "tensorize: intrinsic 'vdla.gemm' needs '" << buf->name << "' in " << scope
              << ", but it is in " << buf->scope << " (set_scope its stage)";
        }
        auto addr = [](const ir::IntrinBuffer& x) {
          return ir::load(x.dtype, x.data, x.elem_offset);
        };
        ir::Stmt reset = ir::evaluate(
            ir::call(ir::kInt32, kGemmResetCall, {addr(acc)}, ir::CallKind::kIntrinsic));
        if (!in[0].data.defined()) return ir::IntrinStmts{ir::Stmt(), reset, ir::Stmt()};
        ir::Stmt update =
            ir::evaluate(ir::call(ir::kInt32, kGemmCall, {addr(acc), addr(in[0]), addr(in[1])},
                                  ir::CallKind::kIntrinsic));
        return ir::IntrinStmts{ir::seq({reset, update}), reset, update};
      },
      "vdla.gemm");
}

}  // namespace kiln::vdla_compiler
