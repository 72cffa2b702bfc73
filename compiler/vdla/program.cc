// Building a VDLA program from a lowered function (program.h).
#include "compiler/vdla/program.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/int_math.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"
#include "compiler/lower.h"
#include "compiler/vdla/intrin.h"

namespace kiln::vdla_compiler {
namespace {

using ir::Expr;
using ir::Stmt;
using Env = std::unordered_map<const ir::VarNode*, int64_t>;

// ---- integer evaluation of index expressions ----------------------------------------------

int64_t eval(const Expr& e, const Env& env) {
  using K = ir::ExprKind;
  auto bin = [&](auto f) {
    auto [a, b] = ir::binary_operands(e);
    return f(eval(a, env), eval(b, env));
  };
  switch (e.kind()) {
    case K::kIntImm:
      return e.as<ir::IntImmNode>()->value;
    case K::kVar: {
      auto it = env.find(e.as<ir::VarNode>());
      KILN_USER_CHECK(it != env.end())
          << "vdla: '" << e.as<ir::VarNode>()->name << "' has no value when the program is built";
      return it->second;
    }
    case K::kCast:
      return eval(e.as<ir::CastNode>()->value, env);
    case K::kAdd:
      return bin([](int64_t a, int64_t b) { return a + b; });
    case K::kSub:
      return bin([](int64_t a, int64_t b) { return a - b; });
    case K::kMul:
      return bin([](int64_t a, int64_t b) { return a * b; });
    case K::kDiv:
      return bin([](int64_t a, int64_t b) { return b == 0 ? 0 : a / b; });
    case K::kMod:
      return bin([](int64_t a, int64_t b) { return b == 0 ? 0 : a % b; });
    case K::kFloorDiv:
      return bin([](int64_t a, int64_t b) { return b == 0 ? 0 : floor_div(a, b); });
    case K::kFloorMod:
      return bin([](int64_t a, int64_t b) { return b == 0 ? 0 : floor_mod(a, b); });
    case K::kShr:
      return bin([](int64_t a, int64_t b) { return a >> std::clamp<int64_t>(b, 0, 63); });
    case K::kMin:
      return bin([](int64_t a, int64_t b) { return std::min(a, b); });
    case K::kMax:
      return bin([](int64_t a, int64_t b) { return std::max(a, b); });
    case K::kEQ:
      return bin([](int64_t a, int64_t b) { return int64_t{a == b}; });
    case K::kNE:
      return bin([](int64_t a, int64_t b) { return int64_t{a != b}; });
    case K::kLT:
      return bin([](int64_t a, int64_t b) { return int64_t{a < b}; });
    case K::kLE:
      return bin([](int64_t a, int64_t b) { return int64_t{a <= b}; });
    case K::kGT:
      return bin([](int64_t a, int64_t b) { return int64_t{a > b}; });
    case K::kGE:
      return bin([](int64_t a, int64_t b) { return int64_t{a >= b}; });
    case K::kAnd:
      return bin([](int64_t a, int64_t b) { return int64_t{a && b}; });
    case K::kOr:
      return bin([](int64_t a, int64_t b) { return int64_t{a || b}; });
    case K::kNot:
      return int64_t{!eval(e.as<ir::NotNode>()->a, env)};
    case K::kSelect: {
      auto s = e.as<ir::SelectNode>();
      return eval(s->condition, env) ? eval(s->true_value, env) : eval(s->false_value, env);
    }
    default:
      KILN_USER_ERROR()
          << "vdla: cannot compute " << ir::to_string(e)
          << " when the program is built (an index or condition must be integer arithmetic)";
  }
  return 0;
}

// ---- buffers ----------------------------------------------------------------------------------

enum Mem : int { kInp = 0, kWgt = 1, kAcc = 2, kNumMem = 3 };
const char* const kMemScopes[] = {kInpScope, kWgtScope, kAccScope};

struct BufInfo {
  std::string name;
  ir::DataType dtype;
  int64_t elems = 0;
  int arg = -1;       ///< argument index for DRAM tensors
  int mem = -1;       ///< SRAM buffer for the local scopes
  int64_t epr = 1;    ///< elements per SRAM row
  int64_t base = -1;  ///< first SRAM row, once placed
  int64_t rows() const { return (elems + epr - 1) / epr; }
};

struct Access {
  int mem;
  int64_t lo, hi;  ///< rows [lo, hi)
};

struct Event {
  int stage;  ///< vdla::kLoadStage, kComputeStage, kStoreStage
  DriverCall call;
  std::vector<Access> reads, writes;
};

/// One loop of a nest, evaluated.
struct Loop {
  const ir::VarNode* var;
  int64_t min, extent;
};

/// The perfectly nested loops on top of `s` and the statement inside them.
std::pair<std::vector<Loop>, Stmt> loop_nest(Stmt s, const Env& env) {
  std::vector<Loop> loops;
  while (auto f = s.as<ir::ForNode>()) {
    loops.push_back({f->loop_var.get(), eval(f->min, env), eval(f->extent, env)});
    s = f->body;
  }
  return {loops, s};
}

class Builder {
 public:
  Builder(const ir::PrimFunc& f, const vdla::Config& cfg) : f_(f), cfg_(cfg) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const ir::Param& p = f.params[i];
      KILN_USER_CHECK(p.is_tensor())
          << "vdla '" << f.name << "': scalar parameters are not supported";
      BufInfo b;
      b.name = p.buffer->name;
      b.dtype = p.buffer->dtype;
      b.elems = 1;
      for (const Expr& d : p.buffer->shape) b.elems *= eval(d, {});
      b.arg = static_cast<int>(i);
      bufs_[p.var.get()] = b;
      program_.arg_names.push_back(b.name);
      program_.arg_bytes.push_back(b.elems * b.dtype.bytes());
    }
    depth_[kInp] = cfg.inp_depth();
    depth_[kWgt] = cfg.wgt_depth();
    depth_[kAcc] = cfg.acc_depth();
    epr_[kInp] = cfg.batch() * cfg.block_in();
    epr_[kWgt] = cfg.block_out() * cfg.block_in();
    epr_[kAcc] = cfg.batch() * cfg.block_out();
  }

