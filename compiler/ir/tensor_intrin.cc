// IntrinBuffer's index helpers.
#include "compiler/ir/tensor_intrin.h"

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"

namespace kiln::ir {

Expr IntrinBuffer::offset(const std::vector<Expr>& indices) const {
  KILN_ICHECK(indices.size() == strides.size())
      << "intrinsic buffer '" << name << "' has " << strides.size() << " dimensions, indexed with "
      << indices.size();
  Expr e = elem_offset;
  for (size_t d = 0; d < indices.size(); ++d) e = e + indices[d] * strides[d];
  return simplify(e);
}

Expr IntrinBuffer::load(const std::vector<Expr>& indices) const {
  return ir::load(dtype, data, offset(indices));
}

Stmt IntrinBuffer::store(const std::vector<Expr>& indices, Expr value) const {
  return ir::store(data, std::move(value), offset(indices));
}

}  // namespace kiln::ir
