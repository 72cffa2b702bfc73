// Bundles and the graph executor, end to end without the graph compiler: two kernels compiled by
// Kiln into one shared object, a hand-written graph that places the intermediate in a storage pool,
// a parameter, written as a bundle file and run by the executor; then damaged bundles and bad
// inputs.
#include "deploy/runtime/graph_executor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/codegen/build.h"
#include "compiler/target/target.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

using runtime::NDArray;

using testing::TempDir;

/// y = relu(x * w + 1) as two kernels: t = x * w (w a parameter), y = relu(t + 1).
runtime::Bundle make_bundle() {
  const int n = 37;
  te::Tensor x = te::placeholder({n}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({n}, ir::kFloat32, "w");
  te::Tensor t = te::compute(
      {n}, [&](ir::Var i) { return x(i) * w(i); }, "t");
  te::Tensor t_in = te::placeholder({n}, ir::kFloat32, "t");
  te::Tensor y = te::compute(
      {n}, [&](ir::Var i) { return ir::max(t_in(i) + 1.0f, 0.0f); }, "y");
  ir::PrimFunc f1 = compiler::lower(te::create_schedule({t}), {x, w, t}, "mul");
  ir::PrimFunc f2 = compiler::lower(te::create_schedule({y}), {t_in, y}, "add_relu");
  runtime::Bundle b;
  b.library = codegen::link_shared_object({f1, f2}, target::Target::parse("llvm"));
  NDArray wv = NDArray::empty({n}, runtime::kFloat32);
  for (int i = 0; i < n; ++i) wv.data<float>()[i] = (i % 5) - 2.0f;
  b.params.emplace("w", std::move(wv));
  b.graph_json = R"({"format": "kiln.graph", "version": 1,
    "storage": [{"bytes": 256}],
    "tensors": [
      {"name": "x", "dtype": "float32", "shape": [37], "kind": "input"},
      {"name": "w", "dtype": "float32", "shape": [37], "kind": "param"},
      {"name": "t", "dtype": "float32", "shape": [37], "kind": "intermediate", "storage": 0, "offset": 64},
      {"name": "y", "dtype": "float32", "shape": [37], "kind": "output"}],
    "nodes": [{"name": "n0", "func": "mul", "args": [0, 1, 2]},
              {"name": "n1", "func": "add_relu", "args": [2, 3]}],
    "inputs": [0], "outputs": [3]})";
  return b;
}

TEST(GraphExecutor, RunsABundleFile) {
  TempDir dir;
  std::string path = (dir.path() / "model.kiln").string();
  runtime::write_bundle(path, make_bundle());
  auto g = runtime::GraphExecutor::load(path);
  ASSERT_EQ(g.num_inputs(), 1u);
  EXPECT_EQ(g.input_name(0), "x");
  NDArray x = testing::random_array({37}, 3);
  g.set_input("x", x);
  g.run();
  std::vector<float> ref(37);
  for (int i = 0; i < 37; ++i)
    ref[i] = std::max(x.data<float>()[i] * ((i % 5) - 2.0f) + 1.0f, 0.0f);
  EXPECT_TRUE(testing::all_close(g.output(0), ref));
}

TEST(GraphExecutor, ProfileTimesEveryNodeAndRuns) {
  auto g = runtime::GraphExecutor::from_bundle(make_bundle(), "profiled");
  NDArray x = testing::random_array({37}, 4);
  g.set_input("x", x);
  auto times = g.profile(5);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].name, "n0");
  EXPECT_EQ(times[0].func, "mul");
  EXPECT_EQ(times[1].func, "add_relu");
  for (const auto& t : times) EXPECT_GE(t.median_ms, 0.0);
  std::vector<float> ref(37);
  for (int i = 0; i < 37; ++i)
    ref[i] = std::max(x.data<float>()[i] * ((i % 5) - 2.0f) + 1.0f, 0.0f);
  EXPECT_TRUE(testing::all_close(g.output(0), ref));
  EXPECT_ERROR_CONTAINS(g.profile(0), "number of runs");
}

// A kernel's work ("flops", "bytes", "ops") is optional: a bundle without it (make_bundle's) runs
// and its profile says nothing of it; given, the profile carries it with the tensors' shapes; a bad
// value is refused at load, naming the node and the field.
TEST(GraphExecutor, KernelWorkIsOptionalAndChecked) {
  auto plain = runtime::GraphExecutor::from_bundle(make_bundle(), "plain");
  plain.set_input("x", testing::random_array({37}, 5));
  for (const auto& t : plain.profile(2)) {
    EXPECT_FALSE(t.work.flops || t.work.bytes) << t.func;
    EXPECT_EQ(t.work.ops, "");
  }

  auto with_work = [](const std::string& work) {
    runtime::Bundle b = make_bundle();
    const std::string from = R"("args": [0, 1, 2]})";
    b.graph_json.replace(b.graph_json.find(from), from.size(),
                         R"("args": [0, 1, 2], )" + work + "}");
    return b;
  };
  auto g = runtime::GraphExecutor::from_bundle(
      with_work(R"("flops": 37, "bytes": 444, "ops": "Mul")"), "worked");
  g.set_input("x", testing::random_array({37}, 6));
  const auto times = g.profile(2);
  EXPECT_EQ(times[0].work.flops, 37.0);
  EXPECT_EQ(times[0].work.bytes, 444.0);
  EXPECT_EQ(times[0].work.ops, "Mul");
  EXPECT_EQ(times[0].work.shapes, (std::vector<std::vector<int64_t>>{{37}, {37}, {37}}));
  EXPECT_FALSE(times[1].work.flops);  // n1 says nothing
  EXPECT_EQ(times[1].work.shapes, (std::vector<std::vector<int64_t>>{{37}, {37}}));

  EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(with_work(R"("flops": -1)"), "m"),
                        "node 'n0' flops must be at least 0, got -1");
  EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(with_work(R"("flops": 1.5)"), "m"),
                        "node 'n0' flops must be an integer");
  EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(with_work(R"("bytes": "many")"), "m"),
                        "node 'n0' bytes must be an integer");
  EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(with_work(R"("bytes": 445)"), "m"),
                        "node 'n0' bytes is 445, more than its tensors hold (444)");
  EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(with_work(R"("ops": 3)"), "m"),
                        "node 'n0' ops must be a string");
}

