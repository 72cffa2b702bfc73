// The lowering side of the tensorize schedule primitive (schedule_ops calls it): matching the loops
// under a tensorized axis against the intrinsic's declaration, and the statements that stand for
// the intrinsic until lower_tensor_intrin (compiler/pass) calls its lowering (ir/tensor_intrin.h).
#pragma once

#include <cstddef>
#include <vector>

#include "compiler/ir/stmt.h"
#include "compiler/te/message_passing.h"
#include "compiler/te/schedule.h"

namespace kiln::te {

/// The intrinsic's statements for a tensorized stage, each wrapped in the split guards on the
/// outer loops: `body` (every reduction loop inside the tensorized axis), or `reset` and `update`
/// (some outside; `reset` runs before them, where the inputs' regions are not live: its
/// inputs have no data).
struct TensorizedCalls {
  ir::Stmt body, reset, update;
};

/// Checks that leaf loops [pos, end) of `stage` compute what its intrinsic computes and returns
/// the calls; kiln::Error naming the stage, the axis and the intrinsic otherwise. `values` gives
/// every axis of the stage in terms of its loops (pass_up_index), `guards` the split guards.
TensorizedCalls tensorize_calls(const StageNode& stage, size_t pos, const RangeMap& ranges,
                                const ValueMap& values, const std::vector<ir::Expr>& guards);

}  // namespace kiln::te
