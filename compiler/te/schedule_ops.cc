// Loop nests from stages: leaf loops with their annotations, split guards, reduction init and
// update, and attached stages placed at their loops.
#include "compiler/te/schedule_ops.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"
#include "compiler/te/tensorize.h"

namespace kiln::te {
namespace {

Schedule copy_schedule(const Schedule& sch) {
  auto n = std::make_shared<ScheduleNode>();
  n->outputs = sch->outputs;
  std::unordered_map<const StageNode*, Stage> remap;
  for (auto& s : sch->stages) {
    auto c = std::make_shared<StageNode>(*s.get());
    c->owner = n.get();
    remap[s.get()] = Stage(c);
    n->stages.push_back(remap[s.get()]);
  }
  for (auto& s : n->stages) {
    if (s->attach_stage.get()) s->attach_stage = remap.at(s->attach_stage.get());
  }
  return Schedule(n);
}

class NestBuilder {
 public:
  NestBuilder(const Schedule& sch, const Bounds& b) : sch_(sch), b_(b) {
    for (auto& s : sch->stages) {
      if (s->attach_type == AttachType::kScope) attached_[s->attach_stage.get()].push_back(s);
    }
  }

  ir::Stmt build() {
    std::vector<Stage> roots;
    for (auto& s : sch_->stages) {
      if (!s->is_placeholder() && s->attach_type == AttachType::kRoot) roots.push_back(s);
    }
    ir::Stmt body = ir::no_op();
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
      body = realize(*it, ir::seq({stage_nest(*it), body}));
    }
    return body;
  }

 private:
  ir::Stmt realize(const Stage& s, ir::Stmt body) {
    return ir::producer_realize(s->op.node(), b_.storage.at(s.get()), s->scope, std::move(body));
  }

  /// Stages attached at loop `iv` of `s`, each realized around `inner` with its nest first.
  ir::Stmt with_attached(const Stage& s, const IterVar& iv, ir::Stmt inner) {
    auto it = attached_.find(s.get());
    if (it == attached_.end()) return inner;
    std::vector<Stage> here;
    for (auto& c : it->second)
      if (c->attach_ivar == iv) here.push_back(c);
    // Producers first: the later stage (a consumer) is realized inside the earlier ones.
    for (auto c = here.rbegin(); c != here.rend(); ++c) {
      inner = realize(*c, ir::seq({stage_nest(*c), inner}));
    }
    return inner;
  }

  /// One loop of the nest around `body`, with its annotations.
  ir::Stmt make_loop(const StageNode& s, const IterVar& iv, const Var& var, ir::Stmt body) {
    const Range& r = b_.ranges.at(iv.get());
    const IterVarAttr& a = s.attr(iv);
    ir::Stmt loop;
    if (a.bind_thread.defined()) {
      const IterVar& t = a.bind_thread;
      if (t->dom.extent.defined()) {
        KILN_USER_CHECK(ir::can_prove(t->dom.extent == r.extent))
            << "bind: thread axis '" << t->thread_tag << "' has extent "
            << ir::to_string(t->dom.extent) << " but loop '" << iv.var().name() << "' of stage '"
            << s.name() << "' has extent " << ir::to_string(r.extent);
      }
      // A binding of extent 1 is index 0 in the body (as bound inference assumes for it); the
      // attribute stays, so that the launch has the axis.
      ir::VarMap vmap{{var.get(), ir::is_one(r.extent) ? r.min : Expr(t.var())}};
      const char* key = t->type == ir::IterVarType::kVirtualThread ? ir::attr::kVirtualThread
                                                                   : ir::attr::kThreadExtent;
      loop = ir::attr_stmt(t.node(), key, r.extent, ir::substitute(body, vmap));
    } else {
      loop = ir::for_loop(var, 0, r.extent, a.for_kind, std::move(body));
    }
    for (auto p = a.pragmas.rbegin(); p != a.pragmas.rend(); ++p) {
      loop = ir::attr_stmt(var.node(), ir::attr::kPragmaPrefix + p->first, p->second, loop);
    }
    return loop;
  }

