// Expression and statement constructors with type promotion and integer constant folding.
#include "compiler/ir/op.h"

#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/int_math.h"

namespace kiln::ir {

Expr::Expr(int value) : node_(std::make_shared<IntImmNode>(kInt32, value)) {}
Expr::Expr(int64_t value) : node_(std::make_shared<IntImmNode>(kInt64, value)) {}
Expr::Expr(float value) : node_(std::make_shared<FloatImmNode>(kFloat32, value)) {}
Expr::Expr(double value) : node_(std::make_shared<FloatImmNode>(kFloat32, value)) {}

namespace {

/// Wraps an integer to the width of `t` (two's complement), as the machine would.
int64_t wrap_int(DataType t, int64_t v) {
  if (t.is_bool()) return v != 0;
  if (t.bits() >= 64) return v;
  const uint64_t mask = (uint64_t{1} << t.bits()) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t.is_int() && (u >> (t.bits() - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

template <typename N, typename... Args>
Expr make(Args&&... args) {
  return Expr(std::make_shared<N>(std::forward<Args>(args)...));
}

template <typename N, typename... Args>
Stmt make_stmt(Args&&... args) {
  return Stmt(std::make_shared<N>(std::forward<Args>(args)...));
}

bool is_const(const Expr& e) { return e.as<IntImmNode>() || e.as<FloatImmNode>(); }

/// Brings a and b to one type: literals adopt the other side's type, int meets float as float,
/// narrower ints widen, and scalars are broadcast to vectors.
void unify(const char* op, Expr& a, Expr& b) {
  KILN_USER_CHECK(a.defined() && b.defined()) << op << ": an operand is undefined";
  DataType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) return;
  if (ta.lanes() != tb.lanes()) {
    if (ta.lanes() == 1) {
      a = broadcast(cast(tb.element_of(), a), tb.lanes());
      ta = a.dtype();
    } else if (tb.lanes() == 1) {
      b = broadcast(cast(ta.element_of(), b), ta.lanes());
      tb = b.dtype();
    } else {
      KILN_USER_ERROR() << op << ": operands have different vector lanes (" << ta.str() << " and "
                        << tb.str() << ")";
    }
    if (ta == tb) return;
  }
  if (is_const(b) && !is_const(a)) {
    b = cast(ta, b);
  } else if (is_const(a) && !is_const(b)) {
    a = cast(tb, a);
  } else if (ta.is_float() && !tb.is_float()) {
    b = cast(ta, b);
  } else if (tb.is_float() && !ta.is_float()) {
    a = cast(tb, a);
  } else if (ta.code() == tb.code() || (ta.is_integral() && tb.is_integral())) {
    // Same family, different widths: widen the narrower one.
    if (ta.bits() < tb.bits())
      a = cast(tb, a);
    else
      b = cast(ta, b);
  } else {
    KILN_USER_ERROR() << op << ": cannot combine " << ta.str() << " and " << tb.str();
  }
}

template <typename F>
Expr fold_int(const Expr& a, const Expr& b, F f) {
  auto x = a.as<IntImmNode>();
  auto y = b.as<IntImmNode>();
  if (x && y) return make_const(a.dtype(), f(x->value, y->value));
  return Expr();
}

template <typename F>
Expr fold_float(const Expr& a, const Expr& b, F f) {
  auto x = a.as<FloatImmNode>();
  auto y = b.as<FloatImmNode>();
  if (x && y) return make_const(a.dtype(), f(x->value, y->value));
  return Expr();
}

Expr compare(const char* op, ExprKind kind, Expr a, Expr b) {
  unify(op, a, b);
  DataType t = DataType::Bool(a.dtype().lanes());
  auto x = as_const_int(a), y = as_const_int(b);
  auto fx = as_const_float(a), fy = as_const_float(b);
  std::optional<double> l = x ? std::optional<double>(*x) : fx;
  std::optional<double> r = y ? std::optional<double>(*y) : fy;
  if (l && r && a.dtype().is_scalar()) {
    bool v = false;
    switch (kind) {
      case ExprKind::kEQ:
        v = *l == *r;
        break;
      case ExprKind::kNE:
        v = *l != *r;
        break;
      case ExprKind::kLT:
        v = *l < *r;
        break;
      case ExprKind::kLE:
        v = *l <= *r;
        break;
      case ExprKind::kGT:
        v = *l > *r;
        break;
      case ExprKind::kGE:
        v = *l >= *r;
        break;
      default:
        KILN_UNREACHABLE();
    }
    return make_const(t, int64_t{v});
  }
  switch (kind) {
    case ExprKind::kEQ:
      return make<EQNode>(t, a, b);
    case ExprKind::kNE:
      return make<NENode>(t, a, b);
    case ExprKind::kLT:
      return make<LTNode>(t, a, b);
    case ExprKind::kLE:
      return make<LENode>(t, a, b);
    case ExprKind::kGT:
      return make<GTNode>(t, a, b);
    case ExprKind::kGE:
      return make<GENode>(t, a, b);
    default:
      KILN_UNREACHABLE();
  }
}

Expr float_math(const char* name, Expr x) {
  KILN_USER_CHECK(x.defined()) << name << ": operand is undefined";
  if (!x.dtype().is_float()) x = cast(DataType::Float(32, x.dtype().lanes()), x);
  return call(x.dtype(), name, {x}, CallKind::kPureIntrinsic);
}

template <typename N>
std::pair<const Expr&, const Expr&> operands_of(const Expr& e) {
  auto n = static_cast<const N*>(e.get());
  return {n->a, n->b};
}

}  // namespace

std::pair<const Expr&, const Expr&> binary_operands(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::kAdd:
      return operands_of<AddNode>(e);
    case ExprKind::kSub:
      return operands_of<SubNode>(e);
    case ExprKind::kMul:
      return operands_of<MulNode>(e);
    case ExprKind::kDiv:
      return operands_of<DivNode>(e);
    case ExprKind::kMod:
      return operands_of<ModNode>(e);
    case ExprKind::kFloorDiv:
      return operands_of<FloorDivNode>(e);
    case ExprKind::kFloorMod:
      return operands_of<FloorModNode>(e);
    case ExprKind::kShr:
      return operands_of<ShrNode>(e);
    case ExprKind::kMin:
      return operands_of<MinNode>(e);
    case ExprKind::kMax:
      return operands_of<MaxNode>(e);
    case ExprKind::kEQ:
      return operands_of<EQNode>(e);
    case ExprKind::kNE:
      return operands_of<NENode>(e);
    case ExprKind::kLT:
      return operands_of<LTNode>(e);
    case ExprKind::kLE:
      return operands_of<LENode>(e);
    case ExprKind::kGT:
      return operands_of<GTNode>(e);
    case ExprKind::kGE:
      return operands_of<GENode>(e);
    case ExprKind::kAnd:
      return operands_of<AndNode>(e);
    case ExprKind::kOr:
      return operands_of<OrNode>(e);
    default:
      KILN_UNREACHABLE() << "not a binary node";
  }
}

Expr make_const(DataType t, int64_t value) {
  if (t.is_float()) return make_const(t, static_cast<double>(value));
  if (t.lanes() > 1) return broadcast(make_const(t.element_of(), value), t.lanes());
  return make<IntImmNode>(t, wrap_int(t, value));
}

Expr make_const(DataType t, double value) {
  if (!t.is_float()) return make_const(t, static_cast<int64_t>(value));
  if (t.lanes() > 1) return broadcast(make_const(t.element_of(), value), t.lanes());
  if (t.bits() == 32) value = static_cast<float>(value);
  return make<FloatImmNode>(t, value);
}

Expr make_zero(DataType t) { return make_const(t, int64_t{0}); }
Expr make_one(DataType t) { return make_const(t, int64_t{1}); }
Expr make_string(std::string value) { return make<StringImmNode>(std::move(value)); }
Expr const_true(int lanes) { return make_const(DataType::Bool(lanes), int64_t{1}); }
Expr const_false(int lanes) { return make_const(DataType::Bool(lanes), int64_t{0}); }

std::optional<int64_t> as_const_int(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (auto i = e.as<IntImmNode>()) return i->value;
  if (auto b = e.as<BroadcastNode>()) return as_const_int(b->value);
  return std::nullopt;
}

std::optional<double> as_const_float(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (auto f = e.as<FloatImmNode>()) return f->value;
  if (auto b = e.as<BroadcastNode>()) return as_const_float(b->value);
  return std::nullopt;
}

bool is_const_int(const Expr& e, int64_t value) {
  auto v = as_const_int(e);
  return v && *v == value;
}

Expr max_value(DataType t) {
  if (t.is_float()) {
    return make_const(t, t.bits() == 16
                             ? 65504.0
                             : (t.bits() == 32 ? double{std::numeric_limits<float>::infinity()}
                                               : std::numeric_limits<double>::infinity()));
  }
  if (t.is_bool()) return make_const(t, int64_t{1});
  if (t.is_uint())
    return make_const(t, t.bits() >= 64 ? int64_t{-1} : (int64_t{1} << t.bits()) - 1);
  return make_const(
      t, t.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits() - 1)) - 1);
}

