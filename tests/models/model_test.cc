// Whole models in the style of the paper's evaluation (ResNet-18, MobileNetV2, the Nature DQN, a
// DCGAN generator, an LSTM language model, and convt_odd: transposed convolutions at stride 3 with
// output_padding, grouped and dilated, 1-D): imported from ONNX, built for the host, run by the
// graph executor and compared with ONNX Runtime's output on the same input. The models, inputs and
// expected outputs are written by make_models.py (the CTest fixture models_generate) into
// KILN_MODELS_DATA_DIR; each model is its own test (ctest -R model_<name>).
//
// The comparison and its tolerance: model_compare.h.
//
// Each model is built twice, with fusion on (the default build) and off, and both must match, so
// the fusion pass is covered; the DQN bundle also goes through write_bundle / GraphExecutor::load.
// Models whose every group has a GPU schedule are also built for "opencl" and run on OpenCL (PoCL
// here), and for CUDA at the device's architecture and run there, by the graph executor on the
// device (each skipped without such a device): the DQN, so far.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/common/temp_dir.h"
#include "tests/models/model_compare.h"

namespace kiln::graph {
namespace {

using model_compare::compare;
using model_compare::Errors;
using model_compare::kTolerance;
using model_compare::seconds_since;
using runtime::NDArray;

/// What a model is built for and where its bundle runs.
struct Placement {
  std::string target = "llvm -mcpu=native";
  TargetKind device = TargetKind::kCpu;
};

std::string data_file(const std::string& name) {
  return std::string(KILN_MODELS_DATA_DIR) + "/" + name;
}

/// Builds `model` with `options`, runs it on its input, and checks the output against ONNX Runtime.
void run_and_check(const std::string& model, const Graph& g, const BuildOptions& options,
                   const std::string& tag, bool round_trip, const Placement& where) {
  auto t0 = std::chrono::steady_clock::now();
  BuildReport report;
  runtime::Bundle bundle = build_graph(g, where.target, options, &report);
  double build_s = seconds_since(t0);

  testing::TempDir dir("kiln_model_test");
  runtime::GraphExecutor exec = [&] {
    if (!round_trip) {
      return runtime::GraphExecutor::from_bundle(std::move(bundle), model, where.device);
    }
    std::string path = dir.file(model + ".kiln");
    runtime::write_bundle(path, bundle);
    return runtime::GraphExecutor::load(path, where.device);
  }();
  ASSERT_EQ(exec.num_inputs(), 1u);
  ASSERT_EQ(exec.num_outputs(), 1u);
  NDArray input = runtime::load_npy(data_file(model + ".input.npy"));
  NDArray expected = runtime::load_npy(data_file(model + ".expected.npy"));
  exec.set_input(0, input);
  t0 = std::chrono::steady_clock::now();
  exec.run();
  double run_s = seconds_since(t0);
  // A second run on the same executor must give the same answer (pools are reused).
  exec.run();
  Errors e = compare(exec.output(0), expected);
  std::printf(
      "%s [%s]: %zu functions, %zu batch norms folded, intermediates %lld -> %lld bytes, "
      "build %.1f s, first run %.1f ms; relative error %.3g (max |diff| %.3g), max "
      "elementwise relative error %.3g\n",
      model.c_str(), tag.c_str(), report.num_functions, report.batch_norms_folded,
      static_cast<long long>(report.intermediate_bytes_without_reuse),
      static_cast<long long>(report.intermediate_bytes), build_s, run_s * 1e3, e.relative,
      e.max_abs_diff, e.elementwise);
  std::fflush(stdout);
  EXPECT_LE(e.relative, kTolerance) << model << " [" << tag << "]: max|kiln - ort| / max|ort|";
}

void check_model(const std::string& model, bool round_trip = false, const Placement& where = {}) {
  Graph g = import_onnx(data_file(model + ".onnx"));
  const std::string on = where.device == TargetKind::kCpu ? "" : ", " + where.target;
  BuildOptions fused;
  run_and_check(model, g, fused, "fuse=on" + on, round_trip, where);
  BuildOptions unfused;
  unfused.fuse = false;
  run_and_check(model, g, unfused, "fuse=off" + on, false, where);
}

/// check_model built for "opencl" and run on OpenCL, or skipped where there is none.
void check_model_on_opencl(const std::string& model) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  check_model(model, /*round_trip=*/true, Placement{"opencl", TargetKind::kOpenCL});
}

/// check_model built for the CUDA device's architecture ("cuda -arch=sm_90") and run on it, or
/// skipped where there is none.
void check_model_on_cuda(const std::string& model) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kCuda, &why)) GTEST_SKIP() << why;
  const runtime::DeviceInfo& gpu = runtime::DeviceAPI::get(TargetKind::kCuda).info();
  const std::string arch = "sm_" + std::to_string(gpu.compute_capability_major) +
                           std::to_string(gpu.compute_capability_minor);
  check_model(model, /*round_trip=*/true, Placement{"cuda -arch=" + arch, TargetKind::kCuda});
}

TEST(Models, resnet18) { check_model("resnet18"); }
TEST(Models, mobilenetv2) { check_model("mobilenetv2"); }
TEST(Models, dqn) { check_model("dqn", /*round_trip=*/true); }
TEST(Models, dcgan) { check_model("dcgan"); }
TEST(Models, lstm) { check_model("lstm"); }
TEST(Models, convt_odd) { check_model("convt_odd"); }
TEST(Models, resnet18_opencl) { check_model_on_opencl("resnet18"); }
TEST(Models, mobilenetv2_opencl) { check_model_on_opencl("mobilenetv2"); }
TEST(Models, dqn_opencl) { check_model_on_opencl("dqn"); }
TEST(Models, dcgan_opencl) { check_model_on_opencl("dcgan"); }
TEST(Models, lstm_opencl) { check_model_on_opencl("lstm"); }
TEST(Models, resnet18_cuda) { check_model_on_cuda("resnet18"); }
TEST(Models, mobilenetv2_cuda) { check_model_on_cuda("mobilenetv2"); }
TEST(Models, dqn_cuda) { check_model_on_cuda("dqn"); }
TEST(Models, dcgan_cuda) { check_model_on_cuda("dcgan"); }
TEST(Models, lstm_cuda) { check_model_on_cuda("lstm"); }

}  // namespace
}  // namespace kiln::graph
