// Runs a lowered DeviceFunction on the CPU the way a GPU would: every block of every kernel in
// turn, each thread of a block an OS thread interpreting the kernel body with its blockIdx and
// threadIdx, shared buffers one per block, local ones per thread, kiln.storage_sync a barrier of
// the block's threads. int32/float32 code (+, -, *, min, max) with vector stores run lane by lane
// (what the tests lower): enough to prove that a lowered kernel computes what its schedule says,
// barriers included.
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"
#include "compiler/pass/split_host_device.h"
#include "compiler/pass/thread_sync.h"

namespace kiln::pass::testing {

class ThreadInterpreter {
 public:
  using Memory = std::unordered_map<const ir::VarNode*, std::vector<float>*>;

  ThreadInterpreter(Memory memory, std::unordered_map<const ir::VarNode*, int64_t> ints,
                    std::barrier<>* sync, std::map<const ir::VarNode*, std::vector<float>>* shared)
      : memory_(std::move(memory)), ints_(std::move(ints)), sync_(sync), shared_(shared) {}

  void run(const ir::Stmt& s) {
    using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
    switch (s.kind()) {
      case StmtKind::kSeq:
        for (auto& x : s.as<SeqNode>()->seq) run(x);
        return;
      case StmtKind::kAttrStmt:
        return run(s.as<AttrStmtNode>()->body);
      case StmtKind::kLetStmt: {
        auto op = s.as<LetStmtNode>();
        ints_[op->var.get()] = i(op->value);
        return run(op->body);
      }
      case StmtKind::kFor: {
        auto op = s.as<ForNode>();
        int64_t lo = i(op->min), n = i(op->extent);
        for (int64_t v = lo; v < lo + n; ++v) {
          ints_[op->loop_var.get()] = v;
          run(op->body);
        }
        return;
      }
      case StmtKind::kStore: {
        auto op = s.as<StoreNode>();
        std::vector<float>& buf = *memory_.at(op->buffer_var.get());
        for (lane_ = 0; lane_ < op->index.dtype().lanes(); ++lane_) {
          int64_t idx = i(op->index);
          KILN_ICHECK(idx >= 0 && idx < static_cast<int64_t>(buf.size()))
              << "store out of bounds: " << op->buffer_var.name() << "[" << idx << "]";
          buf[static_cast<size_t>(idx)] = f(op->value);
        }
        lane_ = 0;
        return;
      }
      case StmtKind::kAllocate: {
        auto op = s.as<AllocateNode>();
        int64_t n = 1;
        for (auto& e : op->extents) n *= i(e);
        if (op->scope == "shared") {
          memory_[op->buffer_var.get()] = &shared_->at(op->buffer_var.get());
          return run(op->body);
        }
        std::vector<float> local(static_cast<size_t>(n), NAN);
        memory_[op->buffer_var.get()] = &local;
        run(op->body);
        memory_.erase(op->buffer_var.get());
        return;
      }
      case StmtKind::kIfThenElse: {
        auto op = s.as<IfThenElseNode>();
        if (i(op->condition)) return run(op->then_case);
        if (op->else_case.defined()) run(op->else_case);
        return;
      }
      case StmtKind::kEvaluate:
        if (is_storage_sync(s)) sync_->arrive_and_wait();
        return;
      default:
        KILN_UNREACHABLE();
    }
  }

