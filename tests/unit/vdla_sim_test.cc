// The VDLA's functional semantics on tiny cases (VTA's sim_driver.cc's): each LOAD kind with its
// padding, GEMM with its loops, reset and 32-bit wrap, every ALU op, STORE's truncation, the
// counters, and the dependence tokens ordering the modules.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/dram.h"

namespace kiln::vdla {
namespace {

// A load-module instruction followed by what makes FINISH wait for it.
std::vector<Insn> after_load(Insn load) {
  load.dep.push_next = true;
  Insn wait = make_load(MemType::kUop, 0, 0, 0, 0, 0);  // a compute no-op
  wait.dep.pop_prev = true;
  return {load, wait, make_finish()};
}

TEST(VdlaSim, LoadInpWithPadding) {
  Device dev{Config{}};
  Dram dram;
  const uint64_t base = dram.alloc(16 * 12, 16);
  for (int e = 0; e < 12; ++e)
    std::memset(dram.at(base + e * 16, 16), e + 1, 16);  // element e holds e+1
  // Rows 0 and 1 of a 3x4 array, columns 1..3, padded by 1 above, 1 left and 1 right: 3 x 5 rows.
  const Insn load =
      make_load(MemType::kInp, 10, static_cast<uint32_t>(base / 16) + 1, 2, 3, 4, 1, 0, 1, 1);
  const Stats st = dev.run(dram.bytes(), after_load(load));
  const int expect[3][5] = {{0, 0, 0, 0, 0}, {0, 2, 3, 4, 0}, {0, 6, 7, 8, 0}};
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int b = 0; b < 16; ++b)
        ASSERT_EQ(dev.inp()[(10 + y * 5 + x) * 16 + b], expect[y][x]) << y << "," << x;
    }
  }
  EXPECT_EQ(st.inp_load_nbytes, 2u * 3 * 16);  // padding not counted
}

TEST(VdlaSim, LoadWgtAccAcc8AndUop) {
  Device dev{Config{}};
  Dram dram;
  const uint64_t w = dram.alloc(256, 256), a = dram.alloc(64, 64), a8 = dram.alloc(16, 16),
                 u = dram.alloc(8, 4);
  for (int i = 0; i < 256; ++i) *dram.at(w + i) = static_cast<uint8_t>(i);
  for (int i = 0; i < 16; ++i) {
    const int32_t v = -1000 * i;
    std::memcpy(dram.at(a + 4 * i, 4), &v, 4);
    *dram.at(a8 + i) = static_cast<uint8_t>(-i);  // sign-extended into ACC
  }
  const uint32_t uops[2] = {encode_uop(Uop{1, 2, 3}), encode_uop(Uop{4, 5, 6})};
  std::memcpy(dram.at(u, 8), uops, 8);
  std::vector<Insn> prog = {make_load(MemType::kAcc, 7, static_cast<uint32_t>(a / 64), 1, 1, 1),
                            make_load(MemType::kAcc8, 8, static_cast<uint32_t>(a8 / 16), 1, 1, 1),
                            make_load(MemType::kUop, 100, static_cast<uint32_t>(u / 4), 1, 2, 2)};
  for (const Insn& i :
       after_load(make_load(MemType::kWgt, 5, static_cast<uint32_t>(w / 256), 1, 1, 1)))
    prog.push_back(i);
  const Stats st = dev.run(dram.bytes(), prog);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(dev.wgt()[5 * 256 + i], static_cast<int8_t>(i));
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(dev.acc()[7 * 16 + i], -1000 * i);
    EXPECT_EQ(dev.acc()[8 * 16 + i], -i);
  }
  EXPECT_EQ(dev.uop()[100], uops[0]);
  EXPECT_EQ(dev.uop()[101], uops[1]);
  EXPECT_EQ(st.wgt_load_nbytes, 256u);
  EXPECT_EQ(st.acc_load_nbytes, 64u + 16u);
  EXPECT_EQ(st.uop_load_nbytes, 8u);
}

