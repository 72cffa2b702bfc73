// The helpers the family files' lowerings share (lowering.h).
#include "compiler/graph/ops/lowering.h"

#include <cctype>

#include "base/error.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/reduce.h"
#include "compiler/topi/tunable.h"

namespace kiln::graph::ops {

void Tuning::schedule(const std::string& name, te::Schedule& s, const te::Tensor& t,
                      const te::Tensor& output) const {
  const topi::TunableTemplate& tmpl = topi::tunable_template(name);
  const space::Config cfg =
      configs != nullptr ? configs->choose(autotune::Task::make(name, t, target))
                         : tmpl.default_config(t, tmpl.space(t), target::Target::parse(target));
  tmpl.schedule(s, t, cfg, output);
}

Template Tuning::of(const std::string& name) const {
  return [self = *this, name](te::Schedule& s, const te::Tensor& t, const te::Tensor& output) {
    self.schedule(name, s, t, output);
  };
}

void LowerCtx::fail(const std::string& what) const {
  KILN_USER_ERROR() << "graph build: " << where() << ": " << what;
  throw Error("unreachable");  // KILN_USER_ERROR throws; this silences [[noreturn]] checks
}

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r.empty() ? "t" : r;
}

void injective(te::Schedule& s, const te::Tensor& t) { topi::schedule_injective_x86(s, t); }

void then_injective(te::Schedule& s, const te::Tensor& t, const te::Tensor& output) {
  if (output != t) injective(s, output);
}

LowerResult with_epilogue(const te::Tensor& y, const Template& base, const te::Tensor& out) {
  return {{out},
          [=](te::Schedule& s, const te::Tensor& output) {
            if (out != y && out != output) s[out].compute_inline();
            base(s, y, output);
          },
          y};
}

LowerResult injective_result(const te::Tensor& t) {
  return {{t}, [=](te::Schedule& s, const te::Tensor& output) {
            if (t != output) s[t].compute_inline();
            injective(s, output);
          }};
}

LowerResult reduce_result(const te::Tensor& y) {
  return {{y}, [=](te::Schedule& s, const te::Tensor& output) {
            topi::schedule_reduce_x86(s, y);
            then_injective(s, y, output);
          }};
}

topi::Ints2 ints2(const std::vector<int64_t>& v) {
  return {static_cast<int>(v.at(0)), static_cast<int>(v.at(1))};
}
topi::Ints4 ints4(const std::vector<int64_t>& v) {
  return {static_cast<int>(v.at(0)), static_cast<int>(v.at(1)), static_cast<int>(v.at(2)),
          static_cast<int>(v.at(3))};
}

topi::RowFold row_fold(const LowerCtx& c) {
  return target::Target::parse(c.tuning.target).is_gpu() ? topi::RowFold::kSerial
                                                         : topi::RowFold::kVectorLanes;
}

}  // namespace kiln::graph::ops
