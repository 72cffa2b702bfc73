// The lowering pipeline, pass by pass.
#include "compiler/lower.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <unordered_set>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/codegen/build_device.h"
#include "compiler/codegen/codegen_nvptx.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/verify.h"
#include "compiler/pass/inject_prefetch.h"
#include "compiler/pass/inject_virtual_thread.h"
#include "compiler/pass/lower_tensor_intrin.h"
#include "compiler/pass/partition_loops.h"
#include "compiler/pass/prefetch_shared.h"
#include "compiler/pass/remove_no_op.h"
#include "compiler/pass/storage_flatten.h"
#include "compiler/pass/thread_sync.h"
#include "compiler/pass/unroll_loop.h"
#include "compiler/pass/unswitch_guards.h"
#include "compiler/pass/vectorize_loop.h"
#include "compiler/pass/verify_gpu.h"
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

std::atomic<uint64_t> full_lowering_count{0};

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

namespace {

/// A function named `name` whose parameters are the buffers of `args`; `buffers` maps each
/// argument's stage to its buffer. Every placeholder the schedule reads must be an argument.
ir::PrimFunc bind_arguments(const te::Schedule& n, const std::vector<te::Tensor>& args,
                            const std::string& name,
                            std::unordered_map<const ir::ProducerNode*, ir::Buffer>* buffers) {
  KILN_USER_CHECK(!name.empty()) << "lower: the function needs a name";
  ir::PrimFunc f;
  f.name = name;
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
    (*buffers)[st->op.get()] = b;
    f.params.push_back(ir::Param{b.data, b});
  }
  // Every placeholder a stage reads must be an argument (one walk over the bodies).
  for (auto& s : n->stages) {
    for (auto& in : s->op->inputs()) {
      KILN_USER_CHECK(in->is_compute() || buffers->count(in.get()))
          << "lower '" << name << "': placeholder '" << in->name()
          << "' is read by the schedule but not passed as an argument";
    }
  }
  return f;
}

/// bind_arguments for a GPU program: no parallel loops, constant shapes.
ir::PrimFunc bind_device_arguments(
    const te::Schedule& n, const std::vector<te::Tensor>& args, const std::string& name,
    std::unordered_map<const ir::ProducerNode*, ir::Buffer>* buffers) {
  for (auto& st : n->stages) {
    for (auto& iv : st->leaf_iter_vars) {
      KILN_USER_CHECK(st->attr(iv).for_kind != ir::ForKind::kParallel)
          << "stage '" << st->name() << "': loop '" << iv.var().name()
          << "' is parallel, which has no meaning on a GPU; bind it to blockIdx/threadIdx instead";
    }
  }
  ir::PrimFunc f = bind_arguments(n, args, name, buffers);
  for (auto& p : f.params) {
    for (auto& d : p.buffer->shape) {
      KILN_USER_CHECK(ir::as_const_int(d).has_value())
          << "lower_device '" << name << "': argument '" << p.buffer->name
          << "' has a symbolic shape; GPU kernels are lowered for constant shapes";
    }
  }
  return f;
}

}  // namespace

ir::PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                   const std::string& name, const LowerOptions& options) {
  te::Schedule n = te::normalize(sch);
  std::unordered_map<const ir::ProducerNode*, ir::Buffer> buffers;
  ir::PrimFunc f = bind_arguments(n, args, name, &buffers);

  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = checked(f, "schedule_ops", false, te::schedule_ops(n, bounds));
  s = checked(f, "storage_flatten", true, pass::storage_flatten(s, buffers));
  s = checked(f, "lower_tensor_intrin", true, pass::lower_tensor_intrin(s));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "inject_prefetch", true, pass::inject_prefetch(s));
  s = checked(f, "partition_loops", true, pass::partition_loops(s));
  s = checked(f, "vectorize_loops", true, pass::vectorize_loops(s));
  s = checked(f, "unroll_loops", true, pass::unroll_loops(s, options.auto_unroll_max_step));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "unswitch_guards", true, pass::unswitch_guards(s));
  s = checked(f, "remove_no_op", true, pass::remove_no_op(s));
  f.body = s;
  ++full_lowering_count;
  return f;
}