  /// `body` inside the first `count` leaf loops of `st`, each with the stages attached at it.
  ir::Stmt enclose(const Stage& st, size_t count, ir::Stmt body) {
    const auto& leaves = st->leaf_iter_vars;
    for (size_t i = count; i-- > 0;) {
      body = make_loop(*st.get(), leaves[i], leaves[i].var(), with_attached(st, leaves[i], body));
    }
    return body;
  }

  ir::Stmt guarded(const std::vector<Expr>& guards, ir::Stmt body) {
    Expr cond;
    for (auto& g : guards) cond = cond.defined() ? (cond && g) : g;
    return cond.defined() ? ir::if_then_else(cond, std::move(body)) : body;
  }

  ir::Stmt stage_nest(const Stage& st) {
    const StageNode& s = *st.get();
    const Tensor& t = s.op;
    ValueMap values = pass_up_index(s, b_.ranges, leaf_values(s, b_.ranges));
    ir::VarMap root;
    std::vector<Expr> out_index;
    for (auto& iv : t->axis) {
      root[iv.var().get()] = values.at(iv.get());
      out_index.push_back(values.at(iv.get()));
    }
    for (auto& iv : t->reduce_axis) root[iv.var().get()] = values.at(iv.get());
    std::vector<Expr> guards = split_guards(s, b_.ranges, values);

    auto red = t->body.as<ir::ReduceNode>();
    const auto& leaves = s.leaf_iter_vars;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (s.attr(leaves[i]).tensor_intrin) return tensorized_nest(st, i, values, guards);
    }
    if (!red) {
      ir::Stmt body =
          guarded(guards, ir::producer_store(t.node(), ir::substitute(t->body, root), out_index));
      return enclose(st, leaves.size(), body);
    }

    // Reductions: the update nest under all loops; the init before the first loop that
    // touches a reduction axis, over the data-parallel loops below that point.
    auto is_reduce_leaf = [&](const IterVar& iv) {
      return iv->type == ir::IterVarType::kCommReduce;
    };
    size_t first_reduce = leaves.size();
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (is_reduce_leaf(leaves[i])) {
        first_reduce = i;
        break;
      }
    }
    Expr src = ir::substitute(red->source, root);
    Expr cond = ir::substitute(red->condition, root);
    for (size_t i = first_reduce; i < leaves.size(); ++i) {
      if (is_reduce_leaf(leaves[i]) && s.attr(leaves[i]).bind_thread.defined()) {
        return cross_thread_nest(st, red, src, cond, out_index, guards, first_reduce, i);
      }
    }
    Expr cur = ir::producer_load(t.node(), out_index);
    ir::Stmt update =
        ir::producer_store(t.node(), ir::reduce_combine(red->combiner, cur, src), out_index);
    if (!ir::is_one(cond)) update = ir::if_then_else(cond, update);
    update = guarded(guards, update);
    for (int i = static_cast<int>(leaves.size()) - 1; i >= static_cast<int>(first_reduce); --i) {
      update = make_loop(s, leaves[i], leaves[i].var(), with_attached(st, leaves[i], update));
    }

    // Init: fresh copies of the data-parallel loops inside the first reduction loop.
    std::vector<Expr> init_guards;
    std::unordered_set<const ir::VarNode*> reduce_vars;
    for (size_t i = first_reduce; i < leaves.size(); ++i) {
      if (is_reduce_leaf(leaves[i])) reduce_vars.insert(leaves[i].var().get());
    }
    for (auto& g : guards) {
      if (!ir::uses_var(g, [&](const ir::VarNode* v) { return reduce_vars.count(v) > 0; })) {
        init_guards.push_back(g);
      }
    }
    ir::VarMap fresh;
    std::vector<std::pair<IterVar, Var>> init_loops;
    for (size_t i = first_reduce; i < leaves.size(); ++i) {
      if (is_reduce_leaf(leaves[i])) continue;
      Var v = leaves[i].var().copy_with_name(leaves[i].var().name() + ".init");
      fresh[leaves[i].var().get()] = v;
      init_loops.emplace_back(leaves[i], v);
    }
    std::vector<Expr> init_index;
    for (auto& e : out_index) init_index.push_back(ir::substitute(e, fresh));
    std::vector<Expr> init_g;
    for (auto& g : init_guards) init_g.push_back(ir::substitute(g, fresh));
    ir::Stmt init = guarded(
        init_g,
        ir::producer_store(t.node(), ir::reduce_identity(red->combiner, t->dtype()), init_index));
    for (auto it = init_loops.rbegin(); it != init_loops.rend(); ++it) {
      init = make_loop(s, it->first, it->second, init);
    }