  VdlaProgram build() {
    program_.name = f_.name;
    run(f_.body);
    plan_tokens();
    return std::move(program_);
  }

 private:
  // ---- walking the program ----

  void run(const Stmt& s) {
    switch (s.kind()) {
      case ir::StmtKind::kFor: {
        if (gemm_mode(s) > 0) return gemm_kernel(s);
        auto f = s.as<ir::ForNode>();
        const int64_t lo = eval(f->min, env_), n = eval(f->extent, env_);
        for (int64_t i = lo; i < lo + n; ++i) {
          env_[f->loop_var.get()] = i;
          run(f->body);
        }
        env_.erase(f->loop_var.get());
        return;
      }
      case ir::StmtKind::kSeq:
        for (const Stmt& x : s.as<ir::SeqNode>()->seq) run(x);
        return;
      case ir::StmtKind::kLetStmt: {
        auto l = s.as<ir::LetStmtNode>();
        env_[l->var.get()] = eval(l->value, env_);
        run(l->body);
        env_.erase(l->var.get());
        return;
      }
      case ir::StmtKind::kIfThenElse: {
        auto i = s.as<ir::IfThenElseNode>();
        if (eval(i->condition, env_)) {
          run(i->then_case);
        } else if (i->else_case.defined()) {
          run(i->else_case);
        }
        return;
      }
      case ir::StmtKind::kAssertStmt:
        run(s.as<ir::AssertStmtNode>()->body);
        return;
      case ir::StmtKind::kAttrStmt: {
        auto a = s.as<ir::AttrStmtNode>();
        if (a->key == std::string(ir::attr::kPragmaPrefix) + kDmaCopy) return dma(a->body);
        if (a->key == std::string(ir::attr::kPragmaPrefix) + kAlu) return alu(a->body);
        KILN_USER_CHECK(a->key.rfind(ir::attr::kPragmaPrefix, 0) != 0)
            << "vdla '" << f_.name << "': unknown pragma '" << a->key.substr(7)
            << "' (the VDLA knows dma_copy and alu)";
        KILN_USER_CHECK(a->key != ir::attr::kThreadExtent)
            << "vdla '" << f_.name
            << "': a loop is bound to a GPU thread axis; the VDLA has only cthread";
        run(a->body);
        return;
      }
      case ir::StmtKind::kAllocate: {
        auto a = s.as<ir::AllocateNode>();
        int mem = -1;
        for (int m = 0; m < kNumMem; ++m) {
          if (a->scope == kMemScopes[m]) mem = m;
        }
        KILN_USER_CHECK(mem >= 0)
            << "vdla '" << f_.name << "': buffer '" << a->buffer_var.name() << "' is in scope '"
            << a->scope
            << "'; the VDLA has local.inp_buffer, local.wgt_buffer and local.acc_buffer";
        BufInfo b;
        b.name = a->buffer_var.name();
        b.dtype = a->dtype;
        b.elems = 1;
        for (const Expr& e : a->extents) b.elems *= eval(e, env_);
        b.mem = mem;
        b.epr = epr_[mem];
        bufs_[a->buffer_var.get()] = b;
        const std::array<int64_t, kNumMem> saved = next_;
        run(a->body);
        next_ = saved;
        bufs_.erase(a->buffer_var.get());
        return;
      }
      case ir::StmtKind::kEvaluate: {
        const Expr& v = s.as<ir::EvaluateNode>()->value;
        if (v.as<ir::IntImmNode>()) return;
        if (gemm_mode(s) > 0) return gemm_kernel(s);
        KILN_USER_ERROR() << "vdla '" << f_.name << "': cannot run " << ir::to_string(v)
                          << " on the VDLA";
        return;
      }
      case ir::StmtKind::kStore: {
        auto st = s.as<ir::StoreNode>();
        KILN_USER_ERROR() << "vdla '" << f_.name << "': a store to '" << st->buffer_var.name()
                          << "' outside a dma_copy or alu pragma; the VDLA computes only by DMA, "
                             "GEMM (tensorize) and ALU";
        return;
      }
      default:
        KILN_USER_ERROR() << "vdla '" << f_.name << "': unexpected statement\n" << ir::to_string(s);
    }
  }

  // ---- buffers and rows ----

  BufInfo& buf(const ir::Var& v) {
    auto it = bufs_.find(v.get());
    KILN_ICHECK(it != bufs_.end()) << "vdla: unknown buffer " << v.name();
    return it->second;
  }

