// Elementwise operators: unary activations and math, casts, and binary arithmetic with NumPy/ONNX
// multidirectional broadcasting (shapes aligned from the right, size-1 dimensions stretched). All
// of them are injective: each output element reads a fixed set of input elements and nothing else,
// so one x86 schedule serves them all, and a graph compiler may fuse a chain of them by inlining
// the producers into the last one.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::topi {

// ---- unary ----

/// max(x, 0)
te::Tensor relu(const te::Tensor& x, const std::string& name = "relu");
/// x < 0 ? alpha * x : x
te::Tensor leaky_relu(const te::Tensor& x, double alpha = 0.01,
                      const std::string& name = "leaky_relu");
/// min(max(x, lo), hi); kiln::Error when lo > hi.
te::Tensor clip(const te::Tensor& x, double lo, double hi, const std::string& name = "clip");
/// 1 / (1 + exp(-x)); floating-point x only (as are tanh, exp, log and sqrt).
te::Tensor sigmoid(const te::Tensor& x, const std::string& name = "sigmoid");
te::Tensor tanh(const te::Tensor& x, const std::string& name = "tanh");
te::Tensor exp(const te::Tensor& x, const std::string& name = "exp");
te::Tensor log(const te::Tensor& x, const std::string& name = "log");
te::Tensor sqrt(const te::Tensor& x, const std::string& name = "sqrt");
te::Tensor abs(const te::Tensor& x, const std::string& name = "abs");
te::Tensor neg(const te::Tensor& x, const std::string& name = "neg");
/// x converted to `dtype` (C conversion rules: float to int truncates).
te::Tensor cast(const te::Tensor& x, ir::DataType dtype, const std::string& name = "cast");

/// out[i...] = f(x[i...]) for any f of one element.
te::Tensor elementwise(const te::Tensor& x, const std::function<ir::Expr(ir::Expr)>& f,
                       const std::string& name);

// ---- binary, broadcasting ----

/// The broadcast shape of `a` and `b` (NumPy rules), or kiln::Error naming both shapes and `op`.
/// A symbolic dimension broadcasts only against 1 or against the very same variable.
std::vector<ir::Expr> broadcast_shape(const std::vector<ir::Expr>& a,
                                      const std::vector<ir::Expr>& b, const std::string& op);

/// out[i...] = f(a[i...], b[i...]) with both broadcast to broadcast_shape(a, b); the operands
/// must have the same dtype.
te::Tensor broadcast_binary(const te::Tensor& a, const te::Tensor& b,
                            const std::function<ir::Expr(ir::Expr, ir::Expr)>& f,
                            const std::string& name);

/// cond ? a : b, the three broadcast together (ONNX Where); cond bool, a and b of one dtype.
te::Tensor where(const te::Tensor& cond, const te::Tensor& a, const te::Tensor& b,
                 const std::string& name = "where");
/// x broadcast to `shape` (NumPy rules; ONNX Expand with the output shape already resolved);
/// kiln::Error when x does not broadcast to exactly that shape.
te::Tensor broadcast_to(const te::Tensor& x, const std::vector<int64_t>& shape,
                        const std::string& name = "broadcast_to");

te::Tensor add(const te::Tensor& a, const te::Tensor& b, const std::string& name = "add");
te::Tensor sub(const te::Tensor& a, const te::Tensor& b, const std::string& name = "sub");
te::Tensor mul(const te::Tensor& a, const te::Tensor& b, const std::string& name = "mul");
/// IEEE division for floats, truncating division for integers (as ONNX Div); an integer divided
/// by 0 gives itself (ONNX leaves it undefined).
te::Tensor div(const te::Tensor& a, const te::Tensor& b, const std::string& name = "div");
te::Tensor maximum(const te::Tensor& a, const te::Tensor& b, const std::string& name = "maximum");
te::Tensor minimum(const te::Tensor& a, const te::Tensor& b, const std::string& name = "minimum");
te::Tensor pow(const te::Tensor& a, const te::Tensor& b, const std::string& name = "pow");

// ---- schedules ----

/// The generic x86 schedule of an injective stage `out`: all axes fused into one loop, split by
/// the vector width (16 fp32 lanes; the tail is guarded), the outer part run in parallel when the
/// tensor has more than 16K elements (or a symbolic size), the inner part vectorized. Producers
/// already compute_inline-d into `out` are carried along: their expressions are evaluated inside
/// the fused loop.
void schedule_injective_x86(te::Schedule& s, const te::Tensor& out);

/// A whole schedule for `outs`: every compute stage between the placeholders and the outputs that
/// is injective (no reduction) is inlined, and each output gets schedule_injective_x86.
te::Schedule schedule_injective_x86(const std::vector<te::Tensor>& outs);

// ---- helpers shared by the other operator files ----

/// "[2, 3, n]" — a shape for messages.
std::string shape_str(const std::vector<ir::Expr>& shape);
/// The axis `axis` of a tensor of rank `ndim`, with negative values counted from the end;
/// kiln::Error naming `op` when it is out of [-ndim, ndim).
int normalize_axis(int64_t axis, size_t ndim, const std::string& op);

}  // namespace kiln::topi