    ir::Stmt body = ir::seq({init, update});
    return enclose(st, first_reduce, body);
  }

  /// A stage whose leaf `pos` is tensorized: the loops outside it as usual, the intrinsic's calls
  /// for the loops from it inward (tensorize.h); with reduction loops outside it, the reset before
  /// the first of them (over fresh copies of the data-parallel loops in between) and the update
  /// inside them.
  ir::Stmt tensorized_nest(const Stage& st, size_t pos, const ValueMap& values,
                           const std::vector<Expr>& guards) {
    const StageNode& s = *st.get();
    const auto& leaves = s.leaf_iter_vars;
    if (auto it = attached_.find(st.get()); it != attached_.end()) {
      for (const Stage& c : it->second) {
        const int at = s.leaf_index(c->attach_ivar);
        KILN_USER_CHECK(at < static_cast<int>(pos))
            << "tensorize: stage '" << s.name() << "', axis '" << leaves[pos].var().name()
            << "': stage '" << c->name() << "' is computed at loop '" << c->attach_ivar.var().name()
            << "', which the intrinsic replaces; compute it outside the tensorized axis";
      }
    }
    TensorizedCalls calls = tensorize_calls(s, pos, b_.ranges, values, guards);
    if (calls.body.defined()) {
      ir::Stmt body = calls.body;
      for (int i = static_cast<int>(pos) - 1; i >= 0; --i) {
        body = make_loop(s, leaves[i], leaves[i].var(), with_attached(st, leaves[i], body));
      }
      return body;
    }
    size_t first_reduce = 0;
    while (leaves[first_reduce]->type != ir::IterVarType::kCommReduce) ++first_reduce;
    ir::Stmt update = calls.update;
    for (int i = static_cast<int>(pos) - 1; i >= static_cast<int>(first_reduce); --i) {
      update = make_loop(s, leaves[i], leaves[i].var(), with_attached(st, leaves[i], update));
    }
    ir::VarMap fresh;
    std::vector<std::pair<IterVar, Var>> init_loops;
    for (size_t i = first_reduce; i < pos; ++i) {
      if (leaves[i]->type == ir::IterVarType::kCommReduce) continue;
      Var v = leaves[i].var().copy_with_name(leaves[i].var().name() + ".init");
      fresh[leaves[i].var().get()] = v;
      init_loops.emplace_back(leaves[i], v);
    }
    ir::Stmt init = ir::substitute(calls.reset, fresh);
    for (auto it = init_loops.rbegin(); it != init_loops.rend(); ++it) {
      init = make_loop(s, it->first, it->second, init);
    }
    ir::Stmt body = ir::seq({init, update});
    return enclose(st, first_reduce, body);
  }

  /// A reduction whose leaf `bound` is bound to a thread index: each thread folds its share of
  /// the row (the other reduction loops, serial) into a local accumulator, the block's threads
  /// combine their accumulators in a shared buffer as a tree, and one thread writes the result
  /// (every thread, for a thread-local output). The tree runs on every thread whatever the
  /// guards say, so that the barriers thread_sync puts between its steps are uniform.
  ir::Stmt cross_thread_nest(const Stage& st, const ir::ReduceNode* red, const Expr& src,
                             const Expr& cond, const std::vector<Expr>& out_index,
                             const std::vector<Expr>& guards, size_t first_reduce, size_t bound) {
    const StageNode& s = *st.get();
    const Tensor& t = s.op;
    const auto& leaves = s.leaf_iter_vars;
    const IterVar& thread = s.attr(leaves[bound]).bind_thread;
    const std::string where = "'" + leaves[bound].var().name() + "' of stage '" + s.name() + "'";
    KILN_USER_CHECK(thread->type != ir::IterVarType::kVirtualThread &&
                    thread->thread_tag.rfind("threadIdx.", 0) == 0)
        << "bind: reduction axis " << where << " is bound to '" << thread->thread_tag
        << "'; a reduction can only be spread over the threads of a block (threadIdx.x/y/z)";
    for (size_t i = first_reduce; i < leaves.size(); ++i) {
      KILN_USER_CHECK(leaves[i]->type == ir::IterVarType::kCommReduce)
          << "cross-thread reduction of stage '" << s.name() << "': data-parallel loop '"
          << leaves[i].var().name() << "' is inside its reduction loops; reorder it outside";
      KILN_USER_CHECK(i == bound || !s.attr(leaves[i]).bind_thread.defined())
          << "cross-thread reduction of stage '" << s.name() << "': reduction axes '"
          << leaves[bound].var().name() << "' and '" << leaves[i].var().name()
          << "' are both bound to threads; fuse them and bind one";
    }
    const Range& r = b_.ranges.at(leaves[bound].get());
    const std::optional<int64_t> n = ir::as_const_int(r.extent);
    KILN_USER_CHECK(n && *n >= 1) << "cross-thread reduction: " << where
                                  << " has non-constant extent " << ir::to_string(r.extent);
    const Expr tid = thread.var();
    KILN_USER_CHECK(!thread->dom.extent.defined() || ir::can_prove(thread->dom.extent == r.extent))
        << "bind: thread axis '" << thread->thread_tag << "' has extent "
        << ir::to_string(thread->dom.extent) << " but loop " << where << " has extent "
        << ir::to_string(r.extent);

    // The shared buffer has a row of `n` partials for each thread of the block's other thread
    // axes (rows of the output spread over threadIdx.y, say).
    Expr row = ir::make_zero(ir::kInt32);
    int64_t rows = 1;
    for (size_t i = 0; i < first_reduce; ++i) {
      const IterVar& other = s.attr(leaves[i]).bind_thread;
      if (!other.defined() || other->thread_tag.rfind("threadIdx.", 0) != 0) continue;
      const std::optional<int64_t> e = ir::as_const_int(b_.ranges.at(leaves[i].get()).extent);
      KILN_USER_CHECK(e) << "cross-thread reduction of stage '" << s.name() << "': thread loop '"
                         << leaves[i].var().name() << "' has a non-constant extent";
      row = row * ir::make_const(ir::kInt32, *e) +
            (*e == 1 ? ir::make_zero(ir::kInt32) : Expr(other.var()));
      rows *= *e;
    }
    const ir::DataType dtype = t->dtype();
    const Expr base = ir::simplify(row * ir::make_const(ir::kInt32, *n));
    Var acc(s.name() + ".red_local", ir::DataType::Handle());
    Var part(s.name() + ".red_shared", ir::DataType::Handle());
    const Expr zero = ir::make_zero(ir::kInt32);
    auto acc_value = [&] { return ir::load(dtype, acc, zero); };
    auto part_at = [&](Expr offset) { return ir::load(dtype, part, ir::simplify(base + offset)); };

    // This thread's share: the serial reduction loops with the bound one taken as `tid`.
    ir::Stmt update = ir::store(acc, ir::reduce_combine(red->combiner, acc_value(), src), zero);
    if (!ir::is_one(cond)) update = ir::if_then_else(cond, update);
    update = guarded(guards, update);
    ir::VarMap to_thread{{leaves[bound].var().get(), *n == 1 ? r.min : tid}};
    for (int i = static_cast<int>(leaves.size()) - 1; i >= static_cast<int>(first_reduce); --i) {
      if (static_cast<size_t>(i) == bound) continue;
      update = make_loop(s, leaves[i], leaves[i].var(), with_attached(st, leaves[i], update));
    }
    update = ir::substitute(update, to_thread);

    // The tree: fold the upper part onto the lower one, halving, until element 0 holds it all.
    std::vector<ir::Stmt> steps{ir::store(acc, ir::reduce_identity(red->combiner, dtype), zero),
                                update, ir::store(part, acc_value(), ir::simplify(base + tid))};
    for (int64_t width = *n; width > 1;) {
      int64_t half = 1;
      while (half * 2 < width) half *= 2;
      const Expr off = ir::make_const(ir::kInt32, half);
      steps.push_back(ir::if_then_else(
          tid < ir::make_const(ir::kInt32, width - half),
          ir::store(part, ir::reduce_combine(red->combiner, part_at(tid), part_at(tid + off)),
                    ir::simplify(base + tid))));
      width = half;
    }
    std::vector<Expr> out_guards;
    for (const Expr& g : guards) {
      bool reduce_var = false;
      for (size_t i = first_reduce; i < leaves.size(); ++i)
        reduce_var |= ir::uses_var(g, leaves[i].var());
      if (!reduce_var) out_guards.push_back(g);
    }
    if (s.scope != "local") out_guards.push_back(tid == zero);
    steps.push_back(guarded(out_guards, ir::producer_store(t.node(), part_at(zero), out_index)));
    ir::Stmt body = ir::allocate(part, dtype, {ir::make_const(ir::kInt32, rows * *n)}, "shared",
                                 ir::allocate(acc, dtype, {ir::make_const(ir::kInt32, int64_t{1})},
                                              "local", ir::seq(steps)));
    body = ir::attr_stmt(thread.node(), ir::attr::kThreadExtent, r.extent, body);
    return enclose(st, first_reduce, body);
  }

  const Schedule& sch_;
  const Bounds& b_;
  std::unordered_map<const StageNode*, std::vector<Stage>> attached_;
};