  /// Places `b` in its SRAM buffer, after what is live there.
  void place(BufInfo& b) {
    if (b.base >= 0) return;
    const int m = b.mem;
    KILN_USER_CHECK(next_[m] + b.rows() <= depth_[m])
        << "vdla '" << f_.name << "': buffer '" << b.name << "' needs " << b.rows() << " rows of "
        << kMemScopes[m] << ", but only " << depth_[m] - next_[m] << " of its " << depth_[m]
        << " are free; choose smaller tiles";
    b.base = next_[m];
    next_[m] += b.rows();
  }

  /// The SRAM row of element `elem` of `b` (placing it on first use); the element must start a row.
  int64_t row_of(BufInfo& b, int64_t elem, const char* what) {
    KILN_USER_CHECK(b.mem >= 0) << "vdla '" << f_.name << "': " << what << " uses '" << b.name
                                << "', which is not in an SRAM scope";
    KILN_USER_CHECK(elem % b.epr == 0 && elem >= 0 && elem < b.elems)
        << "vdla '" << f_.name << "': " << what << " starts at element " << elem << " of '"
        << b.name << "', not at one of its rows of " << b.epr;
    place(b);
    return b.base + elem / b.epr;
  }

  // ---- GEMM ----

  /// 1 (reset) or 2 (accumulate) when `s` holds only GEMM micro-ops of that kind in loops, else 0.
  int gemm_mode(const Stmt& s) {
    auto it = gemm_mode_.find(s.get());
    if (it != gemm_mode_.end()) return it->second;
    int mode = -1;
    bool pure = true;
    std::function<void(const Stmt&)> walk = [&](const Stmt& x) {
      if (!pure) return;
      if (auto f = x.as<ir::ForNode>()) {
        // An unrolled loop (the virtual threads' copies) is unrolled into separate instructions.
        if (f->for_kind == ir::ForKind::kUnrolled) pure = false;
        return walk(f->body);
      }
      if (auto q = x.as<ir::SeqNode>()) {
        for (auto& y : q->seq) walk(y);
        return;
      }
      if (auto e = x.as<ir::EvaluateNode>()) {
        auto c = e->value.as<ir::CallNode>();
        const int m = !c ? 0 : c->name == kGemmResetCall ? 1 : c->name == kGemmCall ? 2 : 0;
        if (m == 0 || (mode > 0 && m != mode)) pure = false;
        mode = m;
        return;
      }
      pure = false;
    };
    walk(s);
    const int r = pure && mode > 0 ? mode : 0;
    gemm_mode_[s.get()] = r;
    return r;
  }

  /// The micro-ops of `s` (GEMM calls in loops) for the current environment.
  void gemm_uops(const Stmt& s, std::vector<vdla::Uop>* out) {
    if (auto f = s.as<ir::ForNode>()) {
      const int64_t lo = eval(f->min, env_), n = eval(f->extent, env_);
      for (int64_t i = lo; i < lo + n; ++i) {
        env_[f->loop_var.get()] = i;
        gemm_uops(f->body, out);
      }
      env_.erase(f->loop_var.get());
      return;
    }
    if (auto q = s.as<ir::SeqNode>()) {
      for (auto& y : q->seq) gemm_uops(y, out);
      return;
    }
    auto c = s.as<ir::EvaluateNode>()->value.as<ir::CallNode>();
    auto row = [&](const Expr& a, int mem) -> uint32_t {
      auto l = a.as<ir::LoadNode>();
      KILN_ICHECK(l) << "vdla: a GEMM operand is not an element";
      BufInfo& b = buf(l->buffer_var);
      KILN_USER_CHECK(b.mem == mem)
          << "vdla '" << f_.name << "': GEMM operand '" << b.name << "' is in "
          << (b.mem >= 0 ? kMemScopes[b.mem] : "DRAM") << ", not " << kMemScopes[mem];
      return static_cast<uint32_t>(row_of(b, eval(l->index, env_), "a GEMM"));
    };
    vdla::Uop u;
    u.dst = row(c->args[0], kAcc);
    if (c->args.size() == 3) {
      u.src = row(c->args[1], kInp);
      u.wgt = row(c->args[2], kWgt);
    }
    out->push_back(u);
  }

