// Graphs as deep or as wide as nobody's network, compiled on a thread with a small stack: the
// compiler's passes recurse as deep as an expression, so a fused group as deep as the graph, or a
// node whose inputs fold into one expression as deep as their count, would overflow it and kill
// the test. Each must compile and compute the right values:
//   - a chain of 20,000 elementwise nodes (the issue's: `kiln compile` died of SIGSEGV after
//     38 s), fused into kernels of at most kMaxGroupOps operators;
//   - chains whose inlined expression grew exponentially: Add(t, t) 40 deep (2^40 copies of x),
//     LeakyRelu 24 deep (each reads its input three times), linear Resizes (4 places each);
//   - Sum, Max and Concat of 500 inputs (balanced trees, log2(n) deep).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <pthread.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "base/sanitizers.h"
#include "compiler/graph/fuse.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using MB = testing::OnnxModelBuilder;

/// The stack the compile runs on: 256 KiB, a 32nd of Linux's default 8 MiB, in optimized builds
/// (the test preset); more where frames are larger (no optimization, sanitizers).
#if defined(__OPTIMIZE__) && !KILN_ASAN && !KILN_TSAN
constexpr size_t kSmallStack = 256 << 10;
#else
constexpr size_t kSmallStack = 2 << 20;
#endif

/// Runs `f` on a thread with a kSmallStack stack, rethrowing what it throws.
void on_small_stack(const std::function<void()>& f) {
  struct Call {
    const std::function<void()>* f;
    std::exception_ptr error;
  } call{&f, nullptr};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kSmallStack), 0);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->f)();
    } catch (...) {
      c->error = std::current_exception();
    }
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &call), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  if (call.error) std::rethrow_exception(call.error);
}

/// Imports and builds `m` (fused unless `fuse` is false) on the small stack; runs it on `x`.
NDArray compile_and_run(const MB& m, const NDArray& x, bool fuse = true,
                        BuildReport* report = nullptr) {
  runtime::Bundle bundle;
  on_small_stack([&] {
    BuildOptions options;
    options.fuse = fuse;
    // This CPU's target: for generic x86-64, LLVM takes ten times longer over a concat of 500.
    bundle = build_graph(import_onnx_bytes(m.bytes(), "deep.onnx"), "llvm -mcpu=native", options,
                         report);
  });
  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "deep");
  exec.set_input(0, x);
  exec.run();
  return exec.output(0).copy();
}

std::vector<float> values(const NDArray& a) {
  const float* p = const_cast<NDArray&>(a).data<float>();
  return std::vector<float>(p, p + a.num_elements());
}

/// y = a chain of `n` nodes over x [1, 16]: Relu at even positions, Add(previous, x) at odd ones.
MB relu_add_chain(int n) {
  MB m;
  m.input("x", {1, 16});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string out = i == n - 1 ? "y" : "t" + std::to_string(i);
    if (i % 2 == 0) {
      m.node("Relu", "relu" + std::to_string(i), {prev}, {out});
    } else {
      m.node("Add", "add" + std::to_string(i), {prev, "x"}, {out});
    }
    prev = out;
  }
  m.output("y");
  return m;
}

TEST(DeepGraph, ChainOfTwentyThousandNodesCompilesInKernelsOfBoundedDepth) {
  constexpr int kNodes = 20000;
  const NDArray x = testing::random_array({1, 16}, 7);
  BuildReport report;
  const auto start = std::chrono::steady_clock::now();
  const NDArray y = compile_and_run(relu_add_chain(kNodes), x, true, &report);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "a chain of " << kNodes << " nodes: " << report.num_functions << " kernels in "
            << seconds << " s\n";
  EXPECT_EQ(report.num_functions, (kNodes + kMaxGroupOps - 1) / kMaxGroupOps);
  std::vector<float> ref = values(x);
  const std::vector<float> in = ref;
  for (int i = 0; i < kNodes; ++i) {
    for (size_t k = 0; k < ref.size(); ++k) ref[k] = i % 2 ? ref[k] + in[k] : std::max(ref[k], 0.f);
  }
  EXPECT_TRUE(testing::all_close(y, ref, 1e-5, 1e-3));
}

