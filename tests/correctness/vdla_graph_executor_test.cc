// The VDLA as a device of the runtime (deploy/runtime/graph_executor.h): a hand-written graph with
// a VDLA conv node (compiler/topi/vdla_conv2d.h built by compiler/vdla) between two CPU nodes
// compiled by Kiln, its tensors in the VDLA's shared DRAM, written as a bundle (format version 3)
// and run bit-exactly against the naive int8 reference, with the node's cycles kept; then damaged
// vdla sections and graphs that do not fit their programs are refused, naming what is wrong.
#include <gtest/gtest.h>

#include <cstring>

#include "base/fnv1a.h"
#include "compiler/codegen/build.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/vdla/conv2d_schedule.h"
#include "compiler/vdla/program.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"
#include "tests/common/vdla_conv_reference.h"

namespace kiln {
namespace {

using runtime::NDArray;

const topi::VdlaConv2dShape kShape{8, 8, 32, 32, 3, 1, 1};
const int kIn = 32 * 8 * 8, kOut = 32 * 8 * 8;

/// x (int8, blocked) -> pre: t = max(x, -127) - 1 on the CPU -> conv on the VDLA (bias, shift,
/// relu) -> post: y = int32(u) * 3 on the CPU. The graph is `graph` (the default: the valid one).
runtime::Bundle make_bundle(const std::string& graph = "") {
  te::Tensor x = te::placeholder({kIn}, ir::kInt8, "x");
  te::Tensor t = te::compute(
      {kIn},
      [&](ir::Var i) {
        return ir::cast(ir::kInt8, ir::max(ir::cast(ir::kInt32, x(i)), ir::Expr(-127)) - 1);
      },
      "t");
  te::Tensor u = te::placeholder({kOut}, ir::kInt8, "u");
  te::Tensor y = te::compute(
      {kOut}, [&](ir::Var i) { return ir::cast(ir::kInt32, u(i)) * 3; }, "y");
  runtime::Bundle b;
  b.library =
      codegen::link_shared_object({compiler::lower(te::create_schedule({t}), {x, t}, "pre"),
                                   compiler::lower(te::create_schedule({y}), {u, y}, "post")},
                                  target::Target::parse("llvm"));
  const vdla::Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d(kShape, /*relu=*/true);
  b.vdla_programs.push_back(vdla_compiler::build_vdla(
      vdla_compiler::schedule_vdla_conv2d(op, {1, 1, 4, 0, 2, false}, cfg), op.args(), "vdla_conv",
      cfg));
  const std::vector<int8_t> w = vdla::testing::random_int8(static_cast<size_t>(32) * 32 * 9, 5);
  const vdla::testing::BiasShift bs = vdla::testing::random_bias_shift(kShape, 6);
  b.params.emplace("w", NDArray::from_vector(w, {2, 2, 3, 3, 16, 16}));
  b.params.emplace("bias", NDArray::from_vector(bs.bias, {2, 1, 16}));
  b.params.emplace("shift", NDArray::from_vector(bs.shift, {2, 1, 16}));
  b.graph_json = !graph.empty() ? graph : R"({"format": "kiln.graph", "version": 1,
    "storage": [{"bytes": 8192}],
    "tensors": [
      {"name": "x", "dtype": "int8", "shape": [2048], "kind": "input"},
      {"name": "t", "dtype": "int8", "shape": [2048], "kind": "intermediate", "storage": 0, "offset": 0},
      {"name": "w", "dtype": "int8", "shape": [2, 2, 3, 3, 16, 16], "kind": "param"},
      {"name": "bias", "dtype": "int32", "shape": [2, 1, 16], "kind": "param"},
      {"name": "shift", "dtype": "int32", "shape": [2, 1, 16], "kind": "param"},
      {"name": "u", "dtype": "int8", "shape": [2048], "kind": "intermediate", "storage": 0, "offset": 4096},
      {"name": "y", "dtype": "int32", "shape": [2048], "kind": "output"}],
    "nodes": [{"name": "n0", "func": "pre", "args": [0, 1]},
              {"name": "conv", "func": "vdla_conv", "args": [1, 2, 3, 4, 5], "target": "vdla"},
              {"name": "n2", "func": "post", "args": [5, 6]}],
    "inputs": [0], "outputs": [6]})";
  return b;
}

std::vector<int32_t> reference(const std::vector<int8_t>& x) {
  std::vector<int8_t> t(x.size());
  for (size_t i = 0; i < x.size(); ++i) t[i] = static_cast<int8_t>(std::max<int>(x[i], -127) - 1);
  const std::vector<int8_t> w = vdla::testing::random_int8(static_cast<size_t>(32) * 32 * 9, 5);
  const vdla::testing::BiasShift bs = vdla::testing::random_bias_shift(kShape, 6);
  const std::vector<int8_t> u =
      vdla::testing::conv2d_reference(kShape, t, w, bs.bias, bs.shift, true);
  std::vector<int32_t> y(u.size());
  for (size_t i = 0; i < u.size(); ++i) y[i] = int32_t{u[i]} * 3;
  return y;
}

