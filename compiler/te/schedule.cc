// Schedule primitives: each checks its arguments (naming the stage and axis on a mistake) and
// records a relation or an attribute; nothing is lowered here.
#include "compiler/te/schedule.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/substitute.h"

namespace kiln::te {
namespace {

std::string loop_names(const StageNode& s) {
  std::ostringstream os;
  for (size_t i = 0; i < s.leaf_iter_vars.size(); ++i) {
    os << (i ? ", " : "") << s.leaf_iter_vars[i].var().name();
  }
  return os.str();
}

/// kiln::Error unless `iv` is one of the stage's loops now.
void check_leaf(const StageNode& s, const IterVar& iv, const char* primitive) {
  KILN_USER_CHECK(iv.defined()) << primitive << ": axis is undefined (stage '" << s.name() << "')";
  if (s.leaf_index(iv) >= 0) return;
  bool known =
      std::find(s.all_iter_vars.begin(), s.all_iter_vars.end(), iv) != s.all_iter_vars.end();
  if (known) {
    KILN_USER_ERROR() << primitive << ": axis '" << iv.var().name() << "' of stage '" << s.name()
                      << "' was already split or fused; its loops now are: " << loop_names(s);
  }
  KILN_USER_ERROR() << primitive << ": axis '" << iv.var().name() << "' is not a loop of stage '"
                    << s.name() << "' (its loops are: " << loop_names(s) << ")";
}

void check_schedulable(const StageNode& s, const char* primitive) {
  KILN_USER_CHECK(!s.is_placeholder())
      << primitive << ": '" << s.name()
      << "' is a placeholder (an input); it has no loops to schedule";
}

void check_factor(const Expr& f, const StageNode& s, const IterVar& iv, const char* primitive,
                  const char* what) {
  KILN_USER_CHECK(f.defined() && f.dtype().is_int() && f.dtype().is_scalar())
      << primitive << ": " << what << " for axis '" << iv.var().name() << "' of stage '" << s.name()
      << "' must be an integer";
  if (auto v = ir::as_const_int(f)) {
    KILN_USER_CHECK(*v > 0) << primitive << ": " << what << " for axis '" << iv.var().name()
                            << "' of stage '" << s.name() << "' must be positive, got " << *v;
  }
}

IterVar derived(const IterVar& parent, const std::string& suffix) {
  return IterVar(Var(parent.var().name() + suffix, parent.var().dtype()), Range(), parent->type);
}

/// Rebuilds a compute body with fresh axis variables (and reduce axes).
Expr rename_axes(const Expr& body, const std::vector<IterVar>& from, const std::vector<IterVar>& to,
                 const std::vector<IterVar>& rfrom, const std::vector<IterVar>& rto) {
  ir::VarMap vmap;
  for (size_t i = 0; i < from.size(); ++i) vmap[from[i].var().get()] = to[i].var();
  for (size_t i = 0; i < rfrom.size(); ++i) vmap[rfrom[i].var().get()] = rto[i].var();
  if (auto r = body.as<ir::ReduceNode>()) {
    return Expr(std::make_shared<ir::ReduceNode>(r->dtype, r->combiner,
                                                 ir::substitute(r->source, vmap), rto,
                                                 ir::substitute(r->condition, vmap)));
  }
  return ir::substitute(body, vmap);
}

std::vector<IterVar> fresh_axes(const std::vector<IterVar>& axes) {
  std::vector<IterVar> out;
  for (auto& iv : axes) out.emplace_back(Var(iv.var().name(), iv.var().dtype()), iv->dom, iv->type);
  return out;
}

/// The tensor with its body's reads replaced, or the same tensor when nothing changed.
Tensor replace_reads(const Tensor& t, const std::unordered_map<const TensorNode*, Tensor>& vmap) {
  if (!t->is_compute()) return t;
  Expr body = rewrite_reads(t->body, [&](const TensorNode* n, const std::vector<Expr>& idx) {
    auto it = vmap.find(n);
    return it == vmap.end() ? Expr() : it->second(idx);
  });
  if (body.same_as(t->body)) return t;
  return make_compute(t->name(), t->axis, t->reduce_axis, body);
}

}  // namespace

// ---- StageNode ----

int StageNode::leaf_index(const IterVar& iv) const {
  for (size_t i = 0; i < leaf_iter_vars.size(); ++i) {
    if (leaf_iter_vars[i] == iv) return static_cast<int>(i);
  }
  return -1;
}

const IterVarAttr& StageNode::attr(const IterVar& iv) const {
  static const IterVarAttr kDefault;
  auto it = iter_var_attrs.find(iv.get());
  return it == iter_var_attrs.end() ? kDefault : it->second;
}

// ---- Stage ----

const Tensor& Stage::op() const { return node_->op; }

IterVar Stage::axis(size_t i) const {
  KILN_USER_CHECK(i < node_->op->axis.size())
      << "stage '" << node_->name() << "' has " << node_->op->axis.size()
      << " axes, asked for axis " << i;
  return node_->op->axis[i];
}

IterVar Stage::reduce_axis(size_t i) const {
  KILN_USER_CHECK(i < node_->op->reduce_axis.size())
      << "stage '" << node_->name() << "' has " << node_->op->reduce_axis.size()
      << " reduce axes, asked for reduce axis " << i;
  return node_->op->reduce_axis[i];
}

Stage::SplitResult Stage::split(const IterVar& parent, Expr factor) {
  check_factor(factor, *node_, parent, "split", "factor");
  return split_impl(parent, factor, Expr());
}

Stage::SplitResult Stage::split_nparts(const IterVar& parent, Expr nparts) {
  check_factor(nparts, *node_, parent, "split", "nparts");
  return split_impl(parent, Expr(), nparts);
}

Stage::SplitResult Stage::split_impl(const IterVar& parent, Expr factor, Expr nparts) {
  StageNode& s = *node_;
  check_schedulable(s, "split");
  check_leaf(s, parent, "split");
  IterVar outer = derived(parent, ".outer"), inner = derived(parent, ".inner");
  int pos = s.leaf_index(parent);
  s.leaf_iter_vars[pos] = outer;
  s.leaf_iter_vars.insert(s.leaf_iter_vars.begin() + pos + 1, inner);
  s.all_iter_vars.push_back(outer);
  s.all_iter_vars.push_back(inner);
  s.relations.push_back(SplitRelation{parent, outer, inner, factor, nparts});
  return {outer, inner};
}

std::tuple<IterVar, IterVar, IterVar, IterVar> Stage::tile(const IterVar& x, const IterVar& y,
                                                           Expr x_factor, Expr y_factor) {
  auto [xo, xi] = split(x, x_factor);
  auto [yo, yi] = split(y, y_factor);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

std::tuple<IterVar, IterVar, IterVar, IterVar, IterVar, IterVar> Stage::tile(
    const IterVar& y, const IterVar& x, const IterVar& k, Expr y_factor, Expr x_factor,
    Expr k_factor) {
  auto [yo, yi] = split(y, y_factor);
  auto [xo, xi] = split(x, x_factor);
  auto [ko, ki] = split(k, k_factor);
  reorder({yo, xo, ko, yi, xi, ki});
  return {yo, xo, ko, yi, xi, ki};
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
  StageNode& s = *node_;
  check_schedulable(s, "fuse");
  check_leaf(s, outer, "fuse");
  check_leaf(s, inner, "fuse");
  int po = s.leaf_index(outer), pi = s.leaf_index(inner);
  KILN_USER_CHECK(pi == po + 1) << "fuse: in stage '" << s.name() << "', '" << outer.var().name()
                                << "' must directly enclose '" << inner.var().name()
                                << "' (its loops are: " << loop_names(s) << ")";
  KILN_USER_CHECK(outer->type == inner->type)
      << "fuse: in stage '" << s.name()
      << "', cannot fuse a reduction axis with a data-parallel one ('" << outer.var().name()
      << "', '" << inner.var().name() << "')";
  IterVar fused(Var(outer.var().name() + "." + inner.var().name() + ".fused"), Range(),
                outer->type);
  s.leaf_iter_vars[po] = fused;
  s.leaf_iter_vars.erase(s.leaf_iter_vars.begin() + pi);
  s.all_iter_vars.push_back(fused);
  s.relations.push_back(FuseRelation{outer, inner, fused});
  return fused;
}

IterVar Stage::fuse(const std::vector<IterVar>& axes) {
  KILN_USER_CHECK(!axes.empty()) << "fuse: no axes given for stage '" << node_->name() << "'";
  IterVar acc = axes[0];
  for (size_t i = 1; i < axes.size(); ++i) acc = fuse(acc, axes[i]);
  return acc;
}

void Stage::reorder(const std::vector<IterVar>& order) {
  StageNode& s = *node_;
  check_schedulable(s, "reorder");
  std::vector<int> pos;
  std::unordered_set<const ir::IterVarNode*> seen;
  for (auto& iv : order) {
    check_leaf(s, iv, "reorder");
    KILN_USER_CHECK(seen.insert(iv.get()).second)
        << "reorder: axis '" << iv.var().name() << "' appears twice (stage '" << s.name() << "')";
    pos.push_back(s.leaf_index(iv));
  }
  std::sort(pos.begin(), pos.end());
  for (size_t i = 0; i < order.size(); ++i) s.leaf_iter_vars[pos[i]] = order[i];
}

void Stage::vectorize(const IterVar& axis) {
  check_schedulable(*node_, "vectorize");
  check_leaf(*node_, axis, "vectorize");
  node_->iter_var_attrs[axis.get()].for_kind = ir::ForKind::kVectorized;
}

void Stage::unroll(const IterVar& axis) {
  check_schedulable(*node_, "unroll");
  check_leaf(*node_, axis, "unroll");
  node_->iter_var_attrs[axis.get()].for_kind = ir::ForKind::kUnrolled;
}

void Stage::parallel(const IterVar& axis) {
  check_schedulable(*node_, "parallel");
  check_leaf(*node_, axis, "parallel");
  KILN_USER_CHECK(axis->type != ir::IterVarType::kCommReduce)
      << "parallel: '" << axis.var().name() << "' of stage '" << node_->name()
      << "' is a reduction axis; its iterations depend on each other";
  node_->iter_var_attrs[axis.get()].for_kind = ir::ForKind::kParallel;
}

void Stage::bind(const IterVar& axis, const IterVar& thread_axis) {
  check_schedulable(*node_, "bind");
  check_leaf(*node_, axis, "bind");
  KILN_USER_CHECK(thread_axis.defined() && !thread_axis->thread_tag.empty())
      << "bind: '" << axis.var().name() << "' of stage '" << node_->name()
      << "' must be bound to a thread_axis (\"blockIdx.x\", \"threadIdx.x\", \"vthread\", ...)";
  node_->iter_var_attrs[axis.get()].bind_thread = thread_axis;
}

void Stage::pragma(const IterVar& axis, const std::string& key, Expr value) {
  check_schedulable(*node_, "pragma");
  check_leaf(*node_, axis, "pragma");
  KILN_USER_CHECK(!key.empty()) << "pragma: empty key on '" << axis.var().name() << "'";
  node_->iter_var_attrs[axis.get()].pragmas.emplace_back(key, value);
}

void Stage::tensorize(const IterVar& axis, const TensorIntrin& intrin) {
  check_schedulable(*node_, "tensorize");
  check_leaf(*node_, axis, "tensorize");
  KILN_USER_CHECK(intrin != nullptr) << "tensorize: the intrinsic for '" << axis.var().name()
                                     << "' of stage '" << node_->name() << "' is undefined";
  for (const IterVar& iv : node_->leaf_iter_vars) {
    const IterVarAttr& a = node_->attr(iv);
    KILN_USER_CHECK(iv == axis || a.tensor_intrin == nullptr)
        << "tensorize: stage '" << node_->name() << "' is already tensorized at '"
        << iv.var().name() << "' (with '" << a.tensor_intrin->name << "')";
  }
  node_->iter_var_attrs[axis.get()].tensor_intrin = intrin;
}

void Stage::compute_at(const Stage& parent, const IterVar& axis) {
  StageNode& s = *node_;
  check_schedulable(s, "compute_at");
  KILN_USER_CHECK(parent.get() != nullptr) << "compute_at: parent stage is undefined";
  KILN_USER_CHECK(parent.get() != node_.get())
      << "compute_at: stage '" << s.name() << "' cannot be computed inside its own loops";
  KILN_USER_CHECK(!s.is_output)
      << "compute_at: '" << s.name()
      << "' is an output of the schedule; outputs are computed at the root";
  if (parent->leaf_index(axis) < 0) {
    KILN_USER_ERROR() << "compute_at: '" << (axis.defined() ? axis.var().name() : "?")
                      << "' is not a loop of stage '" << parent->name()
                      << "', so it does not enclose the computation of '" << parent->name()
                      << "' (its loops are: " << loop_names(*parent.get()) << ")";
  }
  // Every reader of this stage (once inlined stages are substituted into their readers: an
  // epilogue stage reading a register tile through the inlined copy of cache_write) must be the
  // parent or a stage the parent reads in turn (a local copy of a shared tile, computed inside the
  // same loop later on; bound inference checks that it is).
  std::vector<Stage> readers, todo = s.owner->consumers_of(Stage(node_));
  while (!todo.empty()) {
    Stage r = todo.back();
    todo.pop_back();
    if (r->attach_type != AttachType::kInline) {
      if (std::find(readers.begin(), readers.end(), r) == readers.end()) readers.push_back(r);
      continue;
    }
    for (const Stage& rr : s.owner->consumers_of(r)) todo.push_back(rr);
  }
  KILN_USER_CHECK(s.owner->reads_transitively(parent, Stage(node_)))
      << "compute_at: stage '" << parent->name() << "' does not read '" << s.name()
      << "'; a stage can only be computed inside a loop of a stage that reads it";
  for (auto& r : readers) {
    KILN_USER_CHECK(r == parent || s.owner->reads_transitively(parent, r))
        << "compute_at: '" << s.name() << "' is also read by '" << r->name()
        << "', which is outside the loops of '" << parent->name() << "'";
  }
  // No cycles: the parent must not be (transitively) attached inside this stage.
  for (Stage p = parent; p.get() && p->attach_type == AttachType::kScope; p = p->attach_stage) {
    KILN_USER_CHECK(p->attach_stage.get() != node_.get())
        << "compute_at: '" << parent->name() << "' is itself computed inside '" << s.name() << "'";
  }
  s.attach_type = AttachType::kScope;
  s.attach_stage = parent;
  s.attach_ivar = axis;
}

void Stage::compute_inline() {
  StageNode& s = *node_;
  check_schedulable(s, "compute_inline");
  KILN_USER_CHECK(!s.is_output) << "compute_inline: '" << s.name()
                                << "' is an output of the schedule and must be stored";
  KILN_USER_CHECK(s.op->reduce_axis.empty())
      << "compute_inline: '" << s.name()
      << "' is a reduction; only elementwise stages can be inlined";
  s.attach_type = AttachType::kInline;
  s.attach_stage = Stage();
  s.attach_ivar = IterVar();
}

void Stage::compute_root() {
  check_schedulable(*node_, "compute_root");
  node_->attach_type = AttachType::kRoot;
  node_->attach_stage = Stage();
  node_->attach_ivar = IterVar();
}

void Stage::set_scope(const std::string& scope) {
  static const char* kKnown[] = {"global", "shared", "local", "warp"};
  bool known = std::any_of(std::begin(kKnown), std::end(kKnown),
                           [&](const char* k) { return scope == k; }) ||
               scope.rfind("local.", 0) == 0 || scope.rfind("shared.", 0) == 0;
  KILN_USER_CHECK(known) << "set_scope: unknown memory scope '" << scope << "' for stage '"
                         << node_->name() << "' (known: global, shared, local, warp, local.<name>)";
  node_->scope = scope;
}

// ---- ScheduleNode ----

Stage ScheduleNode::stage_of(const Tensor& t) const {
  KILN_USER_CHECK(t.defined()) << "schedule: the tensor is undefined";
  for (auto& s : stages) {
    if (s->op == t || s->origin_op == t) return s;
  }
  KILN_USER_ERROR() << "schedule: tensor '" << t->name()
                    << "' is not part of this schedule (it is not read by any of its outputs)";
}

bool ScheduleNode::has_stage(const Tensor& t) const {
  return std::any_of(stages.begin(), stages.end(),
                     [&](const Stage& s) { return s->op == t || s->origin_op == t; });
}

bool ScheduleNode::reads_transitively(const Stage& reader, const Stage& producer) const {
  std::vector<Tensor> todo = reader->op->inputs();
  std::unordered_set<const TensorNode*> seen;
  while (!todo.empty()) {
    Tensor t = todo.back();
    todo.pop_back();
    if (t == producer->op) return true;
    if (!seen.insert(t.get()).second || !has_stage(t)) continue;
    for (auto& in : stage_of(t)->op->inputs()) todo.push_back(in);
  }
  return false;
}

std::vector<Stage> ScheduleNode::consumers_of(const Stage& st) const {
  std::vector<Stage> out;
  for (auto& s : stages) {
    for (auto& in : s->op->inputs()) {
      if (in == st->op) {
        out.push_back(s);
        break;
      }
    }
  }
  return out;
}

void ScheduleNode::replace_dataflow(std::unordered_map<const TensorNode*, Tensor>* vmap,
                                    size_t start) {
  for (size_t i = start; i < stages.size(); ++i) {
    Stage& s = stages[i];
    Tensor n = replace_reads(s->op, *vmap);
    if (n != s->op) {
      (*vmap)[s->op.get()] = n;
      s->op = n;
    }
  }
  for (auto& o : outputs) {
    auto it = vmap->find(o.get());
    if (it != vmap->end()) o = it->second;
  }
}

// ---- Schedule ----

Tensor Schedule::cache_read(const Tensor& t, const std::string& scope,
                            const std::vector<Tensor>& readers) {
  Stage src = node_->stage_of(t);
  KILN_USER_CHECK(!readers.empty()) << "cache_read: no readers given for '" << t->name() << "'";
  const Tensor cur = src->op;
  std::vector<IterVar> axis;
  std::vector<Expr> idx;
  for (size_t i = 0; i < cur->shape().size(); ++i) {
    IterVar iv(Var(i < 6 ? std::string(1, "ijpqrs"[i]) : "ax" + std::to_string(i)),
               Range(0, cur->shape()[i]), ir::IterVarType::kDataPar);
    axis.push_back(iv);
    idx.push_back(iv.var());
  }
  Tensor cache = make_compute(cur->name() + "." + scope, axis, {}, cur(idx));
  auto cache_stage = std::make_shared<StageNode>();
  cache_stage->op = cache;
  cache_stage->origin_op = cache;
  cache_stage->all_iter_vars = axis;
  cache_stage->leaf_iter_vars = axis;
  cache_stage->owner = node_.get();
  Stage cs(cache_stage);
  cs.set_scope(scope);

  auto pos = std::find(node_->stages.begin(), node_->stages.end(), src) - node_->stages.begin();
  node_->stages.insert(node_->stages.begin() + pos + 1, cs);

  std::unordered_map<const TensorNode*, Tensor> to_cache{{cur.get(), cache}};
  std::unordered_map<const TensorNode*, Tensor> changed;
  for (auto& r : readers) {
    Stage rs = node_->stage_of(r);
    bool reads = false;
    for (auto& in : rs->op->inputs()) reads |= in == cur;
    KILN_USER_CHECK(reads) << "cache_read: '" << rs->name() << "' does not read '" << cur->name()
                           << "'";
    Tensor n = replace_reads(rs->op, to_cache);
    changed[rs->op.get()] = n;
    rs->op = n;
  }
  node_->replace_dataflow(&changed);
  return cache;
}

Tensor Schedule::cache_write(const Tensor& t, const std::string& scope) {
  Stage st = node_->stage_of(t);
  StageNode& s = *st.get();
  check_schedulable(s, "cache_write");
  KILN_USER_CHECK(s.relations.empty() && s.iter_var_attrs.empty())
      << "cache_write: stage '" << s.name()
      << "' was already scheduled; call cache_write before split, fuse and other primitives";
  const Tensor cur = s.op;
  // The cache stage computes what t computed, with fresh axes.
  std::vector<IterVar> caxis = fresh_axes(cur->axis), craxis = fresh_axes(cur->reduce_axis);
  Tensor cache = make_compute(cur->name() + "." + scope, caxis, craxis,
                              rename_axes(cur->body, cur->axis, caxis, cur->reduce_axis, craxis));
  // t becomes a copy of the cache.
  std::vector<IterVar> taxis = fresh_axes(cur->axis);
  std::vector<Expr> idx;
  for (auto& iv : taxis) idx.push_back(iv.var());
  Tensor copy = make_compute(cur->name(), taxis, {}, cache(idx));

  auto cache_stage = std::make_shared<StageNode>();
  cache_stage->op = cache;
  cache_stage->origin_op = cache;
  cache_stage->all_iter_vars = caxis;
  cache_stage->all_iter_vars.insert(cache_stage->all_iter_vars.end(), craxis.begin(), craxis.end());
  cache_stage->leaf_iter_vars = cache_stage->all_iter_vars;
  cache_stage->owner = node_.get();
  Stage cs(cache_stage);
  cs.set_scope(scope);

  s.op = copy;
  s.all_iter_vars = taxis;
  s.leaf_iter_vars = taxis;
  auto pos = std::find(node_->stages.begin(), node_->stages.end(), st) - node_->stages.begin();
  node_->stages.insert(node_->stages.begin() + pos, cs);

  std::unordered_map<const TensorNode*, Tensor> vmap{{cur.get(), copy}};
  node_->replace_dataflow(&vmap, pos + 2);
  return cache;
}

Schedule create_schedule(const std::vector<Tensor>& outputs) {
  auto sch = std::make_shared<ScheduleNode>();
  KILN_USER_CHECK(!outputs.empty()) << "create_schedule: no output tensors given";
  std::unordered_set<const TensorNode*> visited;
  std::function<void(const Tensor&)> visit = [&](const Tensor& t) {
    if (!visited.insert(t.get()).second) return;
    for (auto& in : t->inputs()) visit(in);
    auto n = std::make_shared<StageNode>();
    n->op = t;
    n->origin_op = t;
    n->all_iter_vars = t->axis;
    n->all_iter_vars.insert(n->all_iter_vars.end(), t->reduce_axis.begin(), t->reduce_axis.end());
    n->leaf_iter_vars = n->all_iter_vars;
    n->owner = sch.get();
    sch->stages.emplace_back(n);
  };
  for (auto& o : outputs) {
    KILN_USER_CHECK(o.defined()) << "create_schedule: an output tensor is undefined";
    KILN_USER_CHECK(o->is_compute()) << "create_schedule: output '" << o->name()
                                     << "' is a placeholder; outputs must be computed";
    visit(o);
  }
  for (auto& s : sch->stages) {
    s->is_output =
        std::any_of(outputs.begin(), outputs.end(), [&](const Tensor& o) { return o == s->op; });
  }
  sch->outputs = outputs;
  return Schedule(sch);
}

IterVar thread_axis(const std::string& tag, Expr extent) {
  static const char* kTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                "threadIdx.y", "threadIdx.z", "vthread",    "cthread"};
  bool known =
      std::any_of(std::begin(kTags), std::end(kTags), [&](const char* t) { return tag == t; });
  KILN_USER_CHECK(known) << "thread_axis: unknown thread tag '" << tag
                         << "' (known: blockIdx.x/y/z, threadIdx.x/y/z, vthread, cthread)";
  auto type = (tag == "vthread" || tag == "cthread") ? ir::IterVarType::kVirtualThread
                                                     : ir::IterVarType::kThreadIndex;
  Range dom = extent.defined() ? Range(0, extent) : Range();
  return IterVar(Var(tag), dom, type, tag);
}

}  // namespace kiln::te