Expr min_value(DataType t) {
  if (t.is_float()) {
    return make_const(t, t.bits() == 16 ? -65504.0 : -std::numeric_limits<double>::infinity());
  }
  if (t.is_bool() || t.is_uint()) return make_const(t, int64_t{0});
  return make_const(
      t, t.bits() >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits() - 1)));
}

Expr cast(DataType t, Expr value) {
  KILN_USER_CHECK(value.defined()) << "cast to " << t.str() << ": value is undefined";
  if (value.dtype() == t) return value;
  if (t.lanes() > 1 && value.dtype().lanes() == 1)
    return broadcast(cast(t.element_of(), value), t.lanes());
  KILN_USER_CHECK(t.lanes() == value.dtype().lanes())
      << "cast from " << value.dtype().str() << " to " << t.str() << " changes the number of lanes";
  if (t.is_scalar()) {
    if (auto i = value.as<IntImmNode>()) return make_const(t, i->value);
    if (auto f = value.as<FloatImmNode>()) return make_const(t, f->value);
  }
  if (auto b = value.as<BroadcastNode>())
    return broadcast(cast(t.element_of(), b->value), t.lanes());
  return make<CastNode>(t, value);
}

Expr operator+(Expr a, Expr b) {
  unify("+", a, b);
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x + y; }); f.defined()) return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return x + y; }); f.defined()) return f;
  if (is_zero(b) && a.dtype().is_integral()) return a;
  if (is_zero(a) && a.dtype().is_integral()) return b;
  return make<AddNode>(a.dtype(), a, b);
}

