// Test helpers for the arithmetic passes: a tiny evaluator of scalar integer expressions and a
// generator of random index expressions, to check that a rewrite keeps the value on random points.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/op.h"

namespace kiln::ir::testing {

using Env = std::unordered_map<const VarNode*, int64_t>;

/// The value of a scalar integer/bool expression, or nullopt when it is undefined there (a
/// division by zero, an int32 overflow, a node the evaluator does not know).
inline std::optional<int64_t> eval_int(const Expr& e, const Env& env) {
  using R = std::optional<int64_t>;
  auto fdiv = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  };
  auto checked = [&](int64_t v) -> R {
    if (e.dtype().is_int() && e.dtype().bits() == 32 && (v < INT32_MIN || v > INT32_MAX)) {
      return std::nullopt;
    }
    return v;
  };
  auto bin = [&](const Expr& a, const Expr& b, auto f) -> R {
    R x = eval_int(a, env), y = eval_int(b, env);
    if (!x || !y) return std::nullopt;
    return f(*x, *y);
  };
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return e.as<IntImmNode>()->value;
    case ExprKind::kVar: {
      auto it = env.find(e.as<VarNode>());
      return it == env.end() ? std::nullopt : R(it->second);
    }
    case ExprKind::kCast:
      return eval_int(e.as<CastNode>()->value, env);
      // clang-format off
#define KILN_EVAL_BIN(T, F)                                          \
  case ExprKind::k##T: {                                             \
    auto op = e.as<T##Node>();                                       \
    return bin(op->a, op->b, [&](int64_t a, int64_t b) -> R { F; }); \
  }
      KILN_EVAL_BIN(Add, return checked(a + b))
      KILN_EVAL_BIN(Sub, return checked(a - b))
      KILN_EVAL_BIN(Mul, return checked(a * b))
      KILN_EVAL_BIN(Div, if (b == 0) return std::nullopt; return checked(a / b))
      KILN_EVAL_BIN(Mod, if (b == 0) return std::nullopt; return checked(a % b))
      KILN_EVAL_BIN(FloorDiv, if (b == 0) return std::nullopt; return checked(fdiv(a, b)))
      KILN_EVAL_BIN(FloorMod, if (b == 0) return std::nullopt; return checked(a - fdiv(a, b) * b))
      KILN_EVAL_BIN(Min, return std::min(a, b))
      KILN_EVAL_BIN(Max, return std::max(a, b))
      KILN_EVAL_BIN(EQ, return a == b)
      KILN_EVAL_BIN(NE, return a != b)
      KILN_EVAL_BIN(LT, return a < b)
      KILN_EVAL_BIN(LE, return a <= b)
      KILN_EVAL_BIN(GT, return a > b)
      KILN_EVAL_BIN(GE, return a >= b)
      KILN_EVAL_BIN(And, return a && b)
      KILN_EVAL_BIN(Or, return a || b)
#undef KILN_EVAL_BIN
      // clang-format on
    case ExprKind::kNot: {
      R a = eval_int(e.as<NotNode>()->a, env);
      return a ? R(!*a) : std::nullopt;
    }
    case ExprKind::kSelect: {
      auto op = e.as<SelectNode>();
      R c = eval_int(op->condition, env);
      R t = eval_int(op->true_value, env), f = eval_int(op->false_value, env);
      if (!c || !t || !f) return std::nullopt;
      return *c ? t : f;
    }
    case ExprKind::kLet: {
      auto op = e.as<LetNode>();
      R v = eval_int(op->value, env);
      if (!v) return std::nullopt;
      Env inner = env;
      inner[op->var.get()] = *v;
      return eval_int(op->body, inner);
    }
    default:
      return std::nullopt;
  }
}

/// Random int32 index expressions over a few variables: sums, products by constants, divisions
/// and remainders by constants (floor and truncating), min/max and selects.
class RandomExprGen {
 public:
  RandomExprGen(std::vector<Var> vars, uint32_t seed) : vars_(std::move(vars)), rng_(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  Expr gen(int depth) {
    if (depth == 0 || uniform(0, 5) == 0) {
      if (uniform(0, 2) == 0) return make_const(kInt32, uniform(-10, 10));
      return vars_[static_cast<size_t>(uniform(0, static_cast<int64_t>(vars_.size()) - 1))];
    }
    auto sub = [&] { return gen(depth - 1); };
    auto divisor = [&] {
      static const int64_t kDivisors[] = {1, 2, 3, 4, 8, 16, -2, -4, 5, 6};
      return make_const(kInt32, kDivisors[uniform(0, 9)]);
    };
    auto k = [&] { return make_const(kInt32, uniform(-8, 8)); };
    switch (uniform(0, 13)) {
      case 0:
      case 1:
        return sub() + sub();
      case 2:
        return sub() - sub();
      case 3:
        return sub() * k();
      case 4:
        return k() * sub();
      case 5:
        return depth <= 2 ? sub() * sub() : sub() + k();
      case 6:
        return floordiv(sub(), divisor());
      case 7:
        return floormod(sub(), divisor());
      case 8:
        return sub() / divisor();
      case 9:
        return sub() % divisor();
      case 10:
        return min(sub(), sub());
      case 11:
        return max(sub(), sub());
      case 12:
        return select(cmp(depth - 1), sub(), sub());
      default:
        return floordiv(sub() * k() + sub(), divisor());
    }
  }

  /// A random comparison of two expressions of depth `depth`.
  Expr cmp(int depth) {
    Expr a = gen(depth), b = gen(depth);
    switch (uniform(0, 5)) {
      case 0:
        return a < b;
      case 1:
        return a <= b;
      case 2:
        return a > b;
      case 3:
        return a >= b;
      case 4:
        return a == b;
      default:
        return a != b;
    }
  }

 private:
  std::vector<Var> vars_;
  std::mt19937 rng_;
};

}  // namespace kiln::ir::testing