TEST(VdlaSim, GemmWithLoopsResetAndWrap) {
  Device dev{Config{}};
  Dram dram;
  dram.alloc(64);
  // INP rows 0..3, WGT rows 0..3 with known values; ACC rows 10.. accumulate.
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 16; ++k) dev.inp()[r * 16 + k] = static_cast<int8_t>(r + k - 8);
    for (int o = 0; o < 16; ++o) {
      for (int k = 0; k < 16; ++k)
        dev.wgt()[(r * 16 + o) * 16 + k] = static_cast<int8_t>((o * 3 + k + r) % 11 - 5);
    }
  }
  dev.uop()[0] = encode_uop(Uop{10, 0, 0});
  dev.uop()[1] = encode_uop(Uop{11, 1, 1});
  for (int i = 0; i < 16 * 16; ++i) dev.acc()[10 * 16 + i] = 12345;
  // reset rows 10..13 (iter_out 2 x 2 micro-ops, dst_factor_out 2), then accumulate with loops:
  // i < 2 (dst +2, src +2, wgt 0), j < 2 (dst 0, src 0, wgt +2).
  const std::vector<Insn> prog = {make_gemm(true, 0, 2, 2, 1, 2, 0, 0, 0, 0, 0),
                                  make_gemm(false, 0, 2, 2, 2, 2, 0, 2, 0, 0, 2), make_finish()};
  const Stats st = dev.run(dram.bytes(), prog);
  for (int i = 0; i < 2; ++i) {
    for (int u = 0; u < 2; ++u) {
      const int a = 10 + u + 2 * i, s = u + 2 * i;
      for (int o = 0; o < 16; ++o) {
        int32_t want = 0;
        for (int j = 0; j < 2; ++j) {
          const int w = u + 2 * j;
          for (int k = 0; k < 16; ++k)
            want += dev.inp()[s * 16 + k] * dev.wgt()[(w * 16 + o) * 16 + k];
        }
        ASSERT_EQ(dev.acc()[a * 16 + o], want) << a << " " << o;
      }
    }
  }
  EXPECT_EQ(st.gemm_counter, 8u);  // 2 x 2 x 2, the reset not counted
  EXPECT_EQ(st.reset_counter, 4u);

  // The sum wraps at 32 bits.
  dev.acc()[10 * 16] = INT32_MAX;
  for (int k = 0; k < 16; ++k) dev.inp()[k] = 1, dev.wgt()[k] = 1;  // row 0 of WGT, output 0
  dev.run(dram.bytes(),
          std::vector<Insn>{make_gemm(false, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()});
  EXPECT_EQ(dev.acc()[10 * 16], INT32_MIN + 15);
}

TEST(VdlaSim, AluOps) {
  Device dev{Config{}};
  Dram dram;
  dram.alloc(64);
  auto set = [&](int row, int32_t v) {
    for (int l = 0; l < 16; ++l) dev.acc()[row * 16 + l] = v + l;
  };
  dev.uop()[0] = encode_uop(Uop{0, 1, 0});
  struct Case {
    AluOp op;
    bool use_imm;
    int32_t imm, a, b, want0;
  } cases[] = {
      {AluOp::kMin, true, 5, 10, 0, 5},     {AluOp::kMax, true, -3, -10, 0, -3},
      {AluOp::kAdd, false, 0, 7, 100, 107}, {AluOp::kShr, true, 2, -17, 0, -5},
      {AluOp::kShr, true, -3, 5, 0, 40},    {AluOp::kMul, false, 0, -3, 6, -18},
      {AluOp::kMin, false, 0, 50, 20, 20},  {AluOp::kMax, false, 0, 50, 20, 50},
  };
  for (const Case& c : cases) {
    set(0, c.a);
    set(1, c.b);
    for (int l = 0; l < 16; ++l) dev.acc()[16 + l] = c.b;  // the src row is constant
    dev.run(
        dram.bytes(),
        std::vector<Insn>{make_alu(c.op, 0, 1, 1, 1, 0, 0, 0, 0, c.use_imm, c.imm), make_finish()});
    EXPECT_EQ(dev.acc()[0], c.want0) << alu_op_name(c.op) << " imm " << c.imm;
  }
  // Loops step both rows: ACC[2 + i] = ACC[2 + i] + ACC[6 + i] for i < 3.
  for (int r = 0; r < 3; ++r) set(2 + r, 100 * r), set(6 + r, 1);
  dev.uop()[0] = encode_uop(Uop{2, 6, 0});
  const Stats st = dev.run(
      dram.bytes(),
      std::vector<Insn>{make_alu(AluOp::kAdd, 0, 1, 3, 1, 1, 0, 1, 0, false, 0), make_finish()});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(dev.acc()[(2 + r) * 16 + 4], 100 * r + 4 + 1 + 4);
  EXPECT_EQ(st.alu_counter, 3u);
}

