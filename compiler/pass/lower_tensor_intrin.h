// Lowering of tensorized loop nests: each `attr [intrin] tensorize = part` statement that
// schedule_ops left (ir/tensor_intrin.h) becomes the statement the intrinsic's lowering returns
// for that part, given each of its buffers as a flat region (data, element offset, strides,
// scope). Runs after storage_flatten, which has turned the regions' reads into flat loads.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

/// Raises kiln::Error when an intrinsic has no statement for the part a nest needs, naming both.
ir::Stmt lower_tensor_intrin(const ir::Stmt& s);

}  // namespace kiln::pass
