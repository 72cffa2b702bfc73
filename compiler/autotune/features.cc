// Features of lowered loop programs (layout in features.h).
#include "compiler/autotune/features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"

namespace kiln::autotune {
namespace {

static_assert(kLoopFeatureLength == 146, "update the layout in features.h");

using ir::Expr;
using ir::ExprKind;
using ir::ForKind;

float lg(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

/// A constant upper bound of a loop extent, or -1 when none is visible.
int64_t const_upper(const Expr& e) {
  if (!e.defined()) return -1;
  if (auto* i = e.as<ir::IntImmNode>()) return i->value;
  if (auto* c = e.as<ir::CastNode>()) return const_upper(c->value);
  if (auto* m = e.as<ir::MinNode>()) {
    int64_t a = const_upper(m->a), b = const_upper(m->b);
    if (a >= 0 && b >= 0) return std::min(a, b);
    return std::max(a, b);
  }
  return -1;
}

struct Loop {
  const ir::VarNode* var = nullptr;  // null for the vector lanes of a vector store
  int64_t extent = 1;
  ForKind kind = ForKind::kSerial;
};

using LetMap = std::unordered_map<const ir::VarNode*, Expr>;

/// The linear coefficient of loop variable v in index e (in elements): exact for sums and products
/// by constants, coef/c for divisions by a constant c, the dividend's coefficient for remainders,
/// the larger one for min/max/select, 1 for an indirect (loaded) index that depends on v.
double coef(const Expr& e, const ir::VarNode* v, const LetMap& lets, int depth = 0) {
  if (!e.defined() || depth > 64) return 0;
  auto imm = [](const Expr& x) -> const ir::IntImmNode* { return x.as<ir::IntImmNode>(); };
  auto larger = [](double a, double b) { return std::abs(a) >= std::abs(b) ? a : b; };
  switch (e.kind()) {
    case ExprKind::kVar: {
      if (e.get() == v) return 1;
      auto it = lets.find(static_cast<const ir::VarNode*>(e.get()));
      return it == lets.end() ? 0 : coef(it->second, v, lets, depth + 1);
    }
    case ExprKind::kCast:
      return coef(e.as<ir::CastNode>()->value, v, lets, depth + 1);
    case ExprKind::kAdd: {
      auto* op = e.as<ir::AddNode>();
      return coef(op->a, v, lets, depth + 1) + coef(op->b, v, lets, depth + 1);
    }
    case ExprKind::kSub: {
      auto* op = e.as<ir::SubNode>();
      return coef(op->a, v, lets, depth + 1) - coef(op->b, v, lets, depth + 1);
    }
    case ExprKind::kMul: {
      auto* op = e.as<ir::MulNode>();
      if (auto* c = imm(op->b)) return coef(op->a, v, lets, depth + 1) * double(c->value);
      if (auto* c = imm(op->a)) return coef(op->b, v, lets, depth + 1) * double(c->value);
      return coef(op->a, v, lets, depth + 1) + coef(op->b, v, lets, depth + 1);  // not linear
    }
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv: {
      const auto [a, b] = ir::binary_operands(e);
      const double ca = coef(a, v, lets, depth + 1);
      auto* c = imm(b);
      return c && c->value != 0 ? ca / double(c->value) : ca;
    }
    case ExprKind::kMod:
    case ExprKind::kFloorMod:
      return coef(ir::binary_operands(e).first, v, lets, depth + 1);
    case ExprKind::kMin:
    case ExprKind::kMax: {
      const auto [a, b] = ir::binary_operands(e);
      return larger(coef(a, v, lets, depth + 1), coef(b, v, lets, depth + 1));
    }
    case ExprKind::kSelect: {
      auto* op = e.as<ir::SelectNode>();
      return larger(coef(op->true_value, v, lets, depth + 1),
                    coef(op->false_value, v, lets, depth + 1));
    }
    case ExprKind::kRamp:
      return coef(e.as<ir::RampNode>()->base, v, lets, depth + 1);
    case ExprKind::kBroadcast:
      return coef(e.as<ir::BroadcastNode>()->value, v, lets, depth + 1);
    case ExprKind::kLoad:
      return coef(e.as<ir::LoadNode>()->index, v, lets, depth + 1) != 0 ? 1 : 0;
    case ExprKind::kLet:
      return coef(e.as<ir::LetNode>()->body, v, lets, depth + 1);
    default:
      return 0;
  }
}

struct StoreRecord {
  const ir::StoreNode* op = nullptr;
  std::vector<Loop> loops;  // outermost first
  const ir::ForNode* innermost = nullptr;
  double trips = 1;
};

/// One walk: the trip-count weighted operation counts and every store with its loops.
class Walker : public ir::IRVisitor {
 public:
  double prog[kProgramFeatures] = {};
  double gpu[kGpuFeatures] = {};
  double float_ops = 0, vector_float_ops = 0;
  std::vector<StoreRecord> stores;
  std::unordered_map<const ir::ForNode*, double> stores_in_loop;
  LetMap lets;

  using IRVisitor::visit;
  using IRVisitor::visit_;

  void visit_(const ir::ForNode* op) override {
    int64_t ext = const_upper(op->extent);
    if (ext <= 0) ext = 1;
    if (op->for_kind == ForKind::kUnrolled && ir::as_const_int(op->extent).has_value()) {
      // What unroll_loops makes of it: `ext` copies of the body, no loop.
      const double saved = mult_, saved_copies = copies_, saved_inner = inner_copies_;
      mult_ *= double(ext);
      copies_ *= double(ext);
      inner_copies_ *= double(ext);
      visit(op->body);
      mult_ = saved;
      copies_ = saved_copies;
      inner_copies_ = saved_inner;
      return;
    }
    prog[kLoopCount] += copies_;
    if (op->for_kind == ForKind::kParallel && parallel_depth_ == 0)
      prog[kParallelTasks] = std::max(prog[kParallelTasks], double(ext));
    if (op->for_kind == ForKind::kParallel) ++parallel_depth_;
    loops_.push_back(Loop{op->loop_var.get(), ext, op->for_kind});
    fors_.push_back(op);
    prog[kMaxDepth] = std::max(prog[kMaxDepth], double(loops_.size()));
    double saved = mult_, saved_inner = inner_copies_;
    mult_ *= double(ext);
    inner_copies_ = 1;  // each copy of this loop has its own body
    visit(op->body);
    mult_ = saved;
    inner_copies_ = saved_inner;
    loops_.pop_back();
    fors_.pop_back();
    if (op->for_kind == ForKind::kParallel) --parallel_depth_;
  }
  void visit_(const ir::LetStmtNode* op) override {
    lets[op->var.get()] = op->value;
    visit(op->value);
    visit(op->body);
  }
  void visit_(const ir::StoreNode* op) override {
    int lanes = op->value.dtype().lanes();
    prog[kStoreCount] += copies_;
    prog[kElemsStored] += mult_ * lanes;
    prog[kStoreInstrs] += mult_;
    prog[kBytesStored] += mult_ * lanes * op->value.dtype().bytes();
    prog[kTotalTrips] += mult_;
    StoreRecord r;
    r.op = op;
    r.loops = loops_;
    r.innermost = fors_.empty() ? nullptr : fors_.back();
    r.trips = mult_ / copies_;  // of one copy
    stores.push_back(std::move(r));
    stores_in_loop[fors_.empty() ? nullptr : fors_.back()] += inner_copies_;
    visit(op->value);
    visit(op->index);
    visit(op->predicate);
  }
  void visit_(const ir::LoadNode* op) override {
    int lanes = op->dtype.lanes();
    prog[kElemsLoaded] += mult_ * lanes;
    prog[kLoadInstrs] += mult_;
    prog[kBytesLoaded] += mult_ * lanes * op->dtype.bytes();
    visit(op->index);
    visit(op->predicate);
  }
  void visit_(const ir::AllocateNode* op) override {
    prog[kAllocCount] += copies_;
    double n = op->dtype.bytes() * op->dtype.lanes();
    for (auto& e : op->extents) {
      int64_t c = const_upper(e);
      n *= double(c > 0 ? c : 1);
    }
    n *= copies_;  // each copy of an unrolled loop's body allocates its own
    prog[kAllocBytes] += n;
    if (op->scope == "shared") kernel_shared_ += n;
    if (op->scope == "local") kernel_local_ += n;
    visit(op->body);
  }
  /// A thread binding: the outermost one of a kernel opens it; its extents, blocks, threads and
  /// memory are the largest over the kernels.
  void visit_(const ir::AttrStmtNode* op) override {
    const auto iv = std::dynamic_pointer_cast<const ir::IterVarNode>(op->node);
    if (op->key != "thread_extent" || !iv) return IRVisitor::visit_(op);
    static const char* const kTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                        "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    const bool opens_kernel = kernel_extents_.empty();
    if (opens_kernel) {
      ++gpu[kKernels];
      kernel_shared_ = kernel_local_ = 0;
    }
    for (int k = 0; k < 6; ++k) {
      if (iv->thread_tag == kTags[k]) {
        const int64_t e = const_upper(op->value);
        kernel_extents_[k] = double(e > 0 ? e : 1);
      }
    }
    visit(op->value);
    visit(op->body);
    if (!opens_kernel) return;
    double blocks = 1, threads = 1;
    for (int k = 0; k < 6; ++k) {
      const double e = kernel_extents_.count(k) ? kernel_extents_[k] : 1;
      gpu[k] = std::max(gpu[k], e);
      (k < 3 ? blocks : threads) *= e;
    }
    gpu[kThreadsPerBlock] = std::max(gpu[kThreadsPerBlock], threads);
    gpu[kBlocks] = std::max(gpu[kBlocks], blocks);
    gpu[kSharedBytes] = std::max(gpu[kSharedBytes], kernel_shared_);
    gpu[kLocalBytes] = std::max(gpu[kLocalBytes], kernel_local_);
    kernel_extents_.clear();
  }
  void visit_(const ir::IfThenElseNode* op) override {
    prog[kConditionals] += mult_;
    visit(op->condition);
    visit(op->then_case);
    visit(op->else_case);
  }

  // Arithmetic: float ops by class (lanes-weighted), integer ops, math calls.
  void visit_(const ir::AddNode* op) override {
    if (op->dtype.is_float()) {
      const ir::MulNode* m = op->a.as<ir::MulNode>();
      Expr other = op->b;
      if (!m) {
        m = op->b.as<ir::MulNode>();
        other = op->a;
      }
      if (m && m->dtype.is_float()) {
        count(op->dtype, kFloatFma);
        visit(m->a);
        visit(m->b);
        visit(other);
        return;
      }
    }
    arith(op->dtype, kFloatAddSub);
    IRVisitor::visit_(op);
  }
  void visit_(const ir::SubNode* op) override {
    arith(op->dtype, kFloatAddSub), IRVisitor::visit_(op);
  }
  void visit_(const ir::MulNode* op) override {
    arith(op->dtype, kFloatMul), IRVisitor::visit_(op);
  }
  void visit_(const ir::DivNode* op) override {
    arith(op->dtype, kFloatDiv), IRVisitor::visit_(op);
  }
  void visit_(const ir::ModNode* op) override {
    arith(op->dtype, kFloatDiv), IRVisitor::visit_(op);
  }
  void visit_(const ir::FloorDivNode* op) override {
    arith(op->dtype, kFloatDiv), IRVisitor::visit_(op);
  }
  void visit_(const ir::FloorModNode* op) override {
    arith(op->dtype, kFloatDiv), IRVisitor::visit_(op);
  }
  void visit_(const ir::ShrNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::MinNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::MaxNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::EQNode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::NENode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::LTNode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::LENode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::GTNode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::GENode* op) override { cmp(op->a), IRVisitor::visit_(op); }
  void visit_(const ir::AndNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::OrNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::SelectNode* op) override {
    arith(op->dtype, kFloatOther), IRVisitor::visit_(op);
  }
  void visit_(const ir::CallNode* op) override {
    if (op->name == "kiln.storage_sync") gpu[kBarriers] += mult_;
    if (op->dtype.is_float()) {
      if (op->name == "fma")
        count(op->dtype, kFloatFma);
      else if (op->call_kind == ir::CallKind::kPureIntrinsic)
        count(op->dtype, kMathCalls);
    }
    IRVisitor::visit_(op);
  }

 private:
  /// A float op of class `k`, or an integer op.
  void arith(const ir::DataType& t, int k) {
    if (t.is_float())
      count(t, k);
    else
      prog[kIntOps] += mult_ * t.lanes();
  }
  void cmp(const Expr& operand) { arith(operand.dtype(), kFloatOther); }
  void count(const ir::DataType& t, int k) {
    double n = mult_ * t.lanes();
    prog[k] += n;
    if (k != kMathCalls) {
      float_ops += n;
      if (t.lanes() > 1) vector_float_ops += n;
    }
  }

  std::vector<Loop> loops_;
  std::vector<const ir::ForNode*> fors_;
  double mult_ = 1;
  /// The copies unroll_loops would make of the statement being visited: the product of the
  /// constant extents of the unrolled loops around it (which are then not loops).
  double copies_ = 1;
  double inner_copies_ = 1;  ///< those of them inside the innermost loop around it
  int parallel_depth_ = 0;
  std::map<int, double> kernel_extents_;         ///< the open kernel's thread extents, by tag
  double kernel_shared_ = 0, kernel_local_ = 0;  ///< the open kernel's allocations, bytes
};

/// One buffer as the main statement accesses it.
struct BufferAccess {
  const ir::VarNode* buf = nullptr;
  double bytes_all = 0, bytes_inner = 0;
  double stride[kStrideLoops] = {};
  double reuse = 1;
  bool vector = false, read = false, write = false;
  int count = 0;
};

}  // namespace

std::vector<float> loop_features(const ir::PrimFunc& f) {
  std::vector<float> out(kLoopFeatureLength, 0.0f);
  Walker w;
  w.visit(f.body);

  float* prog = out.data() + kProgramOffset;
  for (int i = 0; i < kProgramFeatures; ++i) prog[i] = lg(w.prog[i]);
  for (int i = 0; i < kGpuFeatures; ++i) out[kGpuOffset + i] = lg(w.gpu[i]);
  prog[kVectorFraction] = w.float_ops > 0 ? float(w.vector_float_ops / w.float_ops) : 0.0f;
  prog[kMaxDepth] = float(w.prog[kMaxDepth]);
  if (w.stores.empty()) return out;

  // The main statement: the largest trip count, the first of equals.
  const StoreRecord* main = &w.stores[0];
  for (auto& r : w.stores)
    if (r.trips > main->trips) main = &r;
  const ir::StoreNode* st = main->op;
  const int lanes = st->value.dtype().lanes();

  // Its loops, innermost first; a vector store's lanes are an innermost vectorized loop.
  std::vector<Loop> loops;
  if (lanes > 1) loops.push_back(Loop{nullptr, lanes, ForKind::kVectorized});
  for (auto it = main->loops.rbegin(); it != main->loops.rend(); ++it) loops.push_back(*it);
  const int n = static_cast<int>(loops.size());
  std::vector<double> inner_prod(n + 1, 1.0);  // inner_prod[i]: product of levels [0, i)
  for (int i = 0; i < n; ++i) inner_prod[i + 1] = inner_prod[i] * double(loops[i].extent);
  for (int i = 0; i < std::min(n, kMaxLoops); ++i) {
    float* l = out.data() + kLoopOffset + i * kLoopLevelFeatures;
    l[0] = lg(double(loops[i].extent));
    l[1 + static_cast<int>(loops[i].kind)] = 1.0f;  // serial, parallel, vectorized, unrolled
    l[5] = lg(inner_prod[i + 1]);
    l[6] = lg(inner_prod[n] / inner_prod[i + 1]);
    l[7] = 1.0f;
  }

  // Its accesses: the store and every load of its value, grouped by buffer.
  struct Raw {
    const ir::VarNode* buf;
    Expr index;
    int elem_bytes;
    bool write;
  };
  std::vector<Raw> raws{{st->buffer_var.get(), st->index, st->value.dtype().bytes(), true}};
  int value_ops = 0;
  ir::post_order_visit(st->value, [&](const ir::Object* o) {
    auto* e = static_cast<const ir::ExprNode*>(o);
    switch (e->kind) {
      case ExprKind::kLoad: {
        auto* ld = static_cast<const ir::LoadNode*>(e);
        raws.push_back(Raw{ld->buffer_var.get(), ld->index, ld->dtype.bytes(), false});
        break;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul:
      case ExprKind::kDiv:
      case ExprKind::kMod:
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod:
      case ExprKind::kShr:
      case ExprKind::kMin:
      case ExprKind::kMax:
      case ExprKind::kSelect:
      case ExprKind::kCall:
        ++value_ops;
        break;
      default:
        break;
    }
  });

  std::vector<BufferAccess> bufs;
  for (auto& r : raws) {
    BufferAccess a;
    a.buf = r.buf;
    const ir::RampNode* ramp = r.index.as<ir::RampNode>();
    a.vector = ramp != nullptr;
    double elems_all = 1, elems_inner = 1;
    for (int i = 0; i < n; ++i) {
      double c;
      if (loops[i].var == nullptr) {  // the vector lanes
        c = 0;
        if (ramp) {
          auto* s = ramp->stride.as<ir::IntImmNode>();
          c = s ? double(s->value) : 1.0;
        }
      } else {
        c = coef(r.index, loops[i].var, w.lets);
      }
      double ext = double(loops[i].extent);
      double touched = c == 0 ? 1.0 : std::max(1.0, ext * std::min(1.0, std::abs(c)));
      elems_all *= touched;
      if (i < kStrideLoops) {
        elems_inner *= touched;
        a.stride[i] = std::abs(c);
      }
      if (c == 0) a.reuse *= ext;
    }
    a.bytes_all = elems_all * r.elem_bytes;
    a.bytes_inner = elems_inner * r.elem_bytes;
    auto it = std::find_if(bufs.begin(), bufs.end(),
                           [&](const BufferAccess& b) { return b.buf == r.buf; });
    if (it == bufs.end()) {
      a.read = !r.write;
      a.write = r.write;
      a.count = 1;
      bufs.push_back(a);
    } else {
      // Keep the widest footprint; merge the flags.
      bool read = it->read || !r.write, write = it->write || r.write, vec = it->vector || a.vector;
      int count = it->count + 1;
      if (a.bytes_all > it->bytes_all) *it = a;
      it->read = read;
      it->write = write;
      it->vector = vec;
      it->count = count;
    }
  }
  int reads = 0;
  for (auto& b : bufs) reads += b.read ? 1 : 0;
  std::stable_sort(bufs.begin(), bufs.end(), [](const BufferAccess& a, const BufferAccess& b) {
    return a.bytes_all > b.bytes_all;
  });
  for (int i = 0; i < std::min<int>(int(bufs.size()), kMaxBuffers); ++i) {
    const BufferAccess& b = bufs[i];
    float* v = out.data() + kBufferOffset + i * kBufferFeatures;
    v[0] = lg(b.bytes_all);
    v[1] = lg(b.bytes_inner);
    for (int k = 0; k < kStrideLoops; ++k) v[2 + k] = lg(b.stride[k]);
    v[5] = lg(b.reuse);
    v[6] = b.vector ? 1.0f : 0.0f;
    v[7] = b.read ? 1.0f : 0.0f;
    v[8] = b.write ? 1.0f : 0.0f;
    v[9] = lg(double(b.count));
  }

  float* s = out.data() + kStmtOffset;
  s[0] = lg(main->trips);
  s[1] = lg(double(w.stores_in_loop[main->innermost]));
  s[2] = float(std::log2(double(lanes)));
  s[3] = float(main->loops.size());
  s[4] = lg(double(value_ops));
  s[5] = lg(double(reads));
  return out;
}

std::vector<float> knob_features(const space::ConfigSpace& space, const space::Config& cfg) {
  const auto& knobs = space.knobs();
  KILN_USER_CHECK(cfg.positions().size() == knobs.size())
      << "knob_features: the config has " << cfg.positions().size() << " knobs, the space "
      << knobs.size();
  std::vector<float> out;
  for (size_t i = 0; i < knobs.size(); ++i) {
    int p = cfg.positions()[i];
    KILN_USER_CHECK(p >= 0 && size_t(p) < knobs[i].candidates.size())
        << "knob_features: knob '" << knobs[i].name << "' has no candidate " << p;
    const auto& values = knobs[i].candidates[size_t(p)];
    if (knobs[i].kind == space::KnobKind::kSplit) {
      for (int64_t v : values)
        out.push_back(static_cast<float>(std::log2(double(std::max<int64_t>(v, 1)))));
    } else {
      for (int64_t v : values) out.push_back(v >= 0 ? lg(double(v)) : static_cast<float>(v));
    }
  }
  return out;
}

}  // namespace kiln::autotune
