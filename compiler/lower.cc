// The lowering pipeline, pass by pass.
#include "compiler/lower.h"

#include <cstdlib>
#include <iostream>
#include <unordered_set>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/verify.h"
#include "compiler/pass/partition_loops.h"
#include "compiler/pass/remove_no_op.h"
#include "compiler/pass/storage_flatten.h"
#include "compiler/pass/unroll_loop.h"
#include "compiler/pass/unswitch_guards.h"
#include "compiler/pass/vectorize_loop.h"
#include "compiler/target/target.h"
#include "compiler/te/bound.h"
#include "compiler/te/schedule_ops.h"

namespace kiln::compiler {
namespace {

bool dump_ir() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_DUMP_IR");
    return v && std::string(v) == "1";
  }();
  return on;
}

ir::Stmt after(const char* pass, ir::Stmt s) {
  if (dump_ir()) std::cerr << "// ---- after " << pass << " ----\n" << s;
  return s;
}

/// Dumps (when asked) and verifies the IR after a pass of lower().
ir::Stmt checked(const ir::PrimFunc& f, const char* pass, bool flattened, ir::Stmt s) {
  after(pass, s);
  ir::verify(f, s, flattened, pass);
  return s;
}

}  // namespace

ir::Stmt lower_loops(const te::Schedule& sch) {
  te::Schedule n = te::normalize(sch);
  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = after("schedule_ops", te::schedule_ops(n, bounds));
  return after("simplify", ir::simplify(s));
}

ir::PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args, const std::string& name,
                   const LowerOptions& options) {
  KILN_USER_CHECK(!name.empty()) << "lower: the function needs a name";
  te::Schedule n = te::normalize(sch);

  // Bind each argument to a buffer; every placeholder the schedule reads must be one of them.
  ir::PrimFunc f;
  f.name = name;
  std::unordered_map<const ir::ProducerNode*, ir::Buffer> buffers;
  std::unordered_set<std::string> names;
  for (auto& t : args) {
    KILN_USER_CHECK(t.defined()) << "lower '" << name << "': an argument tensor is undefined";
    KILN_USER_CHECK(n->has_stage(t)) << "lower '" << name << "': argument '" << t->name()
                                     << "' is not read or computed by this schedule";
    te::Stage st = n->stage_of(t);
    KILN_USER_CHECK(names.insert(t->name()).second)
        << "lower '" << name << "': two arguments are named '" << t->name() << "'";
    KILN_USER_CHECK(st->attach_type == te::AttachType::kRoot)
        << "lower '" << name << "': argument '" << t->name()
        << "' is inlined or computed inside another stage, so it is never stored whole";
    ir::Buffer b = ir::make_buffer(t->name(), t->dtype(), t->shape());
    buffers[st->op.get()] = b;
    f.params.push_back(ir::Param{b.data, b});
  }
  // Every placeholder a stage reads must be an argument (one walk over the bodies).
  for (auto& s : n->stages) {
    for (auto& in : s->op->inputs()) {
      KILN_USER_CHECK(in->is_compute() || buffers.count(in.get()))
          << "lower '" << name << "': placeholder '" << in->name()
          << "' is read by the schedule but not passed as an argument";
    }
  }

  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = checked(f, "schedule_ops", false, te::schedule_ops(n, bounds));
  s = checked(f, "storage_flatten", true, pass::storage_flatten(s, buffers));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "partition_loops", true, pass::partition_loops(s));
  s = checked(f, "vectorize_loops", true, pass::vectorize_loops(s));
  s = checked(f, "unroll_loops", true, pass::unroll_loops(s, options.auto_unroll_max_step));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "unswitch_guards", true, pass::unswitch_guards(s));
  s = checked(f, "remove_no_op", true, pass::remove_no_op(s));
  f.body = s;
  return f;
}

runtime::Module build(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                      const std::string& target, const std::string& name, const LowerOptions& options) {
  target::Target t = target::Target::parse(target);
  return codegen::build({lower(sch, args, name, options)}, t);
}

}  // namespace kiln::compiler
