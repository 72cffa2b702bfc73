// Buffers and lowered functions.
#include "compiler/ir/function.h"

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

Expr Buffer::flat_index(const std::vector<Expr>& indices) const {
  KILN_ICHECK(indices.size() == shape.size()) << "buffer " << name << " has " << shape.size()
                                              << " dimensions, indexed with " << indices.size();
  if (indices.empty()) return make_const(kInt32, int64_t{0});
  Expr idx = indices[0];
  for (size_t i = 1; i < indices.size(); ++i) idx = idx * shape[i] + indices[i];
  return idx;
}

Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape, std::string scope) {
  Buffer b;
  b.data = Var(name, DataType::Handle());
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.name = std::move(name);
  b.scope = std::move(scope);
  return b;
}

}  // namespace kiln::ir
