// Building the loop program of a schedule: one loop nest per stage, each attached stage placed
// (with a realize of its region) inside the loop it is computed at, root stages realized at the
// top in producer-before-consumer order. The result still reads and writes tensors
// (ProducerLoad / ProducerStore); storage flattening comes later.
#pragma once

#include "compiler/ir/stmt.h"
#include "compiler/te/bound.h"
#include "compiler/te/schedule.h"

namespace kiln::te {

/// A copy of the schedule with inlined stages substituted into their consumers. Lowering works on
/// it, so the user's schedule is never changed and can be lowered again.
Schedule normalize(const Schedule& sch);

/// The loop program of a normalized schedule.
ir::Stmt schedule_ops(const Schedule& sch, const Bounds& bounds);

}  // namespace kiln::te
