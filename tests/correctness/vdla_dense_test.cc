// The int8 dense layer compiled for the VDLA (compiler/vdla/dense.h through tensorize, DMA and
// ALU pragmas and cthread, compiler/vdla) runs on the simulator bit-exactly against a naive int8
// matrix-vector product, serial and with two virtual threads, over every config of two shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/vdla/dense.h"
#include "compiler/vdla/program.h"
#include "deploy/vdla/device/device.h"
#include "tests/common/vdla_conv_reference.h"

namespace kiln {
namespace {

/// data [K/16][16], weight [M/16][K/16][16 out][16 in], out [M/16][16].
std::vector<int8_t> dense_reference(int m, int k, const std::vector<int8_t>& data,
                                    const std::vector<int8_t>& weight, int shift) {
  const int kb = k / 16;
  std::vector<int8_t> out(static_cast<size_t>(m));
  for (int o = 0; o < m; ++o) {
    uint32_t sum = 0;
    for (int i = 0; i < k; ++i) {
      const size_t w = ((static_cast<size_t>(o / 16) * kb + i / 16) * 16 + o % 16) * 16 + i % 16;
      sum += static_cast<uint32_t>(int32_t{data[static_cast<size_t>(i)]} * int32_t{weight[w]});
    }
    out[static_cast<size_t>(o)] =
        static_cast<int8_t>(std::clamp(static_cast<int32_t>(sum) >> shift, -128, 127));
  }
  return out;
}

struct Run {
  std::vector<int8_t> out;
  vdla::Stats stats;
};

Run run(const vdla_compiler::VdlaDense& op, const vdla_compiler::VdlaDenseConfig& c,
        const std::vector<int8_t>& data, const std::vector<int8_t>& weight) {
  const vdla::Config cfg;
  const vdla_compiler::VdlaProgram prog = vdla_compiler::build_vdla(
      vdla_compiler::schedule_vdla_dense(op, c, cfg), {op.data, op.weight, op.out}, "dense", cfg);
  vdla::Device dev(cfg);
  vdla::Dram dram;
  const uint64_t a = dram.alloc(data.size()), w = dram.alloc(weight.size(), 256),
                 o = dram.alloc(op.m);
  std::memcpy(dram.at(a, data.size()), data.data(), data.size());
  std::memcpy(dram.at(w, weight.size()), weight.data(), weight.size());
  std::memset(dram.at(o, op.m), 0x5a, op.m);
  vdla::CommandQueue q(dev, dram);
  prog.emit(q, {a, w, o});
  Run r;
  r.stats = q.synchronize();
  r.out.assign(dram.at(o, op.m), dram.at(o, op.m) + op.m);
  return r;
}

void check_shape(int m, int k) {
  const vdla::Config cfg;
  const int shift = 8;
  const vdla_compiler::VdlaDense op = vdla_compiler::vdla_dense(m, k, shift);
  const std::vector<int8_t> data = vdla::testing::random_int8(static_cast<size_t>(k), 3);
  const std::vector<int8_t> weight = vdla::testing::random_int8(static_cast<size_t>(m) * k, 4);
  const std::vector<int8_t> ref = dense_reference(m, k, data, weight, shift);
  size_t configs = 0;
  for (int v : {1, 2}) {
    for (const vdla_compiler::VdlaDenseConfig& c : vdla_compiler::vdla_dense_space(op, v, cfg)) {
      const Run r = run(op, c, data, weight);
      ASSERT_EQ(r.out, ref) << m << "x" << k << " " << c.to_string();
      EXPECT_EQ(r.stats.gemm_counter * 256, static_cast<uint64_t>(m) * k) << c.to_string();
      ++configs;
    }
  }
  EXPECT_GT(configs, 4u);
}

TEST(VdlaDense, EveryConfigBitExact) {
  check_shape(64, 96);
  check_shape(128, 64);
}

// ResNet-18's classifier size (512 inputs; 512 outputs, as 1000 is not a multiple of 16): a
// matrix-vector product reads each weight once, so the DRAM port bounds it (256 KiB at 8 bytes a
// cycle, against 1024 GEMM cycles); the fastest config of each kind on the cycle model runs within
// 10% of that bound.
TEST(VdlaDense, RunsAtTheDramPortsSpeed) {
  const vdla::Config cfg;
  const vdla_compiler::VdlaDense op = vdla_compiler::vdla_dense(512, 512, 8);
  uint64_t best[3] = {0, ~uint64_t{0}, ~uint64_t{0}};
  std::string name[3];
  for (int v : {1, 2}) {
    for (const vdla_compiler::VdlaDenseConfig& c : vdla_compiler::vdla_dense_space(op, v, cfg)) {
      const vdla_compiler::VdlaProgram prog =
          vdla_compiler::build_vdla(vdla_compiler::schedule_vdla_dense(op, c, cfg),
                                    {op.data, op.weight, op.out}, "dense", cfg);
      vdla::Device dev(cfg);
      vdla::Dram dram;
      std::vector<uint64_t> addrs;
      for (int64_t bytes : prog.arg_bytes)
        addrs.push_back(dram.alloc(static_cast<uint64_t>(bytes), 256));
      vdla::CommandQueue q(dev, dram);
      prog.emit(q, addrs);
      const vdla::Stats st = q.synchronize(vdla::RunOptions{false});
      if (st.cycles < best[v]) {
        best[v] = st.cycles;
        name[v] = c.to_string() + " util=" + std::to_string(st.utilization());
      }
    }
  }
  std::printf("dense 512x512: serial %llu cycles (%s) | vthread %llu cycles (%s)\n",
              static_cast<unsigned long long>(best[1]), name[1].c_str(),
              static_cast<unsigned long long>(best[2]), name[2].c_str());
  const double bound = 512.0 * 512.0 / cfg.bus_bytes;
  EXPECT_LT(static_cast<double>(best[1]), 1.1 * bound);
  EXPECT_LT(static_cast<double>(best[2]), 1.1 * bound);
}

TEST(VdlaDense, ConfigProblemsAreNamed) {
  const vdla_compiler::VdlaDense op = vdla_compiler::vdla_dense(64, 96, 8);
  try {
    vdla_compiler::schedule_vdla_dense(op, {3, 1, 1}, vdla::Config{});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile_m must be at least 2 and divide 4"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
