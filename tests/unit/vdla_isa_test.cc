// The VDLA's instruction encoding: golden bit positions of every field (VTA's hw_spec.h),
// encode/decode round trips, and the configuration's derived depths.
#include <gtest/gtest.h>

#include <random>

#include "deploy/vdla/device/config.h"
#include "deploy/vdla/device/isa.h"
#include "tests/common/expect_error.h"

namespace kiln::vdla {
namespace {

uint64_t bits(const EncodedInsn& e, int hi, int lo) {
  uint64_t v = 0;
  for (int b = hi; b >= lo; --b) v = (v << 1) | ((e.words[b / 64] >> (b % 64)) & 1u);
  return v;
}

TEST(VdlaIsa, LoadFieldsAtTheirBits) {
  Insn i = make_load(MemType::kInp, 0x1234, 0x89abcdef, 0xfedc, 0x7654, 0x3210, 1, 2, 3, 4);
  i.dep.pop_next = true;
  i.dep.push_next = true;
  const EncodedInsn e = encode(i);
  EXPECT_EQ(bits(e, 2, 0), 0u);  // LOAD
  EXPECT_EQ(bits(e, 3, 3), 0u);
  EXPECT_EQ(bits(e, 4, 4), 1u);  // pop_next
  EXPECT_EQ(bits(e, 5, 5), 0u);
  EXPECT_EQ(bits(e, 6, 6), 1u);  // push_next
  EXPECT_EQ(bits(e, 9, 7), 2u);  // INP
  EXPECT_EQ(bits(e, 25, 10), 0x1234u);
  EXPECT_EQ(bits(e, 57, 26), 0x89abcdefu);
  EXPECT_EQ(bits(e, 63, 58), 0u);
  EXPECT_EQ(bits(e, 79, 64), 0xfedcu);
  EXPECT_EQ(bits(e, 95, 80), 0x7654u);
  EXPECT_EQ(bits(e, 111, 96), 0x3210u);
  EXPECT_EQ(bits(e, 115, 112), 1u);
  EXPECT_EQ(bits(e, 119, 116), 2u);
  EXPECT_EQ(bits(e, 123, 120), 3u);
  EXPECT_EQ(bits(e, 127, 124), 4u);
}

TEST(VdlaIsa, StoreAndFinishOpcodes) {
  Insn s = make_store(7, 9, 1, 2, 3);
  s.dep.push_prev = true;
  const EncodedInsn e = encode(s);
  EXPECT_EQ(bits(e, 2, 0), 1u);
  EXPECT_EQ(bits(e, 5, 5), 1u);
  EXPECT_EQ(bits(e, 9, 7), 4u);  // OUT
  const EncodedInsn f = encode(make_finish());
  EXPECT_EQ(f.words[0], 3u);
  EXPECT_EQ(f.words[1], 0u);
}

TEST(VdlaIsa, GemmFieldsAtTheirBits) {
  Insn g =
      make_gemm(true, 0x1abc, 0x2def, 0x3123, 0x2456, 0x7ff, 0x5a5, 0x3c3, 0x1ee, 0x3ff, 0x2aa);
  g.dep.pop_prev = true;
  const EncodedInsn e = encode(g);
  EXPECT_EQ(bits(e, 2, 0), 2u);
  EXPECT_EQ(bits(e, 3, 3), 1u);  // pop_prev
  EXPECT_EQ(bits(e, 7, 7), 1u);  // reset
  EXPECT_EQ(bits(e, 20, 8), 0x1abcu);
  EXPECT_EQ(bits(e, 34, 21), 0x2defu);
  EXPECT_EQ(bits(e, 48, 35), 0x3123u);
  EXPECT_EQ(bits(e, 62, 49), 0x2456u);
  EXPECT_EQ(bits(e, 74, 64), 0x7ffu);
  EXPECT_EQ(bits(e, 85, 75), 0x5a5u);
  EXPECT_EQ(bits(e, 96, 86), 0x3c3u);
  EXPECT_EQ(bits(e, 107, 97), 0x1eeu);
  EXPECT_EQ(bits(e, 117, 108), 0x3ffu);
  EXPECT_EQ(bits(e, 127, 118), 0x2aau);
}

TEST(VdlaIsa, AluFieldsAtTheirBits) {
  const EncodedInsn e = encode(make_alu(AluOp::kShr, 3, 4, 5, 6, 7, 8, 9, 10, true, -2));
  EXPECT_EQ(bits(e, 2, 0), 4u);
  EXPECT_EQ(bits(e, 20, 8), 3u);
  EXPECT_EQ(bits(e, 107, 97), 10u);
  EXPECT_EQ(bits(e, 110, 108), 3u);  // SHR
  EXPECT_EQ(bits(e, 111, 111), 1u);  // use_imm
  EXPECT_EQ(bits(e, 127, 112), 0xfffeu);
  EXPECT_EQ(decode(e).imm, -2);
}

TEST(VdlaIsa, MicroOpFields) {
  EXPECT_EQ(encode_uop(Uop{1, 2, 3}), 1u | (2u << 11) | (3u << 22));
  EXPECT_EQ(encode_uop(Uop{0x7ff, 0x7ff, 0x3ff}), 0xffffffffu);
  EXPECT_EQ(decode_uop(0xffffffffu), (Uop{0x7ff, 0x7ff, 0x3ff}));
  EXPECT_ERROR_CONTAINS(encode_uop(Uop{2048, 0, 0}), "dst 2048");
  EXPECT_ERROR_CONTAINS(encode_uop(Uop{0, 0, 1024}), "wgt 1024");
}

TEST(VdlaIsa, RoundTripOfRandomInstructions) {
  std::mt19937 rng(7);
  auto r = [&](int width) { return static_cast<uint32_t>(rng() & ((uint64_t{1} << width) - 1)); };
  for (int n = 0; n < 2000; ++n) {
    Insn i;
    switch (n % 5) {
      case 0:
        i = make_load(static_cast<MemType>(r(32) % 6 == 4 ? 2 : r(32) % 6), r(16), r(32), r(16),
                      r(16), r(16), r(4), r(4), r(4), r(4));
        break;
      case 1:
        i = make_store(r(16), r(32), r(16), r(16), r(16));
        break;
      case 2:
        i = make_gemm(r(1), r(13), r(14), r(14), r(14), r(11), r(11), r(11), r(11), r(10), r(10));
        break;
      case 3:
        i = make_alu(static_cast<AluOp>(r(32) % 5), r(13), r(14), r(14), r(14), r(11), r(11), r(11),
                     r(11), r(1), static_cast<int16_t>(r(16)));
        break;
      default:
        i = make_finish();
        break;
    }
    i.dep = DepFlags{static_cast<bool>(r(1)), static_cast<bool>(r(1)), static_cast<bool>(r(1)),
                     static_cast<bool>(r(1))};
    ASSERT_EQ(decode(encode(i)), i) << describe(i);
  }
}

TEST(VdlaIsa, FieldOverflowIsAnError) {
  EXPECT_ERROR_CONTAINS(encode(make_load(MemType::kInp, 1 << 16, 0, 1, 1, 1)), "sram_base");
  EXPECT_ERROR_CONTAINS(encode(make_load(MemType::kInp, 0, 0, 1, 1, 1, 16)), "y_pad_0 = 16");
  EXPECT_ERROR_CONTAINS(encode(make_gemm(false, 0, 1, 1 << 14, 1, 0, 0, 0, 0, 0, 0)), "iter_out");
  EXPECT_ERROR_CONTAINS(encode(make_gemm(false, 0, 1, 1, 1, 0, 0, 0, 0, 1024, 0)),
                        "wgt_factor_out");
  EXPECT_ERROR_CONTAINS(encode(make_alu(AluOp::kAdd, 0, 1, 1, 1, 0, 0, 0, 0, true, 40000)),
                        "imm = 40000");
}

TEST(VdlaIsa, DecodeRefusesUnknownCodes) {
  EncodedInsn e;
  e.words[0] = 7;
  EXPECT_ERROR_CONTAINS(decode(e), "bad opcode 7");
  e.words[0] = 0 | (6u << 7);  // LOAD, memory type 6
  EXPECT_ERROR_CONTAINS(decode(e), "bad memory type 6");
  e = encode(make_alu(AluOp::kMin, 0, 1, 1, 1, 0, 0, 0, 0, false, 0));
  e.words[1] |= uint64_t{5} << (108 - 64);
  EXPECT_ERROR_CONTAINS(decode(e), "bad ALU opcode 5");
}

TEST(VdlaConfig, PaperPrototypeDepths) {
  const Config cfg;
  cfg.validate();
  EXPECT_EQ(cfg.inp_depth(), 2048);
  EXPECT_EQ(cfg.wgt_depth(), 128);
  EXPECT_EQ(cfg.acc_depth(), 2048);
  EXPECT_EQ(cfg.uop_depth(), 8192);
  EXPECT_DOUBLE_EQ(cfg.peak_gops(), 102.4);
}

TEST(VdlaConfig, SizesMustFitTheIndexFields) {
  Config cfg;
  cfg.wgt_bytes = 512 * 1024;  // 2048 rows, the micro-op's wgt index has 10 bits
  EXPECT_ERROR_CONTAINS(cfg.validate(), "WGT buffer of 2048 rows");
  cfg = Config{};
  cfg.inp_bytes = 1000;
  EXPECT_ERROR_CONTAINS(cfg.validate(), "INP buffer of 1000 bytes");
  cfg = Config{};
  cfg.wgt_bytes = 256 * 1024;  // the open-source default: 1024 rows fit
  cfg.validate();
  EXPECT_EQ(cfg.wgt_depth(), 1024);
}

}  // namespace
}  // namespace kiln::vdla
