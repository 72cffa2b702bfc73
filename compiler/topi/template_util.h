// Helpers shared by the operator templates: constant dimensions, and picking default points of a
// config space by the values of their knobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/space/space.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"

namespace kiln::topi {

/// Dimension i of t, which must be a constant; kiln::Error naming `op` and the tensor otherwise.
int64_t const_dim(const te::Tensor& t, size_t i, const char* op);

/// The position of the candidate of split knob `name` whose innermost factor is the largest one
/// not above `limit` (the first candidate when none is).
int split_position(const space::ConfigSpace& space, const std::string& name, int64_t limit);

/// The position of the candidate of split knob `name` nearest to `desired` (the factors,
/// outermost first; 0 means "any"), nearest by the sum of |log2(factor / desired)| over the parts.
int nearest_split_position(const space::ConfigSpace& space, const std::string& name,
                           const std::vector<int64_t>& desired);

/// The position of `value` among the choices of knob `name` (0 when absent).
int knob_position(const space::ConfigSpace& space, const std::string& name, int64_t value);

/// The index of knob `name` in the space, for filling a positions vector.
size_t knob_index(const space::ConfigSpace& space, const std::string& name);

/// The stage a template tiles to store its result. `output` undefined or `op_out` itself: op_out's
/// stage. Otherwise `output` is an elementwise epilogue of `op_out` with the same shape (a bias, a
/// batch norm, an activation, a residual add; the fused group's last stage, its other stages
/// inlined): `op_out`, which must by now be a copy out of the template's register tile (after
/// cache_write), is inlined, and the epilogue's stage is returned, so that the epilogue is computed
/// on the register tile before it reaches memory.
te::Stage epilogue_stage(te::Schedule& s, const te::Tensor& op_out, const te::Tensor& output);

}  // namespace kiln::topi