TEST(GraphExecutor, DamagedBundlesAreReported) {
  TempDir dir;
  std::string bytes = runtime::serialize_bundle(make_bundle());
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_ERROR_CONTAINS(runtime::deserialize_bundle(flipped, "m.kiln"), "corrupted");
  EXPECT_ERROR_CONTAINS(runtime::deserialize_bundle(bytes.substr(0, bytes.size() / 3), "m.kiln"),
                        "truncated");
  EXPECT_ERROR_CONTAINS(runtime::deserialize_bundle("PK\x03\x04 not a bundle", "m.zip"),
                        "not a Kiln bundle");
  EXPECT_ERROR_CONTAINS(runtime::read_bundle((dir.path() / "missing.kiln").string()),
                        "cannot open bundle");
}

TEST(GraphExecutor, BadGraphsAndInputsAreReported) {
  runtime::Bundle b = make_bundle();
  {
    runtime::Bundle bad = make_bundle();
    bad.graph_json.replace(bad.graph_json.find("add_relu"), 8, "add_tanh");
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "'add_tanh'");
  }
  {
    runtime::Bundle bad = make_bundle();
    bad.params.clear();
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "parameter 'w'");
  }
  {
    runtime::Bundle bad = make_bundle();
    bad.graph_json.replace(bad.graph_json.find("\"offset\": 64"), 12, "\"offset\": 200");
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "do not fit");
  }
  {
    runtime::Bundle bad = make_bundle();
    bad.library =
        "\x7f"
        "ELF, but not a shared object";
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "cannot load the library of bundle 'm.kiln'");
  }
  auto g = runtime::GraphExecutor::from_bundle(std::move(b), "m.kiln");
  EXPECT_ERROR_CONTAINS(g.set_input("x", testing::zeros({36})),
                        "input 'x' must have shape [37], got [36]");
  EXPECT_ERROR_CONTAINS(g.set_input("x", testing::zeros({37}, runtime::kInt32)),
                        "must be float32, got int32");
  EXPECT_ERROR_CONTAINS(g.set_input("image", testing::zeros({37})),
                        "no input 'image' (its inputs: x)");
}

/// make_bundle's graph with input x given a default value (graph version 2).
runtime::Bundle bundle_with_default(const TempDir& dir, const NDArray& dflt) {
  runtime::Bundle b = make_bundle();
  b.params.emplace("x_default", dflt.copy());
  const std::string input = R"("kind": "input"})";
  b.graph_json.replace(b.graph_json.find(input), input.size(),
                       R"("kind": "input", "default": "x_default"})");
  b.graph_json.replace(b.graph_json.find(R"("version": 1)"), 12, R"("version": 2)");
  return b;
}

std::vector<float> reference(const NDArray& x) {
  std::vector<float> ref(37);
  for (int i = 0; i < 37; ++i)
    ref[i] = std::max(x.data<float>()[i] * ((i % 5) - 2.0f) + 1.0f, 0.0f);
  return ref;
}

TEST(GraphExecutor, InputWithADefault) {
  TempDir dir;
  const NDArray dflt = testing::random_array({37}, 5);
  const std::string path = (dir.path() / "model.kiln").string();
  runtime::write_bundle(path, bundle_with_default(dir, dflt));
  auto g = runtime::GraphExecutor::load(path);
  ASSERT_EQ(g.num_inputs(), 1u);
  EXPECT_TRUE(g.input_has_default(0));
  g.run();  // no input given: the default
  EXPECT_TRUE(testing::all_close(g.output(0), reference(dflt)));
  const NDArray x = testing::random_array({37}, 6);
  g.set_input("x", x);  // given: the caller's array
  g.run();
  EXPECT_TRUE(testing::all_close(g.output(0), reference(x)));
  EXPECT_ERROR_CONTAINS(g.set_input("x", testing::zeros({36})),
                        "input 'x' must have shape [37], got [36]");
  EXPECT_FALSE(runtime::GraphExecutor::from_bundle(make_bundle(), "m").input_has_default(0));
}

TEST(GraphExecutor, BadDefaultsAndVersionsAreReported) {
  TempDir dir;
  {
    runtime::Bundle bad = bundle_with_default(dir, testing::random_array({37}, 5));
    bad.params.erase("x_default");
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "the default of input 'x', parameter 'x_default', is not in the bundle");
  }
  {
    runtime::Bundle bad = bundle_with_default(dir, testing::random_array({36}, 5));
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "input 'x' is float32[37], but its default 'x_default' is float32[36]");
  }
  {
    runtime::Bundle bad = make_bundle();
    bad.graph_json.replace(bad.graph_json.find(R"("version": 1)"), 12, R"("version": 3)");
    EXPECT_ERROR_CONTAINS(runtime::GraphExecutor::from_bundle(std::move(bad), "m.kiln"),
                          "has version 3; this runtime reads versions 1 and 2");
  }
}

}  // namespace
}  // namespace kiln
