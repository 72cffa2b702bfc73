// GPU checks: launch extents, thread and shared-memory limits, barriers and shared buffers.
#include "compiler/pass/verify_gpu.h"

#include <map>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/substitute.h"
#include "compiler/pass/thread_sync.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

const IterVarNode* thread_axis_of(const AttrStmtNode* op) {
  return dynamic_cast<const IterVarNode*>(op->node.get());
}

bool is_thread_idx(const std::string& tag) { return tag.rfind("threadIdx", 0) == 0; }

/// The checks of one kernel.
class KernelVerifier : public IRVisitor {
 public:
  KernelVerifier(const Stmt& kernel, const target::Target& target)
      : target_(target), stage_(stored_stage_names(kernel)) {}
  using IRVisitor::visit;

  void verify(const Stmt& kernel) {
    visit(kernel);
    int64_t threads = 1;
    std::ostringstream dims;
    for (auto& [tag, bound] : extents_) {
      if (!is_thread_idx(tag)) continue;
      const int dim = tag.back() - 'x';
      const int limit = dim >= 0 && dim < 3 ? target_.max_block_dims[dim] : 0;
      KILN_USER_CHECK(limit == 0 || bound.extent <= limit)
          << "the kernel of stage " << stage_ << " has " << tag << " = " << bound.extent
          << " threads, more than the target allows along " << tag.back() << " (" << limit << ")";
      dims << (dims.tellp() == 0 ? "" : " x ") << tag << " = " << bound.extent;
      threads *= bound.extent;
    }
    KILN_USER_CHECK(threads <= target_.max_num_threads)
        << "the kernel of stage " << stage_ << " has " << threads << " threads per block ("
        << dims.str() << "), more than the target's max_num_threads = " << target_.max_num_threads;
    int64_t shared_bytes = 0;
    std::ostringstream buffers;
    for (auto& [name, bytes] : shared_) {
      buffers << (buffers.tellp() == 0 ? "" : ", ") << "'" << name << "' " << bytes << " bytes";
      shared_bytes += bytes;
    }
    KILN_USER_CHECK(shared_bytes <= target_.max_shared_memory_per_block)
        << "the kernel of stage " << stage_ << " uses " << shared_bytes
        << " bytes of shared memory (" << buffers.str()
        << "), more than the target's max_shared_memory_per_block = "
        << target_.max_shared_memory_per_block;
  }

  void visit_(const AttrStmtNode* op) override {
    if (op->key == attr::kThreadExtent) {
      const IterVarNode* iv = thread_axis_of(op);
      KILN_ICHECK(iv != nullptr) << "thread_extent attribute on something else than a thread axis";
      auto extent = as_const_int(op->value);
      KILN_USER_CHECK(extent.has_value())
          << "stage " << stored_stage_names(op->body) << ": the launch extent of '"
          << iv->thread_tag << "' is " << to_string(op->value)
          << ", not a constant; GPU launch extents must be constants";
      auto [it, fresh] =
          extents_.emplace(iv->thread_tag, Bound{*extent, stored_stage_names(op->body)});
      KILN_USER_CHECK(fresh || it->second.extent == *extent)
          << "thread axis '" << iv->thread_tag << "' is bound with extent " << it->second.extent
          << " by stage " << it->second.stage << " and with extent " << *extent << " by stage "
          << stored_stage_names(op->body) << " in the same kernel; one thread index has one extent";
      if (is_thread_idx(iv->thread_tag)) thread_vars_.insert(iv->var.get());
    }
    IRVisitor::visit_(op);
  }

  void visit_(const AllocateNode* op) override {
    if (op->scope == "shared") {
      Expr size = make_const(kInt64, int64_t{op->dtype.bytes() * op->dtype.lanes()});
      for (const Expr& e : op->extents) size = size * cast(kInt64, e);
      auto bytes = as_const_int(size);
      KILN_USER_CHECK(bytes.has_value())
          << "shared buffer '" << op->buffer_var.name() << "' of stage " << stage_ << " has size "
          << to_string(size)
          << " bytes, not a constant; shared memory is allocated per block at launch";
      shared_[op->buffer_var.name()] += *bytes;
    }
    IRVisitor::visit_(op);
  }