 private:
  int64_t i(const ir::Expr& e) {
    using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return e.as<IntImmNode>()->value;
      case ExprKind::kVar:
        return ints_.at(e.as<VarNode>());
      case ExprKind::kCast:
        return i(e.as<CastNode>()->value);
#define KILN_INT_BIN(T, F)              \
  case ExprKind::k##T: {                \
    auto op = e.as<T##Node>();          \
    int64_t a = i(op->a), b = i(op->b); \
    return F;                           \
  }
        KILN_INT_BIN(Add, a + b)
        KILN_INT_BIN(Sub, a - b)
        KILN_INT_BIN(Mul, a * b)
        KILN_INT_BIN(Div, a / b)
        KILN_INT_BIN(Mod, a % b)
        KILN_INT_BIN(FloorDiv, (a - ((a % b + b) % b)) / b)
        KILN_INT_BIN(FloorMod, (a % b + b) % b)
        KILN_INT_BIN(Min, std::min(a, b))
        KILN_INT_BIN(Max, std::max(a, b))
        KILN_INT_BIN(And, a && b)
        KILN_INT_BIN(Or, a || b)
#undef KILN_INT_BIN
#define KILN_CMP(T, OP)                                                            \
  case ExprKind::k##T: {                                                           \
    auto op = e.as<T##Node>();                                                     \
    return op->a.dtype().is_float() ? f(op->a) OP f(op->b) : i(op->a) OP i(op->b); \
  }
        KILN_CMP(EQ, ==)
        KILN_CMP(NE, !=)
        KILN_CMP(LT, <)
        KILN_CMP(LE, <=)
        KILN_CMP(GT, >)
        KILN_CMP(GE, >=)
#undef KILN_CMP
      case ExprKind::kNot:
        return !i(e.as<NotNode>()->a);
      case ExprKind::kRamp:
        return i(e.as<RampNode>()->base) + lane_ * i(e.as<RampNode>()->stride);
      case ExprKind::kBroadcast:
        return i(e.as<BroadcastNode>()->value);
      case ExprKind::kSelect: {
        auto op = e.as<SelectNode>();
        return i(op->condition) ? i(op->true_value) : i(op->false_value);
      }
      default:
        KILN_UNREACHABLE();
    }
  }

  float f(const ir::Expr& e) {
    using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
    switch (e.kind()) {
      case ExprKind::kFloatImm:
        return static_cast<float>(e.as<FloatImmNode>()->value);
      case ExprKind::kBroadcast:
        return f(e.as<BroadcastNode>()->value);
      case ExprKind::kCast:
        return static_cast<float>(i(e.as<CastNode>()->value));
      case ExprKind::kAdd:
        return f(e.as<AddNode>()->a) + f(e.as<AddNode>()->b);
      case ExprKind::kSub:
        return f(e.as<SubNode>()->a) - f(e.as<SubNode>()->b);
      case ExprKind::kMul:
        return f(e.as<MulNode>()->a) * f(e.as<MulNode>()->b);
      case ExprKind::kMax:
        return std::max(f(e.as<MaxNode>()->a), f(e.as<MaxNode>()->b));
      case ExprKind::kMin:
        return std::min(f(e.as<MinNode>()->a), f(e.as<MinNode>()->b));
      case ExprKind::kSelect: {
        auto op = e.as<SelectNode>();
        return i(op->condition) ? f(op->true_value) : f(op->false_value);
      }
      case ExprKind::kLoad: {
        auto op = e.as<LoadNode>();
        const std::vector<float>& buf = *memory_.at(op->buffer_var.get());
        int64_t idx = i(op->index);
        KILN_ICHECK(idx >= 0 && idx < static_cast<int64_t>(buf.size()))
            << "load out of bounds: " << op->buffer_var.name() << "[" << idx << "]";
        return buf[static_cast<size_t>(idx)];
      }
      default:
        KILN_UNREACHABLE();
    }
  }

  Memory memory_;
  std::unordered_map<const ir::VarNode*, int64_t> ints_;
  std::barrier<>* sync_;
  int lane_ = 0;  ///< the lane of a vector store being run
  std::map<const ir::VarNode*, std::vector<float>>* shared_;
};

/// Runs every kernel of `d` over `args` (one float vector per parameter, tensors only).
inline void run_on_threads(const DeviceFunction& d, std::vector<std::vector<float>>* args) {
  std::vector<std::vector<float>> workspaces;
  for (auto& w : d.workspaces) workspaces.emplace_back(static_cast<size_t>(w.elements), NAN);
  for (const DeviceKernel& k : d.kernels) {
    ThreadInterpreter::Memory memory;
    for (size_t p = 0; p < k.func.params.size(); ++p) {
      int src = k.args[p];
      memory[k.func.params[p].var.get()] = src >= 0 ? &(*args)[static_cast<size_t>(src)]
                                                    : &workspaces[static_cast<size_t>(-1 - src)];
    }
    // The thread variables, as the kernel's attributes bind them.
    std::map<std::string, const ir::VarNode*> axes;
    std::map<const ir::VarNode*, int64_t> shared_sizes;
    ir::Stmt body = k.func.body;
    std::function<void(const ir::Stmt&)> scan = [&](const ir::Stmt& s) {
      if (auto a = s.as<ir::AttrStmtNode>()) {
        if (auto iv = dynamic_cast<const ir::IterVarNode*>(a->node.get()))
          axes[iv->thread_tag] = iv->var.get();
        scan(a->body);
      } else if (auto al = s.as<ir::AllocateNode>(); al && al->scope == "shared") {
        int64_t n = 1;
        for (auto& e : al->extents) n *= e.as<ir::IntImmNode>()->value;
        shared_sizes[al->buffer_var.get()] = n;
        scan(al->body);
      }
    };
    scan(body);
    const auto& g = k.launch.grid;
    const auto& b = k.launch.block;
    const char* dims = "xyz";
    for (int64_t block = 0; block < g[0] * g[1] * g[2]; ++block) {
      std::map<const ir::VarNode*, std::vector<float>> shared;
      for (auto& [v, n] : shared_sizes) shared[v].assign(static_cast<size_t>(n), NAN);
      const int64_t threads = b[0] * b[1] * b[2];
      std::barrier<> sync(static_cast<std::ptrdiff_t>(threads));
      std::vector<std::thread> pool;
      for (int64_t t = 0; t < threads; ++t) {
        std::unordered_map<const ir::VarNode*, int64_t> ints;
        int64_t bi = block, ti = t;
        for (int d3 = 0; d3 < 3; ++d3) {
          auto bx = axes.find(std::string("blockIdx.") + dims[d3]);
          if (bx != axes.end()) ints[bx->second] = bi % g[d3];
          bi /= g[d3];
          auto tx = axes.find(std::string("threadIdx.") + dims[d3]);
          if (tx != axes.end()) ints[tx->second] = ti % b[d3];
          ti /= b[d3];
        }
        pool.emplace_back([&, ints] { ThreadInterpreter(memory, ints, &sync, &shared).run(body); });
      }
      for (auto& th : pool) th.join();
    }
  }
}

}  // namespace kiln::pass::testing