Expr operator-(Expr a, Expr b) {
  unify("-", a, b);
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x - y; }); f.defined()) return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return x - y; }); f.defined()) return f;
  if (is_zero(b) && a.dtype().is_integral()) return a;
  return make<SubNode>(a.dtype(), a, b);
}

Expr operator-(Expr a) {
  if (auto i = a.as<IntImmNode>()) return make_const(a.dtype(), -i->value);
  if (auto f = a.as<FloatImmNode>()) return make_const(a.dtype(), -f->value);
  return make_zero(a.dtype()) - a;
}

Expr operator*(Expr a, Expr b) {
  unify("*", a, b);
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x * y; }); f.defined()) return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return x * y; }); f.defined()) return f;
  if (a.dtype().is_integral()) {
    if (is_one(b)) return a;
    if (is_one(a)) return b;
    if (is_zero(a) || is_zero(b)) return make_zero(a.dtype());
  }
  return make<MulNode>(a.dtype(), a, b);
}

Expr operator/(Expr a, Expr b) {
  unify("/", a, b);
  if (auto y = as_const_int(b); y && *y == 0 && b.dtype().is_integral()) {
    KILN_USER_ERROR() << "division by the constant zero";
  }
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x / y; }); f.defined()) return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return x / y; }); f.defined()) return f;
  if (is_one(b) && a.dtype().is_integral()) return a;
  return make<DivNode>(a.dtype(), a, b);
}

Expr operator%(Expr a, Expr b) {
  unify("%", a, b);
  if (auto y = as_const_int(b); y && *y == 0) KILN_USER_ERROR() << "modulo by the constant zero";
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x % y; }); f.defined()) return f;
  if (is_one(b)) return make_zero(a.dtype());
  return make<ModNode>(a.dtype(), a, b);
}