  void visit_(const IfThenElseNode* op) override {
    visit(op->condition);
    divergent_depth_ += depends_on_thread(op->condition) ? 1 : 0;
    visit(op->then_case);
    visit(op->else_case);
    divergent_depth_ -= depends_on_thread(op->condition) ? 1 : 0;
  }

  void visit_(const ForNode* op) override {
    bool divergent = depends_on_thread(op->min) || depends_on_thread(op->extent);
    divergent_depth_ += divergent ? 1 : 0;
    IRVisitor::visit_(op);
    divergent_depth_ -= divergent ? 1 : 0;
  }

  void visit_(const EvaluateNode* op) override {
    KILN_ICHECK(divergent_depth_ == 0 || !is_storage_sync(evaluate(op->value)))
        << "a barrier in the kernel of stage " << stage_
        << " is under control flow that depends on threadIdx; threads of a block would wait at "
           "different barriers";
    IRVisitor::visit_(op);
  }

 private:
  struct Bound {
    int64_t extent;
    std::string stage;
  };

  bool depends_on_thread(const Expr& e) const {
    return uses_var(e, [&](const VarNode* v) { return thread_vars_.count(v) > 0; });
  }

  const target::Target& target_;
  std::string stage_;
  std::map<std::string, Bound> extents_;
  std::map<std::string, int64_t> shared_;
  std::unordered_set<const VarNode*> thread_vars_;
  int divergent_depth_ = 0;
};

/// Walks the host part of the function: each thread_extent attribute met there starts a kernel.
class HostVerifier : public IRVisitor {
 public:
  explicit HostVerifier(const target::Target& target) : target_(target) {}
  using IRVisitor::visit;

  void visit_(const AttrStmtNode* op) override {
    if (op->key != attr::kThreadExtent) return IRVisitor::visit_(op);
    Stmt kernel = attr_stmt(op->node, op->key, op->value, op->body);
    KernelVerifier(kernel, target_).verify(kernel);
  }
  void visit_(const AllocateNode* op) override {
    KILN_ICHECK(op->scope != "shared")
        << "shared buffer '" << op->buffer_var.name()
        << "' is allocated outside the thread environment of a kernel";
    IRVisitor::visit_(op);
  }
  void visit_(const LoadNode* op) override {
    KILN_ICHECK(!shared_.count(op->buffer_var.get()))
        << "shared buffer '" << op->buffer_var.name()
        << "' is read outside the thread environment of a kernel";
    IRVisitor::visit_(op);
  }
  void visit_(const StoreNode* op) override {
    KILN_ICHECK(!shared_.count(op->buffer_var.get()))
        << "shared buffer '" << op->buffer_var.name()
        << "' is written outside the thread environment of a kernel";
    IRVisitor::visit_(op);
  }

  std::unordered_set<const VarNode*> shared_;

 private:
  const target::Target& target_;
};

}  // namespace

std::string stored_stage_names(const ir::Stmt& s) {
  std::vector<std::string> all, outer;
  std::unordered_set<const VarNode*> allocated;
  std::unordered_set<std::string> seen;
  post_order_visit(s, [&](const Object* n) {
    if (auto a = dynamic_cast<const AllocateNode*>(n)) allocated.insert(a->buffer_var.get());
  });
  post_order_visit(s, [&](const Object* n) {
    auto st = dynamic_cast<const StoreNode*>(n);
    if (st == nullptr || !seen.insert(st->buffer_var.name()).second) return;
    all.push_back(st->buffer_var.name());
    if (!allocated.count(st->buffer_var.get())) outer.push_back(st->buffer_var.name());
  });
  const std::vector<std::string>& names = outer.empty() ? all : outer;
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out.empty() ? "(none)" : out;
}

void verify_gpu(const ir::Stmt& s, const target::Target& target) {
  HostVerifier host(target);
  post_order_visit(s, [&](const Object* n) {
    if (auto a = dynamic_cast<const AllocateNode*>(n); a && a->scope == "shared")
      host.shared_.insert(a->buffer_var.get());
  });
  host.visit(s);
}

}  // namespace kiln::pass
