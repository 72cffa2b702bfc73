// The int8 conv2d compiled for the VDLA (compiler/topi/vdla_conv2d.h scheduled, lowered by
// compiler::lower_vdla with tensorize, DMA and ALU pragmas and cthread virtual threads, turned into
// driver calls by compiler/vdla/program.h, through their JSON) runs on the simulator bit-exactly
// against the naive int8 reference, serial and with two virtual threads, on small shapes with
// explicit configs (padding on every side, strides, several input channel blocks per step, both
// virtual-thread axes, resident weights, 1x1 and 5x5 kernels, a non-square input, relu on and off)
// and on every ResNet-18 layer of the paper's list (bench/resnet_layers.h); the cycle model must
// find the two-thread stream faster on the layers the paper offloads (C2..C12). Every case has a
// random bias (negative ones too) and a random shift per output channel (QConv's contract). C1 has
// 3 input channels: they are zero-padded to one block of 16, as the blocked layout needs.
#include "compiler/topi/vdla_conv2d.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "bench/resnet_layers.h"
#include "compiler/vdla/conv2d.h"
#include "compiler/vdla/program.h"
#include "deploy/vdla/device/device.h"
#include "tests/common/vdla_conv_reference.h"

namespace kiln {
namespace {

using topi::VdlaConv2dShape;
using vdla_compiler::VdlaConv2dConfig;

struct Result {
  std::vector<int8_t> out;
  vdla::Stats stats;
  std::string summary;
};

Result run_compiled(const VdlaConv2dShape& s, const VdlaConv2dConfig& c,
                    const std::vector<int8_t>& data, const std::vector<int8_t>& kernel,
                    const vdla::testing::BiasShift& bs, bool relu) {
  const vdla::Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d(s, relu);
  const te::Schedule sch = vdla_compiler::schedule_vdla_conv2d(op, c, cfg);
  const vdla::VdlaProgram built = vdla_compiler::build_vdla(sch, op.args(), "conv2d", cfg);
  // Every run goes through the program's JSON, as a bundle carries it.
  const std::string text = built.to_json().dump();
  const vdla::VdlaProgram prog =
      vdla::VdlaProgram::from_json(kiln::Json::parse(text), "conv2d.json");
  EXPECT_EQ(prog.to_json().dump(), text);
  EXPECT_EQ(prog.to_string(), built.to_string());
  // KILN_VDLA_DUMP=1 prints each program's driver calls (VdlaProgram::to_string), for reading a
  // stream.
  if (std::getenv("KILN_VDLA_DUMP")) std::fputs(prog.to_string().c_str(), stderr);
  vdla::Device dev(cfg);
  vdla::Dram dram;
  const uint64_t out_bytes = static_cast<uint64_t>(s.oc) * s.oh() * s.ow();
  const uint64_t vec_bytes = bs.bias.size() * 4;
  const uint64_t a_data = dram.alloc(data.size()),
                 a_kernel = dram.alloc(kernel.size(), cfg.wgt_row_bytes()),
                 a_bias = dram.alloc(vec_bytes), a_shift = dram.alloc(vec_bytes),
                 a_out = dram.alloc(out_bytes);
  std::memcpy(dram.at(a_data, data.size()), data.data(), data.size());
  std::memcpy(dram.at(a_kernel, kernel.size()), kernel.data(), kernel.size());
  std::memcpy(dram.at(a_bias, vec_bytes), bs.bias.data(), vec_bytes);
  std::memcpy(dram.at(a_shift, vec_bytes), bs.shift.data(), vec_bytes);
  std::memset(dram.at(a_out, out_bytes), 0x5a, out_bytes);
  vdla::CommandQueue q(dev, dram);
  prog.emit(q, {a_data, a_kernel, a_bias, a_shift, a_out});
  Result r;
  r.stats = q.synchronize();
  r.out.assign(dram.at(a_out, out_bytes), dram.at(a_out, out_bytes) + out_bytes);
  r.summary = prog.summary();
  // The timing-only run (what the config chooser uses) counts and times exactly the same.
  const vdla::Stats timed = vdla_compiler::time_conv2d(op, c, cfg).stats;
  EXPECT_EQ(timed.cycles, r.stats.cycles);
  EXPECT_EQ(timed.gemm_counter, r.stats.gemm_counter);
  EXPECT_EQ(timed.dram_busy, r.stats.dram_busy);
  return r;
}

void check(const VdlaConv2dShape& s, const VdlaConv2dConfig& c, const char* what, bool relu,
           Result* out = nullptr, int real_ic = 0) {
  std::vector<int8_t> data = vdla::testing::random_int8(static_cast<size_t>(s.ic) * s.h * s.w, 17);
  std::vector<int8_t> kernel =
      vdla::testing::random_int8(static_cast<size_t>(s.oc) * s.ic * s.k * s.k, 29);
  if (real_ic > 0 && real_ic < s.ic) {
    // Zero the padded input channels of the data and of the kernel.
    for (size_t i = 0; i < data.size(); ++i) {
      if (static_cast<int>(i % 16) >= real_ic) data[i] = 0;
    }
    for (size_t i = 0; i < kernel.size(); ++i) {
      if (static_cast<int>(i % 16) >= real_ic) kernel[i] = 0;
    }
  }
  const vdla::testing::BiasShift bs = vdla::testing::random_bias_shift(s, 41);
  const std::vector<int8_t> ref =
      vdla::testing::conv2d_reference(s, data, kernel, bs.bias, bs.shift, relu);
  Result r = run_compiled(s, c, data, kernel, bs, relu);
  ASSERT_EQ(r.out, ref) << what << " relu=" << relu << " " << c.to_string();
  // Every multiply-add ran exactly once on the GEMM unit, every output was stored once.
  EXPECT_EQ(r.stats.gemm_counter * 256, static_cast<uint64_t>(s.macs())) << what;
  EXPECT_EQ(r.stats.out_store_nbytes, static_cast<uint64_t>(s.oc) * s.oh() * s.ow()) << what;
  // Not every output clipped: the shifts keep the comparison meaningful (with relu, about half of
  // the outputs are 0; without, some are negative).
  size_t clipped = 0, zero = 0, negative = 0;
  for (int8_t v : ref) {
    clipped += (v == 127 || v == -128);
    zero += v == 0;
    negative += v < 0;
  }
  EXPECT_LT(clipped, ref.size() / 4) << what;
  EXPECT_LT(zero, ref.size() * 3 / 4) << what;
  if (relu) {
    EXPECT_EQ(negative, 0u) << what;
  } else {
    EXPECT_GT(negative, ref.size() / 8) << what;
  }
  if (out) *out = std::move(r);
}

struct Case {
  const char* name;
  VdlaConv2dShape shape;
  VdlaConv2dConfig config;
};

class VdlaCompiledSmall : public ::testing::TestWithParam<Case> {};

TEST_P(VdlaCompiledSmall, BitExact) {
  check(GetParam().shape, GetParam().config, GetParam().name, false);
  check(GetParam().shape, GetParam().config, GetParam().name, true);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, VdlaCompiledSmall,
    ::testing::Values(
        Case{"k3_serial", {8, 8, 32, 32, 3, 1, 1}, {1, 1, 4, 0, 1, false}},
        Case{"k3_ic2_oc2", {8, 8, 32, 32, 3, 1, 1}, {2, 2, 2, 4, 1, false}},
        Case{"k3_vthread_oc", {8, 8, 32, 32, 3, 1, 1}, {1, 1, 4, 0, 2, false}},
        Case{"k3_vthread_h", {8, 8, 32, 32, 3, 1, 1}, {2, 2, 2, 0, 2, true}},
        Case{"k1_stride2", {8, 8, 32, 64, 1, 2, 0}, {2, 1, 2, 0, 2, false}},
        Case{"k5_pad2_nonsquare", {6, 10, 16, 32, 5, 1, 2}, {1, 1, 3, 5, 2, false}},
        Case{"k3_stride2", {9, 9, 48, 32, 3, 2, 1}, {2, 3, 1, 0, 1, false}},
        Case{"wgt_resident", {8, 8, 32, 64, 3, 1, 1}, {2, 2, 2, 4, 1, false, true}},
        Case{"wgt_resident_vthread", {8, 8, 32, 64, 3, 1, 1}, {1, 2, 2, 0, 2, false, true}},
        Case{"wgt_resident_vthread_h", {8, 8, 32, 64, 3, 1, 1}, {2, 2, 2, 4, 2, true, true}}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Every ResNet-18 layer (C1's 3 input channels padded to 16), serial and with two virtual threads,
// each with the config the chooser picks on the cycle model; two threads must be faster on the
// layers the paper offloads.
class VdlaCompiledResNet : public ::testing::TestWithParam<bench::ConvLayer> {};

TEST_P(VdlaCompiledResNet, BitExactSerialAndVirtualThreads) {
  const bench::ConvLayer& l = GetParam();
  VdlaConv2dShape s{l.hw, l.hw, (l.ic + 15) / 16 * 16, l.oc, l.k, l.stride, l.pad()};
  const vdla::Config cfg;
  const auto t0 = std::chrono::steady_clock::now();
  const topi::VdlaConv2d op = topi::vdla_conv2d(s, false);
  const VdlaConv2dConfig c1 = vdla_compiler::choose_conv2d_config(op, 1, cfg);
  const VdlaConv2dConfig c2 = vdla_compiler::choose_conv2d_config(op, 2, cfg);
  const auto t1 = std::chrono::steady_clock::now();
  Result r1, r2;
  // Relu on for the serial stream, off for the two threads' (the program differs only in the
  // lower clip's immediate).
  check(s, c1, l.name, true, &r1, l.ic);
  check(s, c2, l.name, false, &r2, l.ic);
  // Latency hiding pays on every layer the paper offloads. C1 (kept on the CPU by the paper) is
  // one reduction step of 49 taps whose weights stay resident: its serial stream is already about
  // 84% compute, and halving the buffers for two threads costs as much as the overlap gains.
  if (std::string(l.name) != "C1") {
    EXPECT_LT(r2.stats.cycles, r1.stats.cycles) << l.name;
    EXPECT_GT(r2.stats.utilization(), r1.stats.utilization()) << l.name;
  }
  std::printf(
      "%s serial %s: cycles=%llu util=%.3f (%s) | vthread %s: cycles=%llu util=%.3f (%s) | choose "
      "%.1fs\n",
      l.name, c1.to_string().c_str(), static_cast<unsigned long long>(r1.stats.cycles),
      r1.stats.utilization(), r1.summary.c_str(), c2.to_string().c_str(),
      static_cast<unsigned long long>(r2.stats.cycles), r2.stats.utilization(), r2.summary.c_str(),
      std::chrono::duration<double>(t1 - t0).count());
}

INSTANTIATE_TEST_SUITE_P(ResNet18, VdlaCompiledResNet,
                         ::testing::ValuesIn(bench::resnet18_layers()),
                         [](const ::testing::TestParamInfo<bench::ConvLayer>& info) {
                           return info.param.name;
                         });

// Two virtual threads become the paper's Fig. 8/9 stream: per reduction step each thread's loads
// then each thread's GEMM, a token from each load to its GEMM and from each GEMM to the same
// thread's next load, each thread in its own half of the buffers.
TEST(VdlaCompiledProgram, TwoThreadsInterleaveWithTokens) {
  const vdla::Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d({8, 8, 32, 32, 3, 1, 1}, false);
  const vdla_compiler::VdlaProgram prog = vdla_compiler::build_vdla(
      vdla_compiler::schedule_vdla_conv2d(op, {1, 1, 4, 0, 2, false}, cfg), op.args(), "conv2d",
      cfg);
  std::string kinds;
  std::istringstream lines(prog.to_string());
  for (std::string line; std::getline(lines, line) && kinds.size() < 400;) {
    std::istringstream words(line);
    std::string a, b, c;
    words >> a >> b;
    if (a == "GEMM" || a == "ALU") {
      std::string sig;
      std::getline(words, sig);
      kinds +=
          a + (b == "gemm.reset" ? " reset" : "") + " @" + sig.substr(sig.find("dst0 ") + 5) + "\n";
    } else if (a == "LOAD" || a == "STORE") {
      kinds += a + " " + b + "\n";
    } else {
      kinds += a + " " + b + "\n";
    }
  }
  const std::string step0 =
      "GEMM reset @0 src0 0\nGEMM reset @32 src0 0\n"
      "LOAD INP[0]\nLOAD WGT[0]\npush load->compute\n"
      "LOAD INP[60]\nLOAD WGT[9]\npush load->compute\n"
      "pop load->compute\nGEMM @0 src0 0\npush compute->load\n"
      "pop load->compute\nGEMM @32 src0 60\npush compute->load\n"
      "pop compute->load\nLOAD INP[0]\nLOAD WGT[0]\npush load->compute\n"
      "pop compute->load\nLOAD INP[60]\nLOAD WGT[9]\npush load->compute\n";
  EXPECT_EQ(kinds.substr(0, step0.size()), step0) << prog.to_string();
}

TEST(VdlaCompiledErrors, ConfigProblemsAreNamed) {
  const topi::VdlaConv2d op = topi::vdla_conv2d({8, 8, 32, 32, 3, 1, 1}, false);
  try {
    vdla_compiler::schedule_vdla_conv2d(op, {3, 1, 4, 0, 1, false}, vdla::Config{});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile_oc must divide 2"), std::string::npos) << e.what();
  }
}

TEST(VdlaCompiledErrors, ScopesAreChecked) {
  const vdla::Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d({8, 8, 32, 32, 3, 1, 1}, false);
  {
    te::Schedule sch = vdla_compiler::schedule_vdla_conv2d(op, {1, 1, 4, 0, 1, false}, cfg);
    sch[op.conv].set_scope("local");
    try {
      vdla_compiler::build_vdla(sch, op.args(), "conv2d", cfg);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "intrinsic 'vdla.gemm' needs 'conv' in local.acc_buffer, but it is in local"),
                std::string::npos)
          << e.what();
    }
  }
  {
    te::Schedule sch = vdla_compiler::schedule_vdla_conv2d(op, {1, 1, 4, 0, 1, false}, cfg);
    sch[op.clip_lo].set_scope("shared");
    try {
      vdla_compiler::build_vdla(sch, op.args(), "conv2d", cfg);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("buffer 'clip_lo' is in scope 'shared'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