TEST(VdlaGraphExecutor, ConvBetweenCpuNodesIsBitExact) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "vdla.kiln").string();
  runtime::write_bundle(path, make_bundle());
  {
    const std::string bytes = runtime::serialize_bundle(make_bundle());
    uint32_t version = 0;
    std::memcpy(&version, bytes.data() + 8, 4);
    EXPECT_EQ(version, 3u);  // older runtimes refuse it by its version
  }
  auto g = runtime::GraphExecutor::load(path);
  ASSERT_TRUE(g.has_vdla());
  for (uint32_t seed : {11u, 12u}) {
    const std::vector<int8_t> x = vdla::testing::random_int8(kIn, seed);
    g.set_input("x", NDArray::from_vector(x, {kIn}));
    g.run();
    EXPECT_EQ(g.output(0).to_vector<int32_t>(), reference(x)) << "seed " << seed;
    const auto stats = g.vdla_stats();
    ASSERT_EQ(stats.size(), 1u);
    EXPECT_EQ(stats[0].name, "conv");
    EXPECT_EQ(stats[0].stats.gemm_counter * 256, static_cast<uint64_t>(kShape.macs()));
    EXPECT_GT(stats[0].stats.cycles, stats[0].stats.gemm_counter);
    EXPECT_EQ(g.vdla_total().cycles, stats[0].stats.cycles);
  }
  // Profiling runs the same nodes; the VDLA's cycles are the same every run.
  const uint64_t cycles = g.vdla_total().cycles;
  EXPECT_EQ(g.profile(3).size(), 3u);
  EXPECT_EQ(g.vdla_total().cycles, cycles);
}

/// `b` serialized with its vdla section's JSON replaced by `section` (or the version by `version`).
std::string with_section(const runtime::Bundle& b, const std::string& section,
                         uint32_t version = 3) {
  std::string bytes = runtime::serialize_bundle(b);
  bytes.resize(bytes.size() - 16);  // checksum and end marker
  size_t pos = 16;
  std::string out = bytes.substr(0, 16);
  std::memcpy(out.data() + 8, &version, 4);
  while (pos < bytes.size()) {
    uint32_t kind;
    uint64_t size;
    std::memcpy(&kind, bytes.data() + pos, 4);
    std::memcpy(&size, bytes.data() + pos + 8, 8);
    std::string body = bytes.substr(pos + 16, size);
    if (kind == 5) body = section;
    std::string header = bytes.substr(pos, 16);
    const uint64_t n = body.size();
    std::memcpy(header.data() + 8, &n, 8);
    out += header + body;
    pos += 16 + size;
  }
  const uint64_t sum = fnv1a64(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&sum), 8);
  return out + "KILNEND!";
}

TEST(VdlaGraphExecutor, DamagedSectionsAreRefused) {
  const runtime::Bundle b = make_bundle();
  const std::string good = b.vdla_programs[0].to_json().dump();
  const std::string config = vdla::Config{}.describe();
  auto section = [&](const std::string& programs, const std::string& cfg) {
    return R"({"config": ")" + cfg + R"(", "programs": [)" + programs + "]}";
  };
  auto load = [](const std::string& bytes) { return runtime::deserialize_bundle(bytes, "b.kiln"); };
  EXPECT_EQ(load(with_section(b, section(good, config))).vdla_programs.size(), 1u);
  EXPECT_ERROR_CONTAINS(load(with_section(b, section(good, "another VDLA"))),
                        "built for a VDLA of another VDLA");
  EXPECT_ERROR_CONTAINS(load(with_section(b, section("", config))),
                        "vdla section holds no programs");
  EXPECT_ERROR_CONTAINS(load(with_section(b, section(good + ", " + good, config))),
                        "vdla program 'vdla_conv' appears twice");
  std::string bad = good;
  bad.replace(bad.find("\"arg\":"), 7, "\"arg\":9");  // an argument the program does not have
  EXPECT_ERROR_CONTAINS(load(with_section(b, section(bad, config))), "field 'arg'");
  EXPECT_ERROR_CONTAINS(load(with_section(b, "not json")), "vdla section");
  // A version-2 (GPU) bundle cannot carry a vdla section; version 3 needs one.
  EXPECT_ERROR_CONTAINS(load(with_section(b, section(good, config), 2)),
                        "unknown or repeated section kind 5");
  runtime::Bundle cpu = make_bundle();
  cpu.vdla_programs.clear();
  EXPECT_ERROR_CONTAINS(load(with_section(cpu, "", 3)), "format version 3 but no vdla section");
}

TEST(VdlaGraphExecutor, GraphsThatDoNotFitTheProgramAreRefused) {
  const std::string graph = make_bundle().graph_json;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string g = graph;
    const size_t at = g.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return make_bundle(g.replace(at, from.size(), to));
  };
  auto run = [](runtime::Bundle b) { runtime::GraphExecutor::from_bundle(std::move(b), "g.kiln"); };
  EXPECT_ERROR_CONTAINS(run(with(R"("func": "vdla_conv")", R"("func": "vdla_nope")")),
                        "calls 'vdla_nope', which the bundle's vdla programs do not define");
  EXPECT_ERROR_CONTAINS(run(with(R"("target": "vdla")", R"("target": "tpu")")), "has target 'tpu'");
  EXPECT_ERROR_CONTAINS(run(with("[1, 2, 3, 4, 5]", "[1, 2, 3, 4]")),
                        "passes 4 tensors to vdla program 'vdla_conv'");
  EXPECT_ERROR_CONTAINS(run(with("[1, 2, 3, 4, 5]", "[1, 3, 2, 4, 5]")), "passes tensor 'bias'");
  // u at an offset that is not a whole OUT row (16 bytes) from the pool's start.
  EXPECT_ERROR_CONTAINS(run(with(R"("offset": 4096)", R"("offset": 4104)")),
                        "tensor 'u' at DRAM address");
}

}  // namespace
}  // namespace kiln