ir::PrimFunc lower_device_program(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                  const std::string& name, const target::Target& target,
                                  const LowerOptions& options) {
  KILN_USER_CHECK(target.is_gpu()) << "lower_device '" << name << "': target '" << target.str()
                                   << "' is not a GPU (cuda or opencl)";
  te::Schedule n = te::normalize(sch);
  std::unordered_map<const ir::ProducerNode*, ir::Buffer> buffers;
  ir::PrimFunc f = bind_device_arguments(n, args, name, &buffers);

  // The CPU pipeline without its CPU-only passes (loop partitioning and guard unswitching serve
  // register tiles of the host), then the GPU passes (docs/gpu.md).
  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = checked(f, "schedule_ops", false, te::schedule_ops(n, bounds));
  s = checked(f, "storage_flatten", true, pass::storage_flatten(s, buffers));
  s = checked(f, "lower_tensor_intrin", true, pass::lower_tensor_intrin(s));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "prefetch_shared", true, pass::prefetch_shared(s));
  s = checked(f, "inject_virtual_thread", true, pass::inject_virtual_thread(s));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "vectorize_loops", true, pass::vectorize_loops(s));
  s = checked(f, "unroll_loops", true, pass::unroll_loops(s, options.auto_unroll_max_step));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "remove_no_op", true, pass::remove_no_op(s));
  s = checked(f, "thread_sync", true, pass::thread_sync(s, "shared"));
  pass::verify_gpu(s, target);
  f.body = s;
  ++full_lowering_count;
  return f;
}

uint64_t full_lowerings() { return full_lowering_count.load(); }

ir::PrimFunc lower_for_analysis(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                const std::string& name, const target::Target& target) {
  te::Schedule n = te::normalize(sch);
  std::unordered_map<const ir::ProducerNode*, ir::Buffer> buffers;
  const bool gpu = target.is_gpu();
  ir::PrimFunc f = gpu ? bind_device_arguments(n, args, name, &buffers)
                       : bind_arguments(n, args, name, &buffers);
  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = after("schedule_ops", te::schedule_ops(n, bounds));
  s = after("storage_flatten", pass::storage_flatten(s, buffers));
  s = after("lower_tensor_intrin", pass::lower_tensor_intrin(s));
  s = after("simplify", ir::simplify(s));
  if (gpu) {
    s = after("prefetch_shared", pass::prefetch_shared(s));
    s = after("inject_virtual_thread", pass::inject_virtual_thread(s));
    s = after("simplify", ir::simplify(s));
  }
  s = after("vectorize_loops", pass::vectorize_loops(s));
  if (gpu) {
    s = after("thread_sync", pass::thread_sync(s, "shared"));
    pass::verify_gpu(s, target);
  }
  f.body = s;
  return f;
}

ir::PrimFunc lower_vdla(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                        const std::string& name) {
  te::Schedule n = te::normalize(sch);
  std::unordered_map<const ir::ProducerNode*, ir::Buffer> buffers;
  ir::PrimFunc f = bind_arguments(n, args, name, &buffers);
  for (auto& p : f.params) {
    for (auto& d : p.buffer->shape) {
      KILN_USER_CHECK(ir::as_const_int(d).has_value())
          << "lower_vdla '" << name << "': argument '" << p.buffer->name
          << "' has a symbolic shape; VDLA programs are built for constant shapes";
    }
  }
  te::Bounds bounds = te::infer_bound(n);
  ir::Stmt s = checked(f, "schedule_ops", false, te::schedule_ops(n, bounds));
  s = checked(f, "storage_flatten", true, pass::storage_flatten(s, buffers));
  s = checked(f, "lower_tensor_intrin", true, pass::lower_tensor_intrin(s));
  s = checked(f, "simplify", true, ir::simplify(s));
  s = checked(f, "inject_virtual_thread", true, pass::inject_virtual_thread(s));
  s = checked(f, "simplify", true, ir::simplify(s));
  f.body = s;
  return f;
}

pass::DeviceFunction lower_device(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                  const std::string& name, const target::Target& target,
                                  const LowerOptions& options) {
  pass::DeviceFunction d =
      pass::split_host_device(lower_device_program(sch, args, name, target, options));
  if (dump_ir()) {
    for (auto& k : d.kernels) after(("split_host_device: " + k.func.name).c_str(), k.func.body);
  }
  for (auto& k : d.kernels) ir::verify(k.func, k.func.body, true, "split_host_device");
  return d;
}

runtime::DeviceProgram build_gpu(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                 const target::Target& target, const std::string& name,
                                 const LowerOptions& options) {
  return codegen::build_device(lower_device(sch, args, name, target, options), target,
                               codegen::nvptx_compile);
}

runtime::Module build(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                      const std::string& target, const std::string& name,
                      const LowerOptions& options, bool optimize) {
  target::Target t = target::Target::parse(target);
  return codegen::build({lower(sch, args, name, options)}, t, nullptr, optimize);
}

}  // namespace kiln::compiler