  /// Folds the (at most two) outermost loops of `loops` with more than one step into hardware
  /// loops when `uops_at` moves linearly with them; the others stay unrolled by `uops_at`.
  /// `uops_at` enumerates the micro-ops with the folded loops at the environment's values.
  void fold(
      const std::vector<Loop>& loops, KernelCall* k,
      const std::function<std::vector<vdla::Uop>(const std::vector<Loop>& unrolled)>& uops_at) {
    std::vector<Loop> hw, rest;
    // The loops before the first two of more than one step have one step, so every loop left in
    // `rest` with more is inside both hardware loops, as the instruction runs them.
    for (const Loop& l : loops) (hw.size() < 2 && l.extent > 1 ? hw : rest).push_back(l);
    for (const Loop& l : hw) env_[l.var] = l.min;
    for (const Loop& l : rest) env_.erase(l.var);
    std::vector<vdla::Uop> base = uops_at(rest);
    bool linear = true;
    std::vector<vdla::UopLoop> ul;
    for (const Loop& l : hw) {
      env_[l.var] = l.min + 1;
      std::vector<vdla::Uop> next = uops_at(rest);
      env_[l.var] = l.min;
      linear &= !base.empty() && next.size() == base.size();
      if (!linear) break;
      const int64_t dd = int64_t{next[0].dst} - base[0].dst,
                    ds = int64_t{next[0].src} - base[0].src,
                    dw = int64_t{next[0].wgt} - base[0].wgt;
      linear &= dd >= 0 && ds >= 0 && dw >= 0;
      for (size_t i = 0; linear && i < base.size(); ++i) {
        linear = next[i].dst == base[i].dst + dd && next[i].src == base[i].src + ds &&
                 next[i].wgt == base[i].wgt + dw;
      }
      vdla::UopLoop x;
      x.extent = static_cast<uint32_t>(l.extent);
      x.dst_factor = static_cast<uint32_t>(dd);
      x.src_factor = static_cast<uint32_t>(ds);
      x.wgt_factor = static_cast<uint32_t>(dw);
      ul.push_back(x);
    }
    for (const Loop& l : hw) env_.erase(l.var);
    if (linear) {
      k->loops = ul;
      k->uops = std::move(base);
    } else {
      k->loops.clear();
      k->uops = uops_at(loops);
    }
  }

  /// The rows a kernel touches, per operand: [min, max] over its micro-ops and loops.
  static std::array<std::pair<int64_t, int64_t>, 3> kernel_span(const KernelCall& k) {
    std::array<std::pair<int64_t, int64_t>, 3> r;
    r.fill({std::numeric_limits<int64_t>::max(), -1});
    int64_t ext[3] = {0, 0, 0};
    for (const auto& l : k.loops) {
      ext[0] += int64_t{l.extent - 1} * l.dst_factor;
      ext[1] += int64_t{l.extent - 1} * l.src_factor;
      ext[2] += int64_t{l.extent - 1} * l.wgt_factor;
    }
    for (const auto& u : k.uops) {
      const int64_t v[3] = {u.dst, u.src, u.wgt};
      for (int i = 0; i < 3; ++i)
        r[i] = {std::min(r[i].first, v[i]), std::max(r[i].second, v[i] + ext[i])};
    }
    return r;
  }

  void check_uops(const KernelCall& k, const char* what) {
    KILN_USER_CHECK(static_cast<int64_t>(k.uops.size()) <= cfg_.uop_depth())
        << "vdla '" << f_.name << "': a " << what << " micro-kernel of " << k.uops.size()
        << " micro-ops exceeds the " << cfg_.uop_depth()
        << " of the UOP buffer; choose smaller tiles";
  }

  void gemm_kernel(const Stmt& s) {
    const int mode = gemm_mode(s);
    auto [loops, inner] = loop_nest(s, env_);
    KernelCall k;
    k.gemm = true;
    k.reset = mode == 1;
    fold(loops, &k, [&](const std::vector<Loop>& unrolled) {
      std::vector<vdla::Uop> out;
      std::function<void(size_t)> rec = [&](size_t i) {
        if (i == unrolled.size()) return gemm_uops(inner, &out);
        for (int64_t v = unrolled[i].min; v < unrolled[i].min + unrolled[i].extent; ++v) {
          env_[unrolled[i].var] = v;
          rec(i + 1);
        }
        env_.erase(unrolled[i].var);
      };
      rec(0);
      return out;
    });
    check_uops(k, "GEMM");
    k.signature = kernel_signature(k);
    Event e{vdla::kComputeStage, DriverCall{}, {}, {}};
    const auto span = kernel_span(k);
    e.writes.push_back({kAcc, span[0].first, span[0].second + 1});
    if (!k.reset) {
      e.reads.push_back({kAcc, span[0].first, span[0].second + 1});
      e.reads.push_back({kInp, span[1].first, span[1].second + 1});
      e.reads.push_back({kWgt, span[2].first, span[2].second + 1});
    }
    e.call = std::move(k);
    events_.push_back(std::move(e));
  }

  // ---- row loops of copy and ALU nests ----

  /// Splits `loops` into the outer ones and the innermost ones covering `epr` elements, checking
  /// that `index` moves through those elements contiguously.
  size_t row_loops(const std::vector<Loop>& loops, int64_t epr, const std::vector<Expr>& indices,
                   const char* what) {
    int64_t n = 1;
    size_t first = loops.size();
    while (n < epr && first > 0) n *= loops[--first].extent;
    KILN_USER_CHECK(n == epr) << "vdla '" << f_.name << "': the innermost loops of a " << what
                              << " cover " << n << " elements, not one row of " << epr;
    for (const Expr& idx : indices) {
      Env env = env_;
      for (const Loop& l : loops) env[l.var] = l.min;
      const int64_t at0 = eval(idx, env);
      int64_t stride = 1;
      for (size_t i = loops.size(); i-- > first;) {
        if (loops[i].extent > 1) {
          env[loops[i].var] = loops[i].min + 1;
          KILN_USER_CHECK(eval(idx, env) - at0 == stride)
              << "vdla '" << f_.name << "': a " << what << " does not read and write its rows "
              << "contiguously (" << ir::to_string(idx) << ")";
          env[loops[i].var] = loops[i].min;
        }
        stride *= loops[i].extent;
      }
    }
    return first;
  }

  // ---- DMA ----

