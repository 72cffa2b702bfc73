// bfloat16 in Kiln: two bf16 values packed in one int32 (the lower half the even element, the
// upper half the odd one: a little-endian pair, as AVX-512 BF16 reads them), the two pure
// intrinsics that make and multiply such pairs, and their host-side definitions.
//
//   bf16x2_pack(lo, hi)       int32 = bf16(lo) | bf16(hi) << 16       (lo, hi float32)
//   acc + bf16x2_dot(a, b)    float32 = (acc + a.hi * b.hi) + a.lo * b.lo
//
// bf16(x) rounds float32 x to nearest, ties to even (a NaN stays a quiet NaN of its sign); a bf16
// widens to float32 exactly (its 16 bits become the upper half). The products of two bf16 values
// are exact in float32, so only the two additions round, in the order above: the order of
// vdpbf16ps, which code generation emits for an add of a bf16x2_dot to a 4, 8 or 16-lane float32
// where the target has avx512bf16 (compiler/codegen/llvm_bf16.cc). That instruction treats
// denormal inputs and results as zero; elsewhere, and on other targets, the same formula runs on
// plain float32 arithmetic (denormals kept), for tests and portability, not speed.
#pragma once

#include <cstdint>

#include "compiler/ir/expr.h"

namespace kiln::ir {

/// The intrinsics' names (CallKind::kPureIntrinsic).
inline constexpr const char* kBf16x2Pack = "bf16x2_pack";
inline constexpr const char* kBf16x2Dot = "bf16x2_dot";

/// int32 (lanes of lo): bf16(lo) in bits 0-15, bf16(hi) in bits 16-31. lo and hi are float32.
Expr bf16x2_pack(Expr lo, Expr hi);
/// float32 (lanes of a): a.hi * b.hi + a.lo * b.lo of two packed pairs (int32). Meant to be added
/// to an accumulator (`acc + bf16x2_dot(a, b)`, a sum's update), which is what the instruction
/// computes; alone it is that sum with acc = 0.
Expr bf16x2_dot(Expr a, Expr b);

/// Host definitions of the same arithmetic, for weights converted at build time and references.
uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t b);
int32_t pack_bf16x2(float lo, float hi);
/// (acc + a.hi * b.hi) + a.lo * b.lo, in float32.
float bf16x2_dot_acc(float acc, int32_t a, int32_t b);

}  // namespace kiln::ir
