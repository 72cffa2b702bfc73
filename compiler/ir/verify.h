// A structural check of the IR, run between lowering passes: every variable is defined before it
// is used (function parameters, loop variables, lets, allocations, thread axes), buffers are
// accessed through handles, operands agree on their types, and no tensor-level node survives
// flattening. A failure is an internal error that names the pass that broke the invariant.
#pragma once

#include <string>

#include "compiler/ir/function.h"

namespace kiln::ir {

/// Raises kiln::InternalError naming `after_pass` when `body` is malformed. `flattened` asks that
/// no ProducerLoad/ProducerStore/ProducerRealize remain. Variables in `f.params` and the buffers'
/// shapes are taken as defined.
void verify(const PrimFunc& f, const Stmt& body, bool flattened, const std::string& after_pass);

}  // namespace kiln::ir