  struct CopyNest {
    std::vector<Loop> loops;
    ir::Var dst, src;
    Expr dst_index, src_index, cond;  ///< cond: where the value is read (else zero padding)
  };

  CopyNest copy_nest(const Stmt& body) {
    CopyNest c;
    Stmt inner;
    std::tie(c.loops, inner) = loop_nest(body, env_);
    auto st = inner.as<ir::StoreNode>();
    KILN_USER_CHECK(st) << "vdla '" << f_.name
                        << "': a dma_copy nest must be loops around one store, got\n"
                        << ir::to_string(body);
    c.dst = st->buffer_var;
    c.dst_index = st->index;
    Expr v = st->value;
    if (auto sel = v.as<ir::SelectNode>()) {
      Expr f = sel->false_value;
      if (auto cf = f.as<ir::CastNode>()) f = cf->value;
      KILN_USER_CHECK(ir::is_zero(f))
          << "vdla '" << f_.name << "': a dma_copy pads only with zeros, not "
          << ir::to_string(sel->false_value);
      c.cond = sel->condition;
      v = sel->true_value;
    }
    if (auto cast = v.as<ir::CastNode>()) v = cast->value;
    auto ld = v.as<ir::LoadNode>();
    KILN_USER_CHECK(ld) << "vdla '" << f_.name << "': a dma_copy must copy a tensor, not compute "
                        << ir::to_string(st->value);
    c.src = ld->buffer_var;
    c.src_index = ld->index;
    return c;
  }

  void dma(const Stmt& body) {
    CopyNest c = copy_nest(body);
    BufInfo& d = buf(c.dst);
    BufInfo& s = buf(c.src);
    const bool store = d.arg >= 0;
    KILN_USER_CHECK(store ? s.mem == kAcc : (s.arg >= 0 && d.mem >= 0))
        << "vdla '" << f_.name << "': a dma_copy from '" << s.name << "' to '" << d.name
        << "' must load a tensor into an SRAM scope or store local.acc_buffer to a tensor";
    BufInfo& sram = store ? s : d;
    BufInfo& dram = store ? d : s;
    // INP and WGT loads and stores move int8; an ACC load (bias, shift) moves int32 rows.
    const bool acc_load = !store && sram.mem == kAcc;
    KILN_USER_CHECK(dram.dtype == (acc_load ? ir::kInt32 : ir::kInt8))
        << "vdla '" << f_.name << "': tensor '" << dram.name << "' must be "
        << (acc_load ? "int32" : "int8") << " for a DMA " << (store ? "from" : "into") << " "
        << kMemScopes[sram.mem];
    KILN_USER_CHECK(!store || !c.cond.defined())
        << "vdla '" << f_.name << "': a store to '" << d.name << "' cannot pad";
    const int64_t epr = sram.epr;
    const Expr& sram_idx = store ? c.src_index : c.dst_index;
    const Expr& dram_idx = store ? c.dst_index : c.src_index;
    const size_t first = row_loops(c.loops, epr, {sram_idx, dram_idx}, "dma_copy");
    if (c.cond.defined()) {
      for (size_t i = first; i < c.loops.size(); ++i) {
        KILN_USER_CHECK(
            !ir::uses_var(c.cond, [&](const ir::VarNode* v) { return v == c.loops[i].var; }))
            << "vdla '" << f_.name << "': padding of '" << d.name << "' splits a row";
      }
    }
    for (size_t i = first; i < c.loops.size(); ++i) env_[c.loops[i].var] = c.loops[i].min;

    // The outer loops as dims; adjacent ones contiguous on both sides merge.
    struct Dim {
      std::vector<Loop> loops;
      int64_t extent, sram_step, dram_step;
    };
    auto at = [&](const Expr& idx) { return eval(idx, env_); };
    std::vector<Loop> outer(c.loops.begin(), c.loops.begin() + static_cast<long>(first));
    for (const Loop& l : outer) env_[l.var] = l.min;
    std::vector<Dim> dims;
    for (const Loop& l : outer) {
      const int64_t s0 = at(sram_idx), d0 = at(dram_idx);
      env_[l.var] = l.min + 1;
      Dim dim{{l}, l.extent, (at(sram_idx) - s0) / epr, (at(dram_idx) - d0) / epr};
      env_[l.var] = l.min;
      const bool padded = c.cond.defined() &&
                          ir::uses_var(c.cond, [&](const ir::VarNode* v) { return v == l.var; });
      if (!dims.empty() && !padded && dims.back().sram_step == dim.extent * dim.sram_step &&
          dims.back().dram_step == dim.extent * dim.dram_step && !dims.back().loops.empty()) {
        const bool prev_padded =
            c.cond.defined() && ir::uses_var(c.cond, [&](const ir::VarNode* v) {
              for (auto& pl : dims.back().loops)
                if (pl.var == v) return true;
              return false;
            });
        if (!prev_padded) {
          dims.back().loops.push_back(l);
          dims.back().extent *= l.extent;
          dims.back().sram_step = dim.sram_step;
          dims.back().dram_step = dim.dram_step;
          continue;
        }
      }
      dims.push_back(dim);
    }
    // A DMA's x moves through consecutive DRAM rows: when the innermost dim does not, x is one
    // row and that dim becomes y.
    if (dims.empty() || dims.back().dram_step != 1) dims.push_back(Dim{{}, 1, 0, 0});
    // Sets the loops of `dim` for its index i (mixed radix, last loop fastest).
    auto set_dim = [&](const Dim& dim, int64_t i) {
      for (size_t j = dim.loops.size(); j-- > 0;) {
        env_[dim.loops[j].var] = dim.loops[j].min + i % dim.loops[j].extent;
        i /= dim.loops[j].extent;
      }
    };
    const size_t nd = dims.size();
    const Dim one{{}, 1, 0, 0};
    const Dim& ydim = nd >= 2 ? dims[nd - 2] : one;
    const Dim& xdim = nd >= 1 ? dims[nd - 1] : one;
    const size_t nblock = nd >= 2 ? nd - 2 : 0;
    std::function<void(size_t)> blocks = [&](size_t i) {
      if (i < nblock) {
        for (int64_t v = 0; v < dims[i].extent; ++v) {
          set_dim(dims[i], v);
          blocks(i + 1);
        }
        return;
      }
      // One block: a grid of rows, each a DRAM row or padding.
      const int64_t Y = ydim.extent, X = xdim.extent;
      std::vector<int64_t> sram_row(static_cast<size_t>(Y * X)),
          dram_row(static_cast<size_t>(Y * X));
      for (int64_t y = 0; y < Y; ++y) {
        set_dim(ydim, y);
        for (int64_t x = 0; x < X; ++x) {
          set_dim(xdim, x);
          const size_t k = static_cast<size_t>(y * X + x);
          sram_row[k] = row_of(sram, at(sram_idx), "a dma_copy");
          const bool pad = c.cond.defined() && !eval(c.cond, env_);
          if (pad) {
            dram_row[k] = -1;
          } else {
            const int64_t e = at(dram_idx);
            KILN_USER_CHECK(e % epr == 0 && e >= 0 && e < dram.elems)
                << "vdla '" << f_.name << "': a dma_copy reads element " << e << " of '"
                << dram.name << "'";
            dram_row[k] = e / epr;
          }
        }
      }
      emit_dma(store, sram, dram, sram_row, dram_row, Y, X);
    };
    blocks(0);
    for (const Loop& l : c.loops) env_.erase(l.var);
  }