/// The most IR nodes inlining may add to one stage's expression. The fuser keeps its groups far
/// below (graph/fuse.h); this refuses, with a reason, what it could not foresee (producers read at
/// many places each) rather than building an expression that grows exponentially with the chain.
constexpr int64_t kMaxInlinedNodes = int64_t{1} << 16;

/// Whether `e` uses only the variables in `allowed`.
bool uses_only(const Expr& e, const std::unordered_set<const ir::VarNode*>& allowed) {
  bool ok = true;
  ir::post_order_visit(e, [&](const ir::Object* n) {
    if (auto v = dynamic_cast<const ir::VarNode*>(n); v != nullptr && !allowed.count(v)) ok = false;
  });
  return ok;
}

/// `t`'s body with each read of an inlined stage that it makes more than once at the same indices
/// bound to a let around the body, so that inlining copies the stage's expression once:
/// LeakyRelu's select(x > 0, x, a * x) reads x three times, and a chain of n of them would
/// otherwise grow as 3^n. Reads whose indices use more than the axes (a reduction's, a let's) or
/// read a tensor themselves are left as they are.
Expr share_repeated_reads(const Tensor& t, const std::function<bool(const TensorNode*)>& inlined) {
  bool reduces = false;
  std::vector<const ir::ProducerLoadNode*> reads;
  ir::post_order_visit(t->body, [&](const ir::Object* n) {
    if (dynamic_cast<const ir::ReduceNode*>(n) != nullptr) reduces = true;
    auto load = dynamic_cast<const ir::ProducerLoadNode*>(n);
    if (load != nullptr && inlined(static_cast<const TensorNode*>(load->producer.get()))) {
      reads.push_back(load);
    }
  });
  if (reduces || reads.size() < 2) return t->body;
  std::unordered_set<const ir::VarNode*> axes;
  for (const IterVar& iv : t->axis) axes.insert(iv.var().get());
  auto same = [](const ir::ProducerLoadNode* a, const ir::ProducerLoadNode* b) {
    if (a->producer != b->producer || a->indices.size() != b->indices.size()) return false;
    for (size_t k = 0; k < a->indices.size(); ++k) {
      if (!ir::expr_deep_equal(a->indices[k], b->indices[k])) return false;
    }
    return true;
  };
  std::vector<const ir::ProducerLoadNode*> shared;
  for (size_t i = 0; i < reads.size(); ++i) {
    const ir::ProducerLoadNode* r = reads[i];
    bool plain = true;
    for (const Expr& idx : r->indices) {
      plain = plain && uses_only(idx, axes);
      ir::post_order_visit(idx, [&](const ir::Object* n) {
        if (dynamic_cast<const ir::ProducerLoadNode*>(n) != nullptr) plain = false;
      });
    }
    if (!plain || std::any_of(shared.begin(), shared.end(), [&](auto* s) { return same(s, r); })) {
      continue;
    }
    if (std::any_of(reads.begin() + static_cast<std::ptrdiff_t>(i) + 1, reads.end(),
                    [&](auto* o) { return same(o, r); })) {
      shared.push_back(r);
    }
  }
  if (shared.empty()) return t->body;
  std::vector<Var> vars;
  for (const ir::ProducerLoadNode* r : shared) {
    vars.emplace_back(r->producer->name() + "_v" + std::to_string(vars.size()), r->dtype);
  }
  Expr body = rewrite_reads(t->body, [&](const TensorNode* p, const std::vector<Expr>& idx) {
    for (size_t k = 0; k < shared.size(); ++k) {
      if (shared[k]->producer.get() != p) continue;
      bool eq = true;
      for (size_t d = 0; d < idx.size() && eq; ++d) {
        eq = ir::expr_deep_equal(idx[d], shared[k]->indices[d]);
      }
      if (eq) return Expr(vars[k]);
    }
    return Expr();
  });
  for (size_t k = shared.size(); k-- > 0;) {
    body = ir::let(vars[k],
                   Expr(std::make_shared<ir::ProducerLoadNode>(
                       shared[k]->dtype, shared[k]->producer, shared[k]->indices)),
                   body);
  }
  return body;
}

}  // namespace