TEST(DeepGraph, ChainsThatReadTheirInputTwiceStayLinear) {
  const NDArray x = testing::random_array({4}, 3);
  {
    SCOPED_TRACE("Add(t, t) 40 deep");
    MB m;
    m.input("x", {4});
    std::string prev = "x";
    for (int i = 0; i < 40; ++i) {
      const std::string out = i == 39 ? "y" : "t" + std::to_string(i);
      m.node("Add", "double" + std::to_string(i), {prev, prev}, {out});
      prev = out;
    }
    m.output("y");
    std::vector<float> ref = values(x);
    for (float& v : ref) v = std::ldexp(v, 40);
    EXPECT_TRUE(testing::all_close(compile_and_run(m, x), ref));
  }
  {
    SCOPED_TRACE("LeakyRelu 24 deep");
    MB m;
    m.input("x", {4});
    std::string prev = "x";
    for (int i = 0; i < 24; ++i) {
      const std::string out = i == 23 ? "y" : "t" + std::to_string(i);
      MB::attr(m.node("LeakyRelu", "leaky" + std::to_string(i), {prev}, {out}), "alpha", 0.5f);
      prev = out;
    }
    m.output("y");
    std::vector<float> ref = values(x);
    for (float& v : ref) v = v < 0 ? std::ldexp(v, -24) : v;
    EXPECT_TRUE(testing::all_close(compile_and_run(m, x), ref, 1e-5, 1e-12));
  }
  {
    SCOPED_TRACE("10 linear Resizes, 8x8 to 18x18");
    MB m;
    m.input("x", {1, 1, 8, 8});
    std::string prev = "x";
    for (int i = 0; i < 10; ++i) {
      const std::string out = i == 9 ? "y" : "t" + std::to_string(i);
      const std::string sizes = "sizes" + std::to_string(i);
      m.init_int64(sizes, {1, 1, 9 + i, 9 + i});
      MB::attr(m.node("Resize", "up" + std::to_string(i), {prev, "", "", sizes}, {out}), "mode",
               std::string("linear"));
      prev = out;
    }
    m.output("y");
    const NDArray img = testing::random_array({1, 1, 8, 8}, 5);
    // Unfused, each Resize is a kernel of its own: the reference.
    EXPECT_TRUE(testing::all_close(compile_and_run(m, img),
                                   values(compile_and_run(m, img, /*fuse=*/false))));
  }
}

TEST(DeepGraph, NodesOfFiveHundredInputsFoldAsBalancedTrees) {
  constexpr int kInputs = 500;
  const NDArray x = testing::random_array({2}, 11);
  const std::vector<float> in = values(x);
  for (const std::string op : {"Sum", "Max", "Concat"}) {
    SCOPED_TRACE(op);
    MB m;
    m.input("x", {2});
    std::vector<std::string> names;
    for (int i = 0; i < kInputs; ++i) {
      names.push_back("s" + std::to_string(i));
      // x + i: every input differs.
      const std::string k = "k" + std::to_string(i);
      m.init_scalar(k, static_cast<float>(i));
      m.node("Add", "shift" + std::to_string(i), {"x", k}, {names.back()});
    }
    auto* n = m.node(op, "wide", names, {"y"});
    if (op == "Concat") MB::attr(n, "axis", int64_t{0});
    m.output("y");
    std::vector<float> ref(op == "Concat" ? 2 * kInputs : 2, op == "Max" ? -INFINITY : 0.f);
    for (int i = 0; i < kInputs; ++i) {
      for (size_t k = 0; k < 2; ++k) {
        const float v = in[k] + static_cast<float>(i);
        if (op == "Sum") ref[k] += v;
        if (op == "Max") ref[k] = std::max(ref[k], v);
        if (op == "Concat") ref[2 * i + k] = v;
      }
    }
    EXPECT_TRUE(testing::all_close(compile_and_run(m, x), ref, 1e-5, 1e-3));
  }
}

}  // namespace
}  // namespace kiln::graph