  /// DMAs for one grid of rows: one when its data is a rectangle with padding around it (within
  /// the 4-bit pads), else one per grid row, else one per row.
  void emit_dma(bool store, BufInfo& sram, BufInfo& dram, const std::vector<int64_t>& srow,
                const std::vector<int64_t>& drow, int64_t Y, int64_t X) {
    for (int64_t k = 1; k < Y * X; ++k) {
      KILN_USER_CHECK(srow[static_cast<size_t>(k)] == srow[0] + k)
          << "vdla '" << f_.name << "': a dma_copy does not fill consecutive rows of '" << sram.name
          << "'";
    }
    auto try_rect = [&](int64_t y_lo, int64_t y_hi) -> bool {
      int64_t y0 = -1, y1 = -1, x0 = -1, x1 = -1;
      for (int64_t y = y_lo; y < y_hi; ++y) {
        int64_t a = -1, b = -1;
        for (int64_t x = 0; x < X; ++x) {
          if (drow[static_cast<size_t>(y * X + x)] >= 0) {
            if (a < 0) a = x;
            b = x + 1;
          }
        }
        if (a < 0) continue;
        if (y0 < 0) {
          y0 = y;
          x0 = a;
          x1 = b;
        } else if (a != x0 || b != x1 || y1 != y) {
          return false;
        }
        y1 = y + 1;
      }
      if (y0 < 0) return false;
      const int64_t base = drow[static_cast<size_t>(y0 * X + x0)];
      const int64_t stride =
          y1 - y0 > 1 ? drow[static_cast<size_t>((y0 + 1) * X + x0)] - base : x1 - x0;
      for (int64_t y = y0; y < y1; ++y) {
        for (int64_t x = x0; x < x1; ++x) {
          if (drow[static_cast<size_t>(y * X + x)] != base + (y - y0) * stride + (x - x0))
            return false;
        }
      }
      const int64_t pads[4] = {x0, y0 - y_lo, X - x1, y_hi - y1};
      for (int64_t p : pads) {
        if (p > 15) return false;
      }
      if (store && (pads[0] || pads[1] || pads[2] || pads[3])) return false;
      if (stride < 0 || stride >= (int64_t{1} << 16) || x1 - x0 >= (int64_t{1} << 16)) return false;
      DmaCall d;
      d.store = store;
      d.mem = store              ? vdla::MemType::kAcc
              : sram.mem == kInp ? vdla::MemType::kInp
              : sram.mem == kWgt ? vdla::MemType::kWgt
                                 : vdla::MemType::kAcc;
      d.sram = static_cast<uint32_t>(srow[static_cast<size_t>(y_lo * X)]);
      d.arg = dram.arg;
      d.dram_row = static_cast<uint64_t>(base);
      d.x_size = static_cast<uint32_t>(x1 - x0);
      d.y_size = static_cast<uint32_t>(y1 - y0);
      d.x_stride = static_cast<uint32_t>(stride);
      d.x_pad0 = static_cast<uint32_t>(pads[0]);
      d.y_pad0 = static_cast<uint32_t>(pads[1]);
      d.x_pad1 = static_cast<uint32_t>(pads[2]);
      d.y_pad1 = static_cast<uint32_t>(pads[3]);
      Event e{
          store ? vdla::kStoreStage : (sram.mem == kAcc ? vdla::kComputeStage : vdla::kLoadStage),
          d,
          {},
          {}};
      const Access rows{sram.mem, d.sram, d.sram + (y_hi - y_lo) * X};
      (store ? e.reads : e.writes).push_back(rows);
      events_.push_back(std::move(e));
      return true;
    };
    if (try_rect(0, Y)) return;
    for (int64_t y = 0; y < Y; ++y) {
      KILN_USER_CHECK(try_rect(y, y + 1))
          << "vdla '" << f_.name << "': a dma_copy into '" << sram.name
          << "' has a row that is only padding or data the DMA cannot describe";
    }
  }

