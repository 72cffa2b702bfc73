// The VDLA driver (deploy/vdla/driver): VTA's rules for dependence flags and no-ops, the
// micro-kernel cache over the UOP buffer, DMA descriptors, and a small GEMM + ALU + store built
// through the API and run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "deploy/vdla/driver/command_queue.h"
#include "tests/common/expect_error.h"

namespace kiln::vdla {
namespace {

struct Fixture {
  Config cfg;
  Device dev;
  Dram dram;
  CommandQueue q;
  explicit Fixture(Config c = Config{}) : cfg(c), dev(cfg), q(dev, dram) { dram.alloc(4096); }
};

TEST(VdlaDriver, DepPushSetsTheFlagOfTheStagesLastInstruction) {
  Fixture f;
  f.q.load_buffer_2d(MemType::kInp, 0, 0, 1, 1, 1);
  f.q.dep_push(kLoadStage, kComputeStage);
  ASSERT_EQ(f.q.insns().size(), 1u);
  EXPECT_TRUE(f.q.insns()[0].dep.push_next);
  // The flag is taken: a second push is a load no-op (LOAD INP, x_size 0) carrying it.
  f.q.dep_push(kLoadStage, kComputeStage);
  ASSERT_EQ(f.q.insns().size(), 2u);
  EXPECT_TRUE(f.q.insns()[1].is_noop());
  EXPECT_EQ(f.q.insns()[1].mem_type, MemType::kInp);
  EXPECT_TRUE(f.q.insns()[1].dep.push_next);
  // The last instruction is not the compute stage's: a compute no-op (LOAD UOP, x_size 0).
  f.q.dep_push(kComputeStage, kStoreStage);
  EXPECT_EQ(f.q.insns().back().mem_type, MemType::kUop);
  EXPECT_TRUE(f.q.insns().back().dep.push_next);
  f.q.dep_push(kStoreStage, kComputeStage);
  EXPECT_EQ(f.q.insns().back().opcode, Opcode::kStore);
  EXPECT_TRUE(f.q.insns().back().dep.push_prev);
}

TEST(VdlaDriver, DepPopIsCarriedByTheStagesNextInstruction) {
  Fixture f;
  f.q.dep_pop(kLoadStage, kComputeStage);            // pending pop_prev on compute
  f.q.load_buffer_2d(MemType::kInp, 0, 0, 1, 1, 1);  // a load: does not take it
  f.q.load_buffer_2d(MemType::kAcc, 0, 0, 1, 1, 1);  // compute: takes it
  ASSERT_EQ(f.q.insns().size(), 2u);
  EXPECT_FALSE(f.q.insns()[0].dep.pop_prev);
  EXPECT_TRUE(f.q.insns()[1].dep.pop_prev);
  // Two pops of one kind: the first is committed as a no-op.
  f.q.dep_pop(kComputeStage, kLoadStage);
  f.q.dep_pop(kComputeStage, kLoadStage);
  ASSERT_EQ(f.q.insns().size(), 3u);
  EXPECT_TRUE(f.q.insns()[2].is_noop());
  EXPECT_TRUE(f.q.insns()[2].dep.pop_next);
  f.q.load_buffer_2d(MemType::kWgt, 0, 0, 1, 1, 1);
  EXPECT_TRUE(f.q.insns().back().dep.pop_next);
}

TEST(VdlaDriver, SynchronizeBalancesAndFinishes) {
  Fixture f;
  f.q.load_buffer_2d(MemType::kInp, 0, 0, 1, 1, 1);
  f.q.store_buffer_2d(0, 0, 1, 1, 1);
  const Stats st = f.q.synchronize();
  // The store, the stream's last instruction, carries its push to compute; the load is no longer
  // last, so a load no-op pushes for it. In compute, a no-op popping both, then FINISH.
  EXPECT_EQ(st.load_insns, 2u);
  EXPECT_EQ(st.store_insns, 1u);
  EXPECT_EQ(st.compute_insns, 2u);
  EXPECT_TRUE(f.q.insns().empty());
  // The queue is reusable.
  f.q.synchronize();
}

TEST(VdlaDriver, MicroKernelsAreCachedAndEvicted) {
  Config small;
  small.uop_bytes = 64;  // 16 micro-ops
  Fixture f(small);
  auto rec = [](uint32_t base) {
    return [base](UopKernel& k) {
      k.loop_begin(2, 1, 0, 0);
      for (uint32_t i = 0; i < 6; ++i) k.push(base + 2 * i, 0, 0);
      k.loop_end();
    };
  };
  f.q.push_gemm("A", true, rec(0));
  f.q.push_gemm("A", true, rec(0));
  EXPECT_EQ(f.q.uop_loads(), 1u);
  f.q.push_gemm("B", true, rec(100));  // rows 6..11 of the ring
  f.q.push_gemm("C", true, rec(200));  // does not fit after B: wraps to 0 and evicts A
  f.q.push_gemm("B", true, rec(100));  // still resident
  f.q.push_gemm("A", true, rec(0));    // reloaded, at 6: evicts B
  EXPECT_EQ(f.q.uop_loads(), 4u);
  EXPECT_EQ(f.q.kernels_recorded(), 3u);
  const std::vector<Insn>& insns = f.q.insns();
  const Insn& last = insns.back();
  EXPECT_EQ(last.opcode, Opcode::kGemm);
  EXPECT_EQ(last.uop_bgn, 6u);
  EXPECT_EQ(last.uop_end, 12u);
  EXPECT_EQ(last.iter_out, 2u);
  EXPECT_EQ(last.dst_factor_out, 1u);
  f.q.synchronize();
}

TEST(VdlaDriver, MicroKernelRecordingRules) {
  Fixture f;
  EXPECT_ERROR_CONTAINS(f.q.push_gemm("hazard", false,
                                      [](UopKernel& k) {
                                        k.push(3, 0, 0);
                                        k.push(3, 1, 1);
                                      }),
                        "both accumulate into ACC row 3");
  // A reset writes without reading: the same row twice is fine. So is ALU at II=2.
  f.q.push_gemm("reset twice", true, [](UopKernel& k) {
    k.push(3, 0, 0);
    k.push(3, 0, 0);
  });
  EXPECT_ERROR_CONTAINS(f.q.push_gemm("three", false,
                                      [](UopKernel& k) {
                                        k.loop_begin(2, 1, 0, 0);
                                        k.loop_begin(2, 1, 0, 0);
                                        k.loop_begin(2, 1, 0, 0);
                                      }),
                        "a third loop");
  EXPECT_ERROR_CONTAINS(f.q.push_gemm("late loop", false,
                                      [](UopKernel& k) {
                                        k.push(0, 0, 0);
                                        k.loop_begin(2, 1, 0, 0);
                                      }),
                        "loop begins after micro-ops");
  EXPECT_ERROR_CONTAINS(f.q.push_gemm("open", false,
                                      [](UopKernel& k) {
                                        k.loop_begin(2, 1, 0, 0);
                                        k.push(0, 0, 0);
                                      }),
                        "not ended");
  EXPECT_ERROR_CONTAINS(f.q.push_gemm("empty", false, [](UopKernel&) {}), "no micro-ops");
  EXPECT_ERROR_CONTAINS(f.q.push_alu("reset twice", AluOp::kAdd, false, 0, [](UopKernel&) {}),
                        "recorded as another kind");
}

TEST(VdlaDriver, DescriptorsAreChecked) {
  Fixture f;
  EXPECT_ERROR_CONTAINS(f.q.load_buffer_2d(MemType::kInp, 0, 8, 1, 1, 1),
                        "not aligned to the 16-byte INP");
  EXPECT_ERROR_CONTAINS(f.q.load_buffer_2d(MemType::kInp, 0, 0, 1, 1, 1, 16), "x_pad_0 = 16");
  EXPECT_ERROR_CONTAINS(f.q.load_buffer_2d(MemType::kOut, 0, 0, 1, 1, 1), "OUT is a store's");
  EXPECT_ERROR_CONTAINS(f.q.dep_push(kLoadStage, kStoreStage), "neighbouring");
  EXPECT_ERROR_CONTAINS(f.q.dep_pop(0, 1), "stages are load 1");
}

// out[o] = clip((sum_k x[k] * w[o][k]) >> 2, -128, 127), through the driver end to end.
TEST(VdlaDriver, GemmAluStoreEndToEnd) {
  Fixture f;
  const uint64_t x = f.dram.alloc(16, 16), w = f.dram.alloc(256, 256), out = f.dram.alloc(16, 16);
  for (int k = 0; k < 16; ++k) *f.dram.at(x + k) = static_cast<uint8_t>(k - 4);
  for (int o = 0; o < 16; ++o) {
    for (int k = 0; k < 16; ++k)
      *f.dram.at(w + o * 16 + k) = static_cast<uint8_t>((o - 8) * (k % 3));
  }
  CommandQueue& q = f.q;
  q.load_buffer_2d(MemType::kInp, 0, x, 1, 1, 1);
  q.load_buffer_2d(MemType::kWgt, 0, w, 1, 1, 1);
  q.dep_push(kLoadStage, kComputeStage);
  q.dep_pop(kLoadStage, kComputeStage);
  q.push_gemm("reset", true, [](UopKernel& k) { k.push(0, 0, 0); });
  q.push_gemm("gemm", false, [](UopKernel& k) { k.push(0, 0, 0); });
  q.push_alu("shr", AluOp::kShr, true, 2, [](UopKernel& k) { k.push(0, 0); });
  q.push_alu("max", AluOp::kMax, true, -128, [](UopKernel& k) { k.push(0, 0); });
  q.push_alu("min", AluOp::kMin, true, 127, [](UopKernel& k) { k.push(0, 0); });
  q.dep_push(kComputeStage, kStoreStage);
  q.dep_pop(kComputeStage, kStoreStage);
  q.store_buffer_2d(0, out, 1, 1, 1);
  const Stats st = q.synchronize();
  for (int o = 0; o < 16; ++o) {
    int32_t sum = 0;
    for (int k = 0; k < 16; ++k) sum += (k - 4) * static_cast<int8_t>((o - 8) * (k % 3));
    EXPECT_EQ(static_cast<int8_t>(*f.dram.at(out + o)), std::clamp(sum >> 2, -128, 127)) << o;
  }
  EXPECT_EQ(st.gemm_counter, 1u);
  EXPECT_EQ(st.alu_counter, 3u);
  EXPECT_EQ(st.inp_load_nbytes, 16u);
  EXPECT_EQ(st.wgt_load_nbytes, 256u);
  EXPECT_EQ(st.uop_load_nbytes, 5u * 4);
  EXPECT_EQ(st.out_store_nbytes, 16u);
}

}  // namespace
}  // namespace kiln::vdla
