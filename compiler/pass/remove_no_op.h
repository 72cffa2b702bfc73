// Removal of statements that do nothing: loops whose body does nothing (or that never run), ifs
// whose branches do nothing (an empty then-branch flips the condition onto the else-branch; a
// constant condition keeps the branch it selects), evaluations without side effects, stores of an
// element to itself, allocations never used (the body stays), lets whose variable is unused and
// whose value has no side effects, and attributes or realizes around nothing.
//
// Side effects are calls other than pure intrinsics; loads have none.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt remove_no_op(const ir::Stmt& s);

}  // namespace kiln::pass