  // ---- ALU ----

  void alu(const Stmt& body) {
    auto [loops, inner] = loop_nest(body, env_);
    auto st = inner.as<ir::StoreNode>();
    KILN_USER_CHECK(st) << "vdla '" << f_.name
                        << "': an alu nest must be loops around one store, got\n"
                        << ir::to_string(body);
    const Expr& v = st->value;
    std::string what = ir::to_string(v);
    vdla::AluOp op = vdla::AluOp::kAdd;
    Expr a, b;
    using K = ir::ExprKind;
    switch (v.kind()) {
      case K::kMin:
        op = vdla::AluOp::kMin;
        break;
      case K::kMax:
        op = vdla::AluOp::kMax;
        break;
      case K::kAdd:
        op = vdla::AluOp::kAdd;
        break;
      case K::kMul:
        op = vdla::AluOp::kMul;
        break;
      case K::kShr:
        op = vdla::AluOp::kShr;
        break;
      default:
        KILN_USER_ERROR() << "vdla '" << f_.name << "': the ALU cannot compute " << what
                          << " (it has min, max, add, mul and shift_right)";
        break;
    }
    std::tie(a, b) = ir::binary_operands(v);
    if (!a.as<ir::LoadNode>() && op != vdla::AluOp::kShr) std::swap(a, b);
    auto la = a.as<ir::LoadNode>();
    KILN_USER_CHECK(la) << "vdla '" << f_.name << "': the ALU needs an accumulator operand in "
                        << what;
    bool use_imm = false;
    int64_t imm = 0;
    const ir::LoadNode* lb = b.as<ir::LoadNode>();
    if (!lb) {
      auto c = ir::as_const_int(b);
      KILN_USER_CHECK(c) << "vdla '" << f_.name << "': the ALU's second operand in " << what
                         << " must be a constant or an accumulator";
      imm = *c;
      use_imm = true;
      KILN_USER_CHECK(imm >= -32768 && imm <= 32767)
          << "vdla '" << f_.name << "': the ALU's immediate " << imm << " does not fit 16 bits";
    }
    BufInfo& dst = buf(st->buffer_var);
    BufInfo& src = buf(la->buffer_var);
    KILN_USER_CHECK(dst.mem == kAcc && src.mem == kAcc && (!lb || buf(lb->buffer_var).mem == kAcc))
        << "vdla '" << f_.name << "': the ALU works on local.acc_buffer, but " << what
        << " stored to '" << dst.name << "' is not all there";
    std::vector<Expr> idx = {st->index, la->index};
    if (lb) idx.push_back(lb->index);
    const size_t first = row_loops(loops, dst.epr, idx, "alu nest");
    for (size_t i = first; i < loops.size(); ++i) env_[loops[i].var] = loops[i].min;
    std::vector<Loop> outer(loops.begin(), loops.begin() + static_cast<long>(first));

    // In place: the result goes to the rows of the operand it overwrites.
    for (const Loop& l : outer) env_[l.var] = l.min;
    place(src);
    const int64_t src_row0 = src.base + eval(la->index, env_) / src.epr;
    if (dst.base < 0) {
      const int64_t rel = eval(st->index, env_) / dst.epr;
      KILN_USER_CHECK(src_row0 - rel >= 0)
          << "vdla '" << f_.name << "': cannot place '" << dst.name << "'";
      dst.base = src_row0 - rel;
    }
    KernelCall k;
    k.gemm = false;
    k.op = op;
    k.use_imm = use_imm;
    k.imm = static_cast<int32_t>(imm);
    fold(outer, &k, [&](const std::vector<Loop>& unrolled) {
      std::vector<vdla::Uop> out;
      std::function<void(size_t)> rec = [&](size_t i) {
        if (i == unrolled.size()) {
          vdla::Uop u;
          u.dst = static_cast<uint32_t>(row_of(dst, eval(st->index, env_), "an alu nest"));
          const int64_t sa = row_of(src, eval(la->index, env_), "an alu nest");
          KILN_USER_CHECK(sa == u.dst)
              << "vdla '" << f_.name << "': the ALU works in place, but '" << dst.name << "' and '"
              << src.name << "' are on different rows";
          u.src = lb ? static_cast<uint32_t>(
                           row_of(buf(lb->buffer_var), eval(lb->index, env_), "an alu nest"))
                     : u.dst;
          out.push_back(u);
          return;
        }
        for (int64_t x = unrolled[i].min; x < unrolled[i].min + unrolled[i].extent; ++x) {
          env_[unrolled[i].var] = x;
          rec(i + 1);
        }
        env_.erase(unrolled[i].var);
      };
      rec(0);
      return out;
    });
    for (const Loop& l : loops) env_.erase(l.var);
    check_uops(k, "ALU");
    k.signature = kernel_signature(k);
    const auto span = kernel_span(k);
    Event e{vdla::kComputeStage, DriverCall{}, {}, {}};
    e.writes.push_back({kAcc, span[0].first, span[0].second + 1});
    e.reads.push_back({kAcc, span[0].first, span[0].second + 1});
    e.reads.push_back({kAcc, span[1].first, span[1].second + 1});
    e.call = std::move(k);
    events_.push_back(std::move(e));
  }

