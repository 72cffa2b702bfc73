// The cycle model's costs on hand-written streams (deploy/vdla/device/cycle_model.h): GEMM, ALU
// and DMA costs, the one DRAM port shared by the modules, and a load overlapping a GEMM taking
// fewer cycles than the same work in series.
#include <gtest/gtest.h>

#include <vector>

#include "deploy/vdla/device/cycle_model.h"
#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/dram.h"

namespace kiln::vdla {
namespace {

Insn with(Insn i, bool pop_prev, bool pop_next, bool push_prev, bool push_next) {
  i.dep = DepFlags{pop_prev, pop_next, push_prev, push_next};
  return i;
}

const Insn kComputeNoop = make_load(MemType::kUop, 0, 0, 0, 0, 0);

struct Fixture {
  Config cfg;
  Device dev{cfg};
  Dram dram;
  Fixture() {
    dram.alloc(1 << 16);
    for (uint32_t u = 0; u < 8; ++u) dev.uop()[u] = encode_uop(Uop{u, u, u});
  }
  Stats run(const std::vector<Insn>& prog) { return dev.run(dram.bytes(), prog); }
};

TEST(VdlaCycleModel, GemmCostsFillPlusOneCyclePerMicroOp) {
  Fixture f;
  // 2 x 3 iterations of 5 micro-ops: 30 cycles + 4 of fill, then FINISH's 1.
  const Stats st = f.run({make_gemm(false, 0, 5, 2, 3, 5, 0, 0, 0, 0, 0), make_finish()});
  EXPECT_EQ(compute_cost(f.cfg, make_gemm(false, 0, 5, 2, 3, 5, 0, 0, 0, 0, 0)), 34u);
  EXPECT_EQ(st.cycles, 35u);
  EXPECT_EQ(st.gemm_counter, 30u);
  EXPECT_DOUBLE_EQ(st.utilization(), 30.0 / 35.0);
  EXPECT_DOUBLE_EQ(st.gops(f.cfg), 30.0 / 35.0 * 102.4);
}

TEST(VdlaCycleModel, AluRunsAtHalfRate) {
  Fixture f;
  const Stats st = f.run({make_alu(AluOp::kAdd, 0, 4, 1, 1, 0, 0, 0, 0, true, 1), make_finish()});
  EXPECT_EQ(st.cycles, 4u + 2 * 4 + 1);
  EXPECT_EQ(st.alu_counter, 4u);
  EXPECT_EQ(st.utilization(), 0.0);
}

TEST(VdlaCycleModel, LoadCostsLatencyBeatsAndPadRows) {
  Fixture f;
  // 2 rows of 3 INP elements (48 bytes = 6 beats each) padded to 4 x 5: 64 + 12 + 14 pad rows.
  const Insn load = make_load(MemType::kInp, 0, 0, 2, 3, 3, 1, 1, 1, 1);
  const DmaCost c = dma_cost(f.cfg, load);
  EXPECT_EQ(c.latency, 64u);
  EXPECT_EQ(c.transfer, 12u);
  EXPECT_EQ(c.pad, 14u);
  const Stats st = f.run({with(load, false, false, false, true),
                          with(kComputeNoop, true, false, false, false), make_finish()});
  EXPECT_EQ(st.cycles, 90u + 1 + 1);
  EXPECT_EQ(st.dram_busy, 12u);
  // A WGT row is 256 bytes: 32 beats.
  EXPECT_EQ(dma_cost(f.cfg, make_load(MemType::kWgt, 0, 0, 1, 2, 2)).transfer, 64u);
  EXPECT_EQ(dma_cost(f.cfg, make_store(0, 0, 3, 4, 4)).transfer, 3u * 8);
}

TEST(VdlaCycleModel, ModulesShareOneDramPort) {
  Fixture f;
  // The load module's INP load (8 x 16 bytes: 16 beats) and the compute module's ACC load (2 x 64
  // bytes: 16 beats) issue together; the second transfer waits for the first.
  const Stats st = f.run({with(make_load(MemType::kInp, 0, 0, 1, 8, 8), false, false, false, true),
                          make_load(MemType::kAcc, 0, 0, 1, 2, 2),
                          with(kComputeNoop, true, false, false, false), make_finish()});
  EXPECT_EQ(st.dram_busy, 32u);
  EXPECT_EQ(st.cycles, 64u + 16 + 16 + 1 + 1);
}

// Two tiles: each an INP load (64 + 100 cycles) and a GEMM of 100 micro-op steps (104 cycles).
// In series (one buffer, the second load waits for the first GEMM): 164 + 104 + 164 + 104 + 1.
// With two buffers the second load runs during the first GEMM: 164 + 164 + 104 + 1.
TEST(VdlaCycleModel, LoadOverlappingGemmBeatsSerial) {
  const Insn load0 = make_load(MemType::kInp, 0, 0, 1, 50, 50);
  const Insn load1 = make_load(MemType::kInp, 50, 0, 1, 50, 50);
  const Insn gemm0 = make_gemm(false, 0, 1, 100, 1, 1, 0, 0, 0, 0, 0);
  const Insn gemm1 = make_gemm(false, 0, 1, 100, 1, 1, 0, 0, 0, 0, 0);
  Fixture serial;
  const Stats s =
      serial.run({with(load0, false, false, false, true), with(gemm0, true, false, true, false),
                  with(load1, false, true, false, true), with(gemm1, true, false, false, false),
                  make_finish()});
  EXPECT_EQ(s.cycles, 164u + 104 + 164 + 104 + 1);
  Fixture overlapped;
  const Stats o = overlapped.run({with(load0, false, false, false, true),
                                  with(load1, false, false, false, true),
                                  with(gemm0, true, false, false, false),
                                  with(gemm1, true, false, false, false), make_finish()});
  EXPECT_EQ(o.cycles, 164u + 164 + 104 + 1);
  EXPECT_LT(o.cycles, s.cycles);
  EXPECT_EQ(o.gemm_counter, s.gemm_counter);
  EXPECT_GT(o.utilization(), s.utilization());
  EXPECT_EQ(o.load_busy, 2u * 164);
  EXPECT_EQ(o.compute_busy, 2u * 104 + 1);
}

}  // namespace
}  // namespace kiln::vdla
