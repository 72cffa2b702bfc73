// dot4_u8s8, the int8 kernels' 4-deep byte dot product (compiler/ir/op.h), through the LLVM
// back-end: random bytes over their whole ranges (255 * 127 * 4 sums, which a saturating
// vpmaddubsw would get wrong) against plain C++, with both operand forms (a broadcast word and a
// byte per lane), for 1, 4, 8, 16, 32 and 48 lanes, on the host target (vpdpbusd where it has
// VNNI, checked in its assembly) and on targets without VNNI (the widening fallback); on AArch64
// the assembly of each lowering (NEON widening, udot with the operand offset, usdot), whose
// results tests/board/dot4_arm64_test checks under QEMU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/build.h"
#include "compiler/ir/function.h"
#include "compiler/ir/op.h"
#include "compiler/target/target.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "tests/common/dot4_func.h"
#include "tests/common/expect_error.h"
#include "tests/common/host_target.h"

namespace kiln::codegen {
namespace {

using ir::DataType;
using ir::Expr;
using runtime::NDArray;
using testing::dot4_func;

void check(const target::Target& target, int lanes, bool broadcast, uint32_t seed) {
  SCOPED_TRACE(target.str() + ", " + std::to_string(lanes) + " lanes" +
               (broadcast ? ", broadcast" : ""));
  const int rows = 37, a_width = broadcast ? 4 : 4 * lanes;
  const testing::Dot4Data d = testing::dot4_data(lanes, broadcast, rows, seed);
  const ir::PrimFunc f = dot4_func(lanes, broadcast, rows);
  runtime::Function fn = build({f}, target).function(f.name);
  NDArray out = NDArray::empty({rows * lanes}, runtime::kInt32);
  NDArray acc_a = NDArray::from_vector(d.acc, {rows * lanes});
  NDArray a_a = NDArray::from_vector(d.a, {rows * a_width});
  NDArray b_a = NDArray::from_vector(d.b, {rows * 4 * lanes});
  fn(acc_a, a_a, b_a, out);
  const std::vector<int32_t> got = out.to_vector<int32_t>();
  for (size_t k = 0; k < d.want.size(); ++k) ASSERT_EQ(got[k], d.want[k]) << "element " << k;
}

bool host_has_vnni() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

using testing::host;

TEST(CodegenDot4, ExactOnTheHost) {
  for (int lanes : {1, 4, 8, 16, 32, 48}) {
    for (bool broadcast : {true, false}) check(host(), lanes, broadcast, 7 + lanes);
  }
}

TEST(CodegenDot4, ExactWithoutVnni) {
#if defined(__x86_64__)
  // The host's CPU with VNNI taken away, and a plain AVX2 CPU: the widening fallback.
  for (const char* t : {"llvm -mcpu=native -mattr=-avx512vnni,-avxvnni", "llvm -mcpu=haswell"}) {
    for (int lanes : {1, 8, 16, 32}) {
      for (bool broadcast : {true, false}) check(target::Target::parse(t), lanes, broadcast, lanes);
    }
  }
#else
  GTEST_SKIP() << "not an x86 host";
#endif
}

TEST(CodegenDot4, VpdpbusdWhereTheTargetHasVnni) {
  // Code generation for a named CPU needs no such CPU here: only running it does.
  const std::string zmm =
      emit_assembly({dot4_func(16, true, 4)}, target::Target::parse("llvm -mcpu=znver5"));
  EXPECT_NE(zmm.find("vpdpbusd"), std::string::npos) << zmm;
  EXPECT_NE(zmm.find("zmm"), std::string::npos);
  // AVX-VNNI alone (no AVX-512): two 256-bit halves.
  const std::string ymm =
      emit_assembly({dot4_func(16, true, 4)}, target::Target::parse("llvm -mcpu=alderlake"));
  EXPECT_NE(ymm.find("vpdpbusd"), std::string::npos) << ymm;
  EXPECT_EQ(ymm.find("zmm"), std::string::npos);
  // No VNNI: no vpdpbusd, and never the saturating vpmaddubsw.
  const std::string plain =
      emit_assembly({dot4_func(16, true, 4)}, target::Target::parse("llvm -mcpu=skylake-avx512"));
  EXPECT_EQ(plain.find("vpdpbusd"), std::string::npos);
  EXPECT_EQ(plain.find("vpmaddubsw"), std::string::npos);
  if (host_has_vnni()) {
    EXPECT_NE(emit_assembly({dot4_func(16, false, 4)}, host()).find("vpdpbusd"), std::string::npos);
  }
}

/// How often `word` appears in `text`.
int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(CodegenDot4, AArch64LoweringsByFeature) {
  for (bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "broadcast" : "a byte per lane");
    // 16 lanes: four 128-bit pieces.
    const ir::PrimFunc f = dot4_func(16, broadcast, 4);
    // Cortex-A53 (NEON, no dot product): widened to 16 bits, multiplied, summed pairwise into
    // int32 twice; no scalar multiply-adds.
    const std::string a53 = emit_assembly(
        {f}, target::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53"));
    EXPECT_GE(count(a53, "saddlp\tv"), 8) << a53;
    EXPECT_GE(count(a53, "addp\tv"), 4) << a53;
    EXPECT_GE(count(a53, "mul\tv"), 8) << a53;
    EXPECT_EQ(count(a53, "madd\t"), 0) << a53;
    EXPECT_EQ(count(a53, "dot\t"), 0) << a53;
    // The dot product (Cortex-A55, or any core with +dotprod): udot, one a piece and one for the
    // offset's correction (once for a broadcast operand); no usdot without i8mm.
    for (const char* t : {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a55",
                          "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53 -mattr=+dotprod",
                          "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1"}) {
      const std::string dot = emit_assembly({f}, target::Target::parse(t));
      EXPECT_GE(count(dot, "udot\tv"), broadcast ? 5 : 8) << t << "\n" << dot;
      EXPECT_EQ(count(dot, "usdot"), 0) << t;
      EXPECT_EQ(count(dot, "saddlp"), 0) << t;
    }
    // i8mm: one usdot a piece.
    const std::string i8mm = emit_assembly(
        {f},
        target::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a55 -mattr=+i8mm"));
    EXPECT_EQ(count(i8mm, "usdot\tv"), 4) << i8mm;  // 4 pieces (the rows' loop is not unrolled)
    EXPECT_EQ(count(i8mm, "udot\tv"), 0) << i8mm;
  }
}

TEST(CodegenDot4, OperandTypesAreChecked) {
  const Expr acc = ir::make_zero(ir::kInt32.with_lanes(16));
  const Expr a = ir::make_zero(DataType::UInt(8, 4)), b = ir::make_zero(DataType::Int(8, 64));
  EXPECT_ERROR_CONTAINS(ir::dot4_u8s8(acc, a, ir::make_zero(DataType::Int(8, 32))),
                        "dot4_u8s8: b must be int8x64 for 16 accumulators, got int8x32");
  EXPECT_ERROR_CONTAINS(ir::dot4_u8s8(acc, ir::make_zero(DataType::Int(8, 4)), b),
                        "dot4_u8s8: a must be uint8x4 (broadcast) or uint8x64, got int8x4");
  EXPECT_ERROR_CONTAINS(ir::dot4_u8s8(ir::make_zero(ir::kFloat32.with_lanes(16)), a, b),
                        "the accumulator must be int32 lanes, got float32x16");
}

}  // namespace
}  // namespace kiln::codegen