Expr floordiv(Expr a, Expr b) {
  unify("floordiv", a, b);
  if (a.dtype().is_float()) return floor(a / b);
  if (auto y = as_const_int(b); y && *y == 0) KILN_USER_ERROR() << "floordiv by the constant zero";
  if (auto f = fold_int(a, b, floor_div); f.defined()) return f;
  if (is_one(b)) return a;
  return make<FloorDivNode>(a.dtype(), a, b);
}

Expr floormod(Expr a, Expr b) {
  unify("floormod", a, b);
  if (auto y = as_const_int(b); y && *y == 0) KILN_USER_ERROR() << "floormod by the constant zero";
  if (auto f = fold_int(a, b, floor_mod); f.defined()) return f;
  if (is_one(b)) return make_zero(a.dtype());
  return make<FloorModNode>(a.dtype(), a, b);
}

Expr shift_right(Expr a, Expr b) {
  unify("shift_right", a, b);
  KILN_USER_CHECK(!a.dtype().is_float())
      << "shift_right of " << a.dtype().str() << ": integers only";
  if (auto y = as_const_int(b)) {
    KILN_USER_CHECK(*y >= 0 && *y < a.dtype().bits())
        << "shift_right by " << *y << ": out of range for " << a.dtype().str();
    if (*y == 0) return a;
  }
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return x >> y; }); f.defined()) return f;
  return make<ShrNode>(a.dtype(), a, b);
}

Expr min(Expr a, Expr b) {
  unify("min", a, b);
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return std::min(x, y); }); f.defined())
    return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return std::min(x, y); }); f.defined())
    return f;
  return make<MinNode>(a.dtype(), a, b);
}

Expr max(Expr a, Expr b) {
  unify("max", a, b);
  if (auto f = fold_int(a, b, [](int64_t x, int64_t y) { return std::max(x, y); }); f.defined())
    return f;
  if (auto f = fold_float(a, b, [](double x, double y) { return std::max(x, y); }); f.defined())
    return f;
  return make<MaxNode>(a.dtype(), a, b);
}

Expr operator==(Expr a, Expr b) { return compare("==", ExprKind::kEQ, a, b); }
Expr operator!=(Expr a, Expr b) { return compare("!=", ExprKind::kNE, a, b); }
Expr operator<(Expr a, Expr b) { return compare("<", ExprKind::kLT, a, b); }
Expr operator<=(Expr a, Expr b) { return compare("<=", ExprKind::kLE, a, b); }
Expr operator>(Expr a, Expr b) { return compare(">", ExprKind::kGT, a, b); }
Expr operator>=(Expr a, Expr b) { return compare(">=", ExprKind::kGE, a, b); }

Expr operator&&(Expr a, Expr b) {
  KILN_USER_CHECK(a.defined() && b.defined()) << "&&: an operand is undefined";
  KILN_USER_CHECK(a.dtype().is_bool() && b.dtype().is_bool())
      << "&&: operands must be bool, got " << a.dtype().str() << " and " << b.dtype().str();
  if (auto x = as_const_int(a)) return *x ? b : a;
  if (auto y = as_const_int(b)) return *y ? a : b;
  unify("&&", a, b);
  return make<AndNode>(a.dtype(), a, b);
}

Expr operator||(Expr a, Expr b) {
  KILN_USER_CHECK(a.defined() && b.defined()) << "||: an operand is undefined";
  KILN_USER_CHECK(a.dtype().is_bool() && b.dtype().is_bool())
      << "||: operands must be bool, got " << a.dtype().str() << " and " << b.dtype().str();
  if (auto x = as_const_int(a)) return *x ? a : b;
  if (auto y = as_const_int(b)) return *y ? b : a;
  unify("||", a, b);
  return make<OrNode>(a.dtype(), a, b);
}

Expr operator!(Expr a) {
  KILN_USER_CHECK(a.defined() && a.dtype().is_bool()) << "!: operand must be bool";
  if (auto x = as_const_int(a)) return make_const(a.dtype(), int64_t{!*x});
  if (auto n = a.as<NotNode>()) return n->a;
  return make<NotNode>(a.dtype(), a);
}

