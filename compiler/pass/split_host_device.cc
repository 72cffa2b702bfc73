// Outlining kernels: host-level statements walked, each thread_extent region made a PrimFunc.
#include "compiler/pass/split_host_device.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/pass/verify_gpu.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// One variable per thread tag; nested re-bindings of a tag dropped.
class ThreadAxisUnifier : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    if (op->key != attr::kThreadExtent) return IRMutator::mutate_(op, self);
    auto iv = std::dynamic_pointer_cast<const IterVarNode>(op->node);
    KILN_ICHECK(iv != nullptr) << "thread_extent attribute on something else than a thread axis";
    auto [it, first] = canonical_.emplace(iv->thread_tag, iv);
    if (!first && it->second->var.get() != iv->var.get()) rename_[iv->var.get()] = it->second->var;
    if (open_.count(iv->thread_tag)) return mutate(op->body);
    open_.insert(iv->thread_tag);
    Stmt body = mutate(op->body);
    open_.erase(iv->thread_tag);
    return attr_stmt(it->second, op->key, op->value, body);
  }
  Expr mutate_(const VarNode* op, const Expr& self) override {
    auto it = rename_.find(op);
    return it == rename_.end() ? self : it->second;
  }

 private:
  std::map<std::string, std::shared_ptr<const IterVarNode>> canonical_;
  std::unordered_map<const VarNode*, Var> rename_;
  std::unordered_set<std::string> open_;
};

/// Takes the shared allocations out of a kernel body, to put them back at its top.
class SharedAllocHoister : public IRMutator {
 public:
  using IRMutator::mutate;
  std::vector<const AllocateNode*> hoisted;  ///< nodes of the kernel being rewritten

 protected:
  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    if (op->scope != "shared") return IRMutator::mutate_(op, self);
    hoisted.push_back(op);
    return mutate(op->body);
  }
};

Stmt hoist_shared_allocations(const Stmt& kernel) {
  // The leading chain of thread_extent attributes stays on top.
  std::vector<const AttrStmtNode*> chain;
  Stmt body = kernel;
  while (auto a = body.as<AttrStmtNode>()) {
    if (a->key != attr::kThreadExtent) break;
    chain.push_back(a);
    body = a->body;
  }
  SharedAllocHoister hoister;
  body = hoister.mutate(body);
  for (auto it = hoister.hoisted.rbegin(); it != hoister.hoisted.rend(); ++it) {
    body = allocate((*it)->buffer_var, (*it)->dtype, (*it)->extents, (*it)->scope, body);
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    body = attr_stmt((*it)->node, (*it)->key, (*it)->value, body);
  }
  return body;
}

/// The variables a kernel uses without defining them, in order of first use.
std::vector<const VarNode*> free_vars(const Stmt& kernel) {
  std::unordered_set<const VarNode*> defined;
  post_order_visit(kernel, [&](const Object* n) {
    if (auto f = dynamic_cast<const ForNode*>(n)) defined.insert(f->loop_var.get());
    if (auto l = dynamic_cast<const LetStmtNode*>(n)) defined.insert(l->var.get());
    if (auto l = dynamic_cast<const LetNode*>(n)) defined.insert(l->var.get());
    if (auto a = dynamic_cast<const AllocateNode*>(n)) defined.insert(a->buffer_var.get());
    if (auto a = dynamic_cast<const AttrStmtNode*>(n)) {
      if (auto iv = dynamic_cast<const IterVarNode*>(a->node.get())) defined.insert(iv->var.get());
    }
  });
  struct Collector : IRVisitor {
    using IRVisitor::visit;
    void visit_(const VarNode* op) override {
      if (!defined->count(op) && seen.insert(op).second) used.push_back(op);
    }
    const std::unordered_set<const VarNode*>* defined = nullptr;
    std::unordered_set<const VarNode*> seen;
    std::vector<const VarNode*> used;
  } collector;
  collector.defined = &defined;
  collector.visit(kernel);
  return collector.used;
}

/// What a host-level statement is, for the error that refuses it.
std::string host_statement(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor:
      return "its loop '" + s.as<ForNode>()->loop_var.name() + "'";
    case StmtKind::kStore:
      return "a store to '" + s.as<StoreNode>()->buffer_var.name() + "'";
    case StmtKind::kIfThenElse:
      return "a condition";
    case StmtKind::kLetStmt:
      return "a let of '" + s.as<LetStmtNode>()->var.name() + "'";
    case StmtKind::kAssertStmt:
      return "an assertion";
    case StmtKind::kEvaluate:
      return "a call";
    default:
      return "a statement";
  }
}

class Splitter {
 public:
  explicit Splitter(const PrimFunc& f) {
    out_.name = f.name;
    out_.params = f.params;
    for (size_t i = 0; i < f.params.size(); ++i)
      source_[f.params[i].var.get()] = static_cast<int>(i);
  }