Schedule normalize(const Schedule& sch) {
  Schedule n = copy_schedule(sch);
  std::unordered_map<const TensorNode*, Tensor> replaced;  // rewritten stages: old -> new
  std::unordered_map<const TensorNode*, Tensor> inlined;   // inlined stages, bodies final
  auto rewrite = [&](const TensorNode* t, const std::vector<Expr>& idx) -> Expr {
    auto r = replaced.find(t);
    if (r != replaced.end()) t = r->second.get();
    auto in = inlined.find(t);
    if (in != inlined.end()) {
      ir::VarMap vmap;
      for (size_t i = 0; i < in->second->axis.size(); ++i)
        vmap[in->second->axis[i].var().get()] = idx[i];
      return ir::substitute(in->second->body, vmap);
    }
    return r != replaced.end() ? r->second(idx) : Expr();
  };
  auto is_inlined = [&](const TensorNode* t) {
    auto r = replaced.find(t);
    return inlined.count(r != replaced.end() ? r->second.get() : t) != 0;
  };
  std::unordered_map<const TensorNode*, int64_t> inlined_nodes;  // IR nodes of inlined bodies
  for (auto& s : n->stages) {
    if (s->is_placeholder()) continue;
    const Tensor& t = s->op;
    Expr shared = share_repeated_reads(t, is_inlined);
    // The body's size once inlined, counted before it is built.
    int64_t own = 0, added = 0;
    ir::post_order_visit(shared, [&](const ir::Object* o) {
      ++own;
      auto load = dynamic_cast<const ir::ProducerLoadNode*>(o);
      if (load == nullptr) return;
      const TensorNode* p = static_cast<const TensorNode*>(load->producer.get());
      if (auto r = replaced.find(p); r != replaced.end()) p = r->second.get();
      if (auto it = inlined_nodes.find(p); it != inlined_nodes.end()) added += it->second;
    });
    KILN_USER_CHECK(added <= kMaxInlinedNodes)
        << "stage '" << t->name() << "': inlining the stages it reads would add " << added
        << " operations to its expression, more than " << kMaxInlinedNodes
        << " (they are read at many places each); build them as kernels of their own (kiln "
           "compile --no-fuse)";
    const int64_t nodes = own + added;
    Expr body = rewrite_reads(shared, rewrite);
    if (!body.same_as(t->body)) {
      Tensor nt = make_compute(t->name(), t->axis, t->reduce_axis, body);
      replaced[t.get()] = nt;
      s->op = nt;
    }
    if (s->attach_type == AttachType::kInline) {
      inlined[s->op.get()] = s->op;
      inlined_nodes[s->op.get()] = nodes;
    }
  }
  for (auto& o : n->outputs) {
    auto it = replaced.find(o.get());
    if (it != replaced.end()) o = it->second;
  }
  return n;
}

ir::Stmt schedule_ops(const Schedule& sch, const Bounds& bounds) {
  return NestBuilder(sch, bounds).build();
}

}  // namespace kiln::te
