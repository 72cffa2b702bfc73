// The graph build checked end to end, for tests that build small ONNX models with libonnx's
// protobuf classes: GraphBuildTest::check imports a model, compiles it with operator fusion and
// without (and, when asked, with and without alter_layout), runs every build on the same random
// inputs, checks that the builds agree within 1e-5 and compares every output with ONNX Runtime's
// (through a small Python script; skipped where onnxruntime is missing).
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln::graph {

namespace fs = std::filesystem;
using runtime::NDArray;

/// The shared builder, plus float initializers of reproducible random values in [lo, hi).
class ModelBuilder : public testing::OnnxModelBuilder {
 public:
  using OnnxModelBuilder::OnnxModelBuilder;
  void init(const std::string& name, std::vector<int64_t> shape, float lo = -0.5f,
            float hi = 0.5f) {
    NDArray a = testing::random_array(shape, seed_++, lo, hi);
    init_values(name, shape, a.to_vector<float>());
  }

 private:
  uint32_t seed_ = 100;
};

inline constexpr const char* kOrtScript = R"(import sys
import numpy as np
import onnxruntime as ort
model, out_dir = sys.argv[1], sys.argv[2]
feeds = {}
for arg in sys.argv[3:]:
    name, path = arg.split('=', 1)
    feeds[name] = np.load(path)
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sess = ort.InferenceSession(model, opts, providers=['CPUExecutionProvider'])
for i, o in enumerate(sess.run(None, feeds)):
    np.save('%s/ort_%d.npy' % (out_dir, i), np.asarray(o))
)";

inline bool have_onnxruntime() {
  static const bool have = std::system("python3 -c 'import onnxruntime' >/dev/null 2>&1") == 0;
  return have;
}

class GraphBuildTest : public ::testing::Test {
 protected:
  /// Writes the model, compiles it with and without fusion (and, when `layouts`, with and
  /// without alter_layout, padded channel blocks of 16 included), runs every build on the same
  /// random inputs, checks that the builds agree within 1e-5 and compares every output with ONNX
  /// Runtime's.
  void check(const ModelBuilder& m, const std::string& tag, bool layouts = false) {
    const std::string path = (dir_.path() / (tag + ".onnx")).string();
    {
      std::ofstream out(path, std::ios::binary);
      out << m.bytes();
    }
    const Graph g = import_onnx(path);
    std::vector<NDArray> first;
    for (bool alter : layouts ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
      for (bool fuse : {true, false}) {
        SCOPED_TRACE(std::string(fuse ? "fused" : "not fused") +
                     (alter ? "" : ", without alter_layout"));
        BuildOptions options;
        options.fuse = fuse;
        options.alter_layout = alter;
        // Padded channel blocks (alter_layout.h) on every host, not only AVX-512 ones.
        if (layouts) options.pad_channels_to = 16;
        runtime::GraphExecutor exec =
            runtime::GraphExecutor::from_bundle(build_graph(g, "llvm -mcpu=native", options), tag);
        set_inputs(m, exec);
        exec.run();
        std::vector<NDArray> outs;
        for (size_t i = 0; i < exec.num_outputs(); ++i) outs.push_back(exec.output(i).copy());
        if (first.empty()) {
          first = std::move(outs);
        } else {
          ASSERT_EQ(outs.size(), first.size());
          for (size_t i = 0; i < outs.size(); ++i) {
            ASSERT_EQ(outs[i].shape(), first[i].shape());
            EXPECT_TRUE(testing::all_close(outs[i].data<float>(), first[i].data<float>(),
                                           outs[i].num_elements(), 1e-5, 1e-5))
                << tag << " output " << exec.output_name(i) << " differs from the first build";
          }
        }
        compare_with_onnxruntime(m, tag, path, exec);
      }
    }
  }

  /// Binds every input of `m` to its random array (seeds 1, 2, ... in input order).
  void set_inputs(const ModelBuilder& m, runtime::GraphExecutor& exec) {
    uint32_t seed = 1;
    for (const auto& [name, shape] : m.inputs())
      exec.set_input(name, testing::random_array(shape, seed++));
  }

  void compare_with_onnxruntime(const ModelBuilder& m, const std::string& tag,
                                const std::string& path, runtime::GraphExecutor& exec) {
    compare_with_onnxruntime(m.inputs(), tag, path, exec);
  }

  /// The same, for inputs of the given shapes (a symbolic model's bound ones).
  void compare_with_onnxruntime(
      const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs,
      const std::string& tag, const std::string& path, runtime::GraphExecutor& exec) {
    std::vector<NDArray> refs;
    onnxruntime_outputs(inputs, tag, path, exec, &refs);
    if (IsSkipped() || HasFatalFailure()) return;
    for (size_t i = 0; i < exec.num_outputs(); ++i) {
      const NDArray& ref = refs[i];
      const NDArray& got = exec.output(i);
      ASSERT_EQ(got.shape(), ref.shape()) << "output " << exec.output_name(i);
      ASSERT_TRUE(runtime::dtype_equal(got.dtype(), runtime::kFloat32));
      EXPECT_TRUE(testing::all_close(const_cast<NDArray&>(got).data<float>(),
                                     const_cast<NDArray&>(ref).data<float>(), got.num_elements(),
                                     1e-4, 1e-5))
          << tag << " output " << exec.output_name(i);
    }
  }

  /// Runs `exec` and ONNX Runtime (graph optimizations off: the model as written) on the same
  /// random inputs of the given shapes (seeds 1, 2, ... in order); ONNX Runtime's outputs in
  /// `refs`, one per output of `exec`. Skips the test where onnxruntime is missing: callers check
  /// IsSkipped() and HasFatalFailure().
  void onnxruntime_outputs(const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs,
                           const std::string& tag, const std::string& path,
                           runtime::GraphExecutor& exec, std::vector<NDArray>* refs) {
    std::string feeds;
    uint32_t seed = 1;
    for (const auto& [name, shape] : inputs) {
      NDArray x = testing::random_array(shape, seed++);
      exec.set_input(name, x);
      const std::string npy = (dir_.path() / (tag + "_in_" + name + ".npy")).string();
      runtime::save_npy(npy, x);
      feeds += " '" + name + "=" + npy + "'";
    }
    exec.run();
    if (!have_onnxruntime()) GTEST_SKIP() << "onnxruntime is not installed for python3";
    const std::string script = (dir_.path() / "ort.py").string();
    {
      std::ofstream out(script);
      out << kOrtScript;
    }
    const std::string cmd =
        "python3 '" + script + "' '" + path + "' '" + dir_.path().string() + "'" + feeds;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ASSERT_GT(exec.num_outputs(), 0u);
    for (size_t i = 0; i < exec.num_outputs(); ++i) {
      refs->push_back(
          runtime::load_npy((dir_.path() / ("ort_" + std::to_string(i) + ".npy")).string()));
    }
  }

  testing::TempDir dir_{"kiln_graph_build_test"};
};

}  // namespace kiln::graph