  DeviceFunction run(const Stmt& body) {
    host(body);
    return std::move(out_);
  }

 private:
  void host(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kSeq:
        for (const Stmt& x : s.as<SeqNode>()->seq) host(x);
        return;
      case StmtKind::kAllocate: {
        auto op = s.as<AllocateNode>();
        KILN_USER_CHECK(op->scope == "global")
            << "stage '" << op->buffer_var.name() << "' in scope '" << op->scope
            << "' is not computed inside a kernel; compute it at a loop bound to GPU threads";
        Expr size = make_const(kInt64, int64_t{1});
        for (const Expr& e : op->extents) size = size * cast(kInt64, e);
        auto elements = as_const_int(size);
        KILN_USER_CHECK(elements.has_value())
            << "stage '" << op->buffer_var.name() << "' needs " << to_string(size)
            << " elements of global scratch memory; the size must be a constant on a GPU";
        source_[op->buffer_var.get()] = -1 - static_cast<int>(out_.workspaces.size());
        out_.workspaces.push_back({op->buffer_var.name(), op->dtype, *elements});
        workspace_vars_.push_back(op->buffer_var);
        host(op->body);
        return;
      }
      case StmtKind::kAttrStmt: {
        auto op = s.as<AttrStmtNode>();
        if (op->key == attr::kThreadExtent) return kernel(s);
        return host(op->body);  // annotations of host code have no meaning on a GPU
      }
      case StmtKind::kEvaluate:
        if (is_no_op(s)) return;
        break;
      default:
        break;
    }
    KILN_USER_ERROR() << "stage " << stored_stage_names(s)
                      << " is not bound to GPU threads: " << host_statement(s)
                      << " would run on the host; bind its outer loops to blockIdx/threadIdx";
  }

  void kernel(const Stmt& region) {
    Stmt body = hoist_shared_allocations(ThreadAxisUnifier().mutate(region));
    DeviceKernel k;
    k.func.name = out_.name + "_kernel" + std::to_string(out_.kernels.size());
    post_order_visit(body, [&](const Object* n) {
      auto a = dynamic_cast<const AttrStmtNode*>(n);
      if (a == nullptr || a->key != attr::kThreadExtent) return;
      auto iv = static_cast<const IterVarNode*>(a->node.get());
      auto extent = as_const_int(a->value);
      KILN_ICHECK(extent.has_value())
          << "launch extent of '" << iv->thread_tag << "' is not a constant";
      const std::string& tag = iv->thread_tag;
      int dim = tag.back() - 'x';
      KILN_ICHECK(dim >= 0 && dim < 3) << "unknown thread tag '" << tag << "'";
      (tag.rfind("blockIdx", 0) == 0 ? k.launch.grid : k.launch.block)[static_cast<size_t>(dim)] =
          *extent;
    });

    std::vector<std::pair<int, Param>> tensors, scalars;
    for (const VarNode* v : free_vars(body)) {
      auto it = source_.find(v);
      KILN_ICHECK(it != source_.end()) << "kernel " << k.func.name << " uses '" << v->name
                                       << "', which is neither a parameter nor a workspace";
      int src = it->second;
      if (src >= 0) {
        (out_.params[static_cast<size_t>(src)].is_tensor() ? tensors : scalars)
            .emplace_back(src, out_.params[static_cast<size_t>(src)]);
      } else {
        const Workspace& w = out_.workspaces[static_cast<size_t>(-1 - src)];
        Buffer b{workspace_vars_[static_cast<size_t>(-1 - src)],
                 w.dtype,
                 {make_const(kInt64, w.elements)},
                 w.name,
                 "global"};
        tensors.emplace_back(src, Param{b.data, b});
      }
    }
    // Parameters first in the caller's order, then workspaces; scalars last.
    auto order = [](const std::pair<int, Param>& a, const std::pair<int, Param>& b) {
      auto key = [](int src) { return src >= 0 ? src : (1 << 30) - src; };
      return key(a.first) < key(b.first);
    };
    std::sort(tensors.begin(), tensors.end(), order);
    std::sort(scalars.begin(), scalars.end(), order);
    for (auto* group : {&tensors, &scalars}) {
      for (auto& [src, param] : *group) {
        k.func.params.push_back(param);
        k.args.push_back(src);
      }
    }
    k.func.body = body;
    out_.kernels.push_back(std::move(k));
  }

  DeviceFunction out_;
  std::unordered_map<const VarNode*, int> source_;  ///< parameter index, or -1 - workspace index
  std::vector<Var> workspace_vars_;
};

}  // namespace

DeviceFunction split_host_device(const ir::PrimFunc& f) { return Splitter(f).run(f.body); }

}  // namespace kiln::pass
