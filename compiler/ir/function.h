// A lowered function: what lowering hands to code generation. Its tensor parameters are flat
// buffers with a shape (whose entries may be symbolic variables, bound from the arguments at call
// time); scalar parameters are plain variables.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

/// A flat, row-major array in memory: `data` is the handle variable that Load/Store use.
struct Buffer {
  Var data;
  DataType dtype;
  std::vector<Expr> shape;
  std::string name;
  std::string scope = "global";

  /// Row-major flat index of a multi-dimensional index.
  Expr flat_index(const std::vector<Expr>& indices) const;
};

/// Makes a buffer whose data variable is a fresh handle named after the buffer.
Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape,
                   std::string scope = "global");

/// One parameter of a lowered function: a tensor (buffer) or a scalar variable.
struct Param {
  Var var;                       ///< the scalar, or the tensor's data handle (== buffer->data)
  std::optional<Buffer> buffer;  ///< set for tensors
  bool is_tensor() const { return buffer.has_value(); }
};

struct PrimFunc {
  std::string name;
  std::vector<Param> params;
  Stmt body;
};

}  // namespace kiln::ir