TEST(VdlaSim, StoreTruncatesToInt8WithStride) {
  Device dev{Config{}};
  Dram dram;
  const uint64_t out = dram.alloc(16 * 8, 16);
  for (int r = 0; r < 4; ++r) {
    for (int l = 0; l < 16; ++l) dev.acc()[(20 + r) * 16 + l] = 300 * (r + 1) - 129 * l;
  }
  // 2 x 2 ACC rows to DRAM rows 1, 2 and 5, 6 (x_stride 4).
  Insn store = make_store(20, static_cast<uint32_t>(out / 16) + 1, 2, 2, 4);
  store.dep.push_prev = true;
  Insn wait = make_load(MemType::kUop, 0, 0, 0, 0, 0);
  wait.dep.pop_next = true;
  const Stats st = dev.run(dram.bytes(), std::vector<Insn>{store, wait, make_finish()});
  const int rows[4] = {1, 2, 5, 6};
  for (int r = 0; r < 4; ++r) {
    for (int l = 0; l < 16; ++l) {
      EXPECT_EQ(static_cast<int8_t>(*dram.at(out + rows[r] * 16 + l)),
                static_cast<int8_t>(300 * (r + 1) - 129 * l));
    }
  }
  EXPECT_EQ(*dram.at(out), 0);
  EXPECT_EQ(st.out_store_nbytes, 64u);
}

// Load 1 fills INP row 0 and tells compute; load 2 overwrites row 0. The GEMM must see load 1's
// data: with the WAR token (load 2 pops what the GEMM pushes) it does.
TEST(VdlaSim, TokensOrderTheModules) {
  auto run = [](bool war_token) {
    Device dev{Config{}};
    Dram dram;
    const uint64_t a = dram.alloc(32, 16);
    std::memset(dram.at(a, 16), 1, 16);
    std::memset(dram.at(a + 16, 16), 2, 16);
    for (int k = 0; k < 16; ++k) dev.wgt()[k] = 1;
    dev.uop()[0] = encode_uop(Uop{0, 0, 0});
    Insn l1 = make_load(MemType::kInp, 0, static_cast<uint32_t>(a / 16), 1, 1, 1);
    l1.dep.push_next = true;
    Insn l2 = make_load(MemType::kInp, 0, static_cast<uint32_t>(a / 16) + 1, 1, 1, 1);
    l2.dep.pop_next = war_token;
    l2.dep.push_next = true;
    Insn g = make_gemm(false, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0);
    g.dep.pop_prev = true;
    g.dep.push_prev = war_token;
    Insn wait = make_load(MemType::kUop, 0, 0, 0, 0, 0);
    wait.dep.pop_prev = true;
    dev.run(dram.bytes(), std::vector<Insn>{l1, l2, g, wait, make_finish()});
    return dev.acc()[0];
  };
  EXPECT_EQ(run(true), 16);   // 16 x 1 x 1
  EXPECT_EQ(run(false), 32);  // the race the token prevents: load 2 ran first
}

TEST(VdlaSim, TimingOnlyRunChecksButDoesNotExecute) {
  Device dev{Config{}};
  Dram dram;
  dram.alloc(64);
  dev.uop()[0] = encode_uop(Uop{0, 0, 0});
  dev.acc()[0] = 5;
  for (int k = 0; k < 16; ++k) dev.inp()[k] = 1, dev.wgt()[k] = 1;
  const Stats st =
      dev.run(dram.bytes(),
              std::vector<Insn>{make_gemm(false, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()},
              RunOptions{false});
  EXPECT_EQ(dev.acc()[0], 5);
  EXPECT_EQ(st.gemm_counter, 1u);
  EXPECT_GT(st.cycles, 0u);
}

}  // namespace
}  // namespace kiln::vdla