  // ---- dependence tokens ----

  void plan_tokens() {
    const int n = static_cast<int>(events_.size());
    // need[e][t]: the last event of stage t (a neighbour of e's) that e must wait for, or -1.
    std::vector<std::array<int, 4>> need(static_cast<size_t>(n), {-1, -1, -1, -1});
    std::vector<std::array<bool, 4>> push_to(static_cast<size_t>(n), {false, false, false, false});
    std::array<std::vector<std::array<int, 4>>, kNumMem> last_write, last_read;
    for (int m = 0; m < kNumMem; ++m) {
      last_write[m].assign(static_cast<size_t>(depth_[m]), {-1, -1, -1, -1});
      last_read[m].assign(static_cast<size_t>(depth_[m]), {-1, -1, -1, -1});
    }
    for (int i = 0; i < n; ++i) {
      const Event& e = events_[static_cast<size_t>(i)];
      for (int t : {e.stage - 1, e.stage + 1}) {
        if (t < 1 || t > 3) continue;
        int a = -1;
        for (const Access& x : e.writes) {
          for (int64_t r = x.lo; r < x.hi; ++r) {
            a = std::max({a, last_write[x.mem][static_cast<size_t>(r)][t],
                          last_read[x.mem][static_cast<size_t>(r)][t]});
          }
        }
        for (const Access& x : e.reads) {
          for (int64_t r = x.lo; r < x.hi; ++r)
            a = std::max(a, last_write[x.mem][static_cast<size_t>(r)][t]);
        }
        need[static_cast<size_t>(i)][t] = a;
        if (a >= 0) push_to[static_cast<size_t>(a)][e.stage] = true;
      }
      for (const Access& x : e.writes) {
        for (int64_t r = x.lo; r < x.hi; ++r)
          last_write[x.mem][static_cast<size_t>(r)][e.stage] = i;
      }
      for (const Access& x : e.reads) {
        for (int64_t r = x.lo; r < x.hi; ++r) last_read[x.mem][static_cast<size_t>(r)][e.stage] = i;
      }
    }
    // Emission: pops before a step, pushes after; the k-th pop of a queue takes its k-th push.
    std::map<std::pair<int, int>, int64_t> pushed, popped;
    std::vector<std::array<int64_t, 4>> token(static_cast<size_t>(n), {-1, -1, -1, -1});
    for (int i = 0; i < n; ++i) {
      Event& e = events_[static_cast<size_t>(i)];
      for (int t = 1; t <= 3; ++t) {
        const int a = need[static_cast<size_t>(i)][t];
        if (a < 0) continue;
        const auto q = std::make_pair(t, e.stage);
        const int64_t want = token[static_cast<size_t>(a)][e.stage];
        KILN_ICHECK(want >= 0) << "vdla: a token was needed before it was pushed";
        while (popped[q] <= want) {
          program_.calls.emplace_back(std::in_place_type<TokenCall>, TokenCall{false, t, e.stage});
          ++popped[q];
        }
      }
      program_.calls.push_back(std::move(e.call));
      for (int t = 1; t <= 3; ++t) {
        if (!push_to[static_cast<size_t>(i)][t]) continue;
        const auto q = std::make_pair(e.stage, t);
        token[static_cast<size_t>(i)][t] = pushed[q]++;
        KILN_USER_CHECK(pushed[q] - popped[q] <= cfg_.token_depth)
            << "vdla '" << f_.name << "': more than " << cfg_.token_depth
            << " dependence tokens would wait in the " << e.stage << "->" << t
            << " queue; the stream could deadlock";
        program_.calls.emplace_back(std::in_place_type<TokenCall>, TokenCall{true, e.stage, t});
      }
    }
    for (auto& [q, count] : pushed) {
      for (int64_t k = popped[q]; k < count; ++k)
        program_.calls.emplace_back(std::in_place_type<TokenCall>,
                                    TokenCall{false, q.first, q.second});
    }
  }

  const ir::PrimFunc& f_;
  const vdla::Config& cfg_;
  VdlaProgram program_;
  Env env_;
  std::unordered_map<const ir::VarNode*, BufInfo> bufs_;
  std::unordered_map<const ir::StmtNode*, int> gemm_mode_;
  std::array<int64_t, kNumMem> depth_{}, epr_{}, next_{};
  std::vector<Event> events_;
};

}  // namespace

VdlaProgram build_program(const ir::PrimFunc& f, const vdla::Config& cfg) {
  return Builder(f, cfg).build();
}

VdlaProgram build_vdla(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                       const std::string& name, const vdla::Config& cfg) {
  return build_program(compiler::lower_vdla(sch, args, name), cfg);
}

}  // namespace kiln::vdla_compiler
