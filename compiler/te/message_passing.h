// Moving domains and index values along a stage's split/fuse relations.
//  - Down (root → leaves): the extents of the loops made by split and fuse.
//  - Up (leaves → root): the value of each root axis in terms of the loop variables, and the
//    guards a split that does not divide its axis needs.
// Every loop made by split or fuse runs over [0, extent); a root axis that is still a loop runs
// over [0, extent) too and its value is the loop variable plus the axis' minimum.
#pragma once

#include <unordered_map>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::te {

using RangeMap = std::unordered_map<const ir::IterVarNode*, Range>;
using ValueMap = std::unordered_map<const ir::IterVarNode*, Expr>;

/// Fills the ranges of the axes made by the stage's relations from its root axes' ranges.
void pass_down_domain(const StageNode& stage, RangeMap* ranges);

/// The value of every axis of the stage (root ones included) in terms of its loop variables,
/// `leaf_values` giving each loop's value (normally its variable).
ValueMap pass_up_index(const StageNode& stage, const RangeMap& ranges, ValueMap leaf_values);

/// The value of each loop: its variable, plus the axis' minimum for root axes with one.
ValueMap leaf_values(const StageNode& stage, const RangeMap& ranges);

/// Conditions that keep the iterations of non-dividing splits inside their parent's range.
std::vector<Expr> split_guards(const StageNode& stage, const RangeMap& ranges,
                               const ValueMap& values);

}  // namespace kiln::te
