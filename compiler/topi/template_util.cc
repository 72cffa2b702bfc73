// Helpers shared by the operator templates.
#include "compiler/topi/template_util.h"

#include <cmath>

#include "base/error.h"

namespace kiln::topi {

int64_t const_dim(const te::Tensor& t, size_t i, const char* op) {
  auto v = ir::as_const_int(t->shape()[i]);
  KILN_USER_CHECK(v.has_value()) << op << ": dimension " << i << " of '" << t->name()
                                 << "' must be a constant";
  return *v;
}

int split_position(const space::ConfigSpace& space, const std::string& name, int64_t limit) {
  const auto& cands = space.knob(name).candidates;
  int best = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    int64_t f = cands[i].back();
    if (f <= limit && f > cands[best].back()) best = static_cast<int>(i);
  }
  return best;
}

int nearest_split_position(const space::ConfigSpace& space, const std::string& name,
                           const std::vector<int64_t>& desired) {
  const auto& cands = space.knob(name).candidates;
  int best = 0;
  double best_distance = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    double distance = 0;
    for (size_t p = 0; p < cands[i].size() && p < desired.size(); ++p) {
      if (desired[p] > 0) distance += std::abs(std::log2(double(cands[i][p]) / double(desired[p])));
    }
    if (i == 0 || distance < best_distance) best = static_cast<int>(i), best_distance = distance;
  }
  return best;
}

int knob_position(const space::ConfigSpace& space, const std::string& name, int64_t value) {
  const auto& cands = space.knob(name).candidates;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i][0] == value) return static_cast<int>(i);
  }
  return 0;
}

size_t knob_index(const space::ConfigSpace& space, const std::string& name) {
  const auto& knobs = space.knobs();
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (knobs[i].name == name) return i;
  }
  KILN_USER_ERROR() << "config space has no knob '" << name << "'";
}

te::Stage epilogue_stage(te::Schedule& s, const te::Tensor& op_out, const te::Tensor& output) {
  if (!output.defined() || output == op_out) return s[op_out];
  KILN_ICHECK(output.ndim() == op_out.ndim())
      << "epilogue '" << output->name() << "' of '" << op_out->name() << "' has another rank";
  for (size_t i = 0; i < output.ndim(); ++i) {
    KILN_ICHECK(ir::as_const_int(output->shape()[i]) == ir::as_const_int(op_out->shape()[i]))
        << "epilogue '" << output->name() << "' of '" << op_out->name() << "' has another shape";
  }
  s[op_out].compute_inline();
  return s[output];
}

}  // namespace kiln::topi
