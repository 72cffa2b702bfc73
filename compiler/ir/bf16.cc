// bf16 pairs: the intrinsics' constructors and their host-side arithmetic.
#include "compiler/ir/bf16.h"

#include <cstring>
#include <utility>

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

Expr bf16x2_pack(Expr lo, Expr hi) {
  KILN_USER_CHECK(lo.dtype().element_of() == kFloat32 && hi.dtype().element_of() == kFloat32)
      << "bf16x2_pack: operands must be float32, got " << lo.dtype().str() << " and "
      << hi.dtype().str();
  const int lanes = lo.dtype().lanes();
  return call(DataType::Int(32, lanes), kBf16x2Pack, {std::move(lo), std::move(hi)},
              CallKind::kPureIntrinsic);
}

Expr bf16x2_dot(Expr a, Expr b) {
  KILN_USER_CHECK(a.dtype().element_of() == kInt32 && b.dtype().element_of() == kInt32)
      << "bf16x2_dot: operands must be int32 (packed bf16 pairs), got " << a.dtype().str()
      << " and " << b.dtype().str();
  const int lanes = a.dtype().lanes();
  return call(DataType::Float(32, lanes), kBf16x2Dot, {std::move(a), std::move(b)},
              CallKind::kPureIntrinsic);
}

uint16_t float_to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float x = 0;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

int32_t pack_bf16x2(float lo, float hi) {
  const uint32_t v =
      static_cast<uint32_t>(float_to_bf16(lo)) | static_cast<uint32_t>(float_to_bf16(hi)) << 16;
  int32_t out = 0;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

float bf16x2_dot_acc(float acc, int32_t a, int32_t b) {
  uint32_t ua = 0, ub = 0;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  auto lo = [](uint32_t v) { return bf16_to_float(static_cast<uint16_t>(v & 0xffffu)); };
  auto hi = [](uint32_t v) { return bf16_to_float(static_cast<uint16_t>(v >> 16)); };
  acc = acc + hi(ua) * hi(ub);
  return acc + lo(ua) * lo(ub);
}

}  // namespace kiln::ir
