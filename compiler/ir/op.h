// Building expressions and statements: constants, operators with type promotion (an int literal
// takes the other side's type, an int meeting a float becomes a float, a scalar meeting a vector
// is broadcast), math intrinsics, and statement constructors. Operators fold integer constants,
// so that shapes like 1024 / 8 stay readable.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

// ---- constants ----
Expr make_const(DataType t, int64_t value);
Expr make_const(DataType t, double value);
Expr make_zero(DataType t);
Expr make_one(DataType t);
Expr make_string(std::string value);
Expr const_true(int lanes = 1);
Expr const_false(int lanes = 1);
/// The integer value of an IntImm (or a Broadcast of one), if it is one.
std::optional<int64_t> as_const_int(const Expr& e);
std::optional<double> as_const_float(const Expr& e);
bool is_const_int(const Expr& e, int64_t value);
inline bool is_zero(const Expr& e) { return is_const_int(e, 0); }
inline bool is_one(const Expr& e) { return is_const_int(e, 1); }
/// Largest and smallest values of a type, as constants (for max/min reductions).
Expr max_value(DataType t);
Expr min_value(DataType t);

/// The two operands of a binary node (arithmetic, comparison, logic), whatever its kind.
std::pair<const Expr&, const Expr&> binary_operands(const Expr& e);

// ---- operators ----
Expr cast(DataType t, Expr value);
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator*(Expr a, Expr b);
/// Truncating division for integers (as in C), IEEE division for floats.
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
/// Division and remainder rounding toward minus infinity.
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
/// a >> b for integers (arithmetic for signed types); a constant b must be in [0, bits).
Expr shift_right(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr select(Expr condition, Expr true_value, Expr false_value);

// ---- math (pure intrinsics) ----
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr pow(Expr x, Expr y);
Expr abs(Expr x);
Expr fma(Expr a, Expr b, Expr c);
Expr floor(Expr x);
Expr ceil(Expr x);
/// The 4-deep dot product of unsigned and signed bytes, exact:
///   dot4_u8s8(acc, a, b)[i] = acc[i] + sum_{j < 4} int32(a[4i + j]) * int32(b[4i + j])
/// with acc int32xN, b int8x(4N), and a uint8x(4N) or uint8x4 (the same four bytes for every
/// lane). x86 with AVX512-VNNI / AVX-VNNI computes it with vpdpbusd, other targets with widening
/// multiplies and adds (llvm_intrinsics.cc).
Expr dot4_u8s8(Expr acc, Expr a, Expr b);
inline constexpr const char* kDot4U8S8 = "dot4_u8s8";
/// A hint that `buffer`[index] (an element of type `elem`) is read soon: a prefetch into the
/// caches, evaluated as a statement. It changes no value, and the address may lie outside the
/// buffer (a prefetch does not fault). CPUs only (llvm.prefetch); pass::inject_prefetch writes it.
Expr prefetch(Var buffer, Expr index, DataType elem);
inline constexpr const char* kPrefetch = "kiln.prefetch";
/// A call of a pure intrinsic or an extern C function.
Expr call(DataType t, std::string name, std::vector<Expr> args, CallKind kind);

// ---- memory and vectors ----
Expr load(DataType t, Var buffer_var, Expr index, Expr predicate = Expr());
Expr ramp(Expr base, Expr stride, int lanes);
Expr broadcast(Expr value, int lanes);
Expr let(Var var, Expr value, Expr body);
Expr producer_load(Producer p, std::vector<Expr> indices);

// ---- statements ----
Stmt let_stmt(Var var, Expr value, Stmt body);
Stmt attr_stmt(ObjectRef node, std::string key, Expr value, Stmt body);
Stmt assert_stmt(Expr condition, std::string message, Stmt body);
Stmt for_loop(Var var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt store(Var buffer_var, Expr value, Expr index, Expr predicate = Expr());
Stmt producer_store(Producer p, Expr value, std::vector<Expr> indices);
Stmt producer_realize(Producer p, std::vector<Range> bounds, std::string scope, Stmt body);
Stmt allocate(Var buffer_var, DataType t, std::vector<Expr> extents, std::string scope, Stmt body);
Stmt if_then_else(Expr condition, Stmt then_case, Stmt else_case = Stmt());
/// A sequence; nested sequences are flattened, undefined and no-op entries dropped, and a single
/// statement is returned as it is.
Stmt seq(std::vector<Stmt> stmts);
Stmt evaluate(Expr value);
/// A statement that does nothing (Evaluate(0)).
Stmt no_op();
bool is_no_op(const Stmt& s);

/// Name of a ReduceKind, and the identity element of its combiner.
const char* reduce_kind_name(ReduceKind k);
Expr reduce_identity(ReduceKind k, DataType t);
/// combiner(a, b)
Expr reduce_combine(ReduceKind k, Expr a, Expr b);

}  // namespace kiln::ir