Expr select(Expr condition, Expr true_value, Expr false_value) {
  KILN_USER_CHECK(condition.defined() && condition.dtype().is_bool())
      << "select: condition must be bool";
  unify("select", true_value, false_value);
  if (auto c = as_const_int(condition)) return *c ? true_value : false_value;
  if (condition.dtype().lanes() == 1 && true_value.dtype().lanes() > 1) {
    condition = broadcast(condition, true_value.dtype().lanes());
  }
  return make<SelectNode>(true_value.dtype(), condition, true_value, false_value);
}

Expr exp(Expr x) { return float_math("exp", std::move(x)); }
Expr log(Expr x) { return float_math("log", std::move(x)); }
Expr sqrt(Expr x) { return float_math("sqrt", std::move(x)); }
Expr tanh(Expr x) { return float_math("tanh", std::move(x)); }
Expr sigmoid(Expr x) { return float_math("sigmoid", std::move(x)); }
Expr floor(Expr x) { return float_math("floor", std::move(x)); }
Expr ceil(Expr x) { return float_math("ceil", std::move(x)); }

Expr pow(Expr x, Expr y) {
  unify("pow", x, y);
  if (!x.dtype().is_float()) {
    x = cast(DataType::Float(32, x.dtype().lanes()), x);
    y = cast(x.dtype(), y);
  }
  return call(x.dtype(), "pow", {x, y}, CallKind::kPureIntrinsic);
}

Expr abs(Expr x) {
  KILN_USER_CHECK(x.defined()) << "abs: operand is undefined";
  if (x.dtype().is_uint() || x.dtype().is_bool()) return x;
  if (x.dtype().is_int()) return select(x >= 0, x, -x);
  return call(x.dtype(), "fabs", {x}, CallKind::kPureIntrinsic);
}

Expr fma(Expr a, Expr b, Expr c) {
  unify("fma", a, b);
  unify("fma", a, c);
  unify("fma", b, c);
  if (!a.dtype().is_float()) return a * b + c;
  return call(a.dtype(), "fma", {a, b, c}, CallKind::kPureIntrinsic);
}

Expr prefetch(Var buffer, Expr index, DataType elem) {
  KILN_USER_CHECK(index.defined() && index.dtype().is_int() && index.dtype().lanes() == 1)
      << "prefetch of '" << buffer.name() << "': the index must be one integer";
  return call(elem.element_of(), kPrefetch, {Expr(std::move(buffer)), std::move(index)},
              CallKind::kIntrinsic);
}

Expr dot4_u8s8(Expr acc, Expr a, Expr b) {
  KILN_USER_CHECK(acc.defined() && a.defined() && b.defined()) << "dot4_u8s8: operand is undefined";
  const int n = acc.dtype().lanes();
  KILN_USER_CHECK(acc.dtype().element_of() == kInt32)
      << "dot4_u8s8: the accumulator must be int32 lanes, got " << acc.dtype().str();
  KILN_USER_CHECK(b.dtype() == DataType::Int(8, 4 * n))
      << "dot4_u8s8: b must be int8x" << 4 * n << " for " << n << " accumulators, got "
      << b.dtype().str();
  KILN_USER_CHECK(a.dtype() == DataType::UInt(8, 4) || a.dtype() == DataType::UInt(8, 4 * n))
      << "dot4_u8s8: a must be uint8x4 (broadcast) or uint8x" << 4 * n << ", got "
      << a.dtype().str();
  const DataType t = acc.dtype();
  return call(t, kDot4U8S8, {std::move(acc), std::move(a), std::move(b)}, CallKind::kPureIntrinsic);
}

Expr call(DataType t, std::string name, std::vector<Expr> args, CallKind kind) {
  return make<CallNode>(t, std::move(name), std::move(args), kind);
}

Expr load(DataType t, Var buffer_var, Expr index, Expr predicate) {
  return make<LoadNode>(t, std::move(buffer_var), std::move(index), std::move(predicate));
}

Expr ramp(Expr base, Expr stride, int lanes) {
  KILN_ICHECK(base.dtype().is_scalar() && lanes > 1) << "ramp of " << lanes << " lanes";
  stride = cast(base.dtype(), stride);
  return make<RampNode>(base.dtype().with_lanes(lanes), base, stride, lanes);
}

Expr broadcast(Expr value, int lanes) {
  KILN_ICHECK(value.dtype().is_scalar()) << "broadcast of a vector";
  if (lanes == 1) return value;
  return make<BroadcastNode>(value.dtype().with_lanes(lanes), value, lanes);
}

Expr let(Var var, Expr value, Expr body) {
  DataType t = body.dtype();
  return make<LetNode>(t, std::move(var), std::move(value), std::move(body));
}

Expr producer_load(Producer p, std::vector<Expr> indices) {
  DataType t = p->dtype();
  return make<ProducerLoadNode>(t, std::move(p), std::move(indices));
}

Stmt let_stmt(Var var, Expr value, Stmt body) {
  return make_stmt<LetStmtNode>(std::move(var), std::move(value), std::move(body));
}

Stmt attr_stmt(ObjectRef node, std::string key, Expr value, Stmt body) {
  return make_stmt<AttrStmtNode>(std::move(node), std::move(key), std::move(value),
                                 std::move(body));
}

Stmt assert_stmt(Expr condition, std::string message, Stmt body) {
  return make_stmt<AssertStmtNode>(std::move(condition), std::move(message), std::move(body));
}

Stmt for_loop(Var var, Expr min, Expr extent, ForKind kind, Stmt body) {
  return make_stmt<ForNode>(std::move(var), std::move(min), std::move(extent), kind,
                            std::move(body));
}

Stmt store(Var buffer_var, Expr value, Expr index, Expr predicate) {
  return make_stmt<StoreNode>(std::move(buffer_var), std::move(value), std::move(index),
                              std::move(predicate));
}

Stmt producer_store(Producer p, Expr value, std::vector<Expr> indices) {
  return make_stmt<ProducerStoreNode>(std::move(p), std::move(value), std::move(indices));
}

Stmt producer_realize(Producer p, std::vector<Range> bounds, std::string scope, Stmt body) {
  return make_stmt<ProducerRealizeNode>(std::move(p), std::move(bounds), std::move(scope),
                                        std::move(body));
}

Stmt allocate(Var buffer_var, DataType t, std::vector<Expr> extents, std::string scope, Stmt body) {
  return make_stmt<AllocateNode>(std::move(buffer_var), t, std::move(extents), std::move(scope),
                                 std::move(body));
}

Stmt if_then_else(Expr condition, Stmt then_case, Stmt else_case) {
  return make_stmt<IfThenElseNode>(std::move(condition), std::move(then_case),
                                   std::move(else_case));
}

Stmt seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s.defined() || is_no_op(s)) continue;
    if (auto sq = s.as<SeqNode>()) {
      flat.insert(flat.end(), sq->seq.begin(), sq->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) return no_op();
  if (flat.size() == 1) return flat[0];
  return make_stmt<SeqNode>(std::move(flat));
}

Stmt evaluate(Expr value) { return make_stmt<EvaluateNode>(std::move(value)); }

Stmt no_op() { return evaluate(make_const(kInt32, int64_t{0})); }

bool is_no_op(const Stmt& s) {
  if (!s.defined()) return true;
  auto e = s.as<EvaluateNode>();
  return e && (e->value.as<IntImmNode>() != nullptr);
}

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kProd:
      return "prod";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
  }
  KILN_UNREACHABLE();
}

Expr reduce_identity(ReduceKind k, DataType t) {
  switch (k) {
    case ReduceKind::kSum:
      return make_zero(t);
    case ReduceKind::kProd:
      return make_one(t);
    case ReduceKind::kMax:
      return min_value(t);
    case ReduceKind::kMin:
      return max_value(t);
  }
  KILN_UNREACHABLE();
}

Expr reduce_combine(ReduceKind k, Expr a, Expr b) {
  switch (k) {
    case ReduceKind::kSum:
      return a + b;
    case ReduceKind::kProd:
      return a * b;
    case ReduceKind::kMax:
      return max(a, b);
    case ReduceKind::kMin:
      return min(a, b);
  }
  KILN_UNREACHABLE();
}

}  // namespace kiln::ir
