// The model zoo (issue 15): torchvision networks as a user brings them — exported by
// torch.onnx.export with a symbolic batch dimension (make_zoo.py, the CTest fixture zoo) — each
// imported with its batch bound to 1 (OnnxImportOptions::input_shapes, what `kiln compile
// --input-shape input=1,3,224,224` does), built with the default options for the host, run by the
// graph executor and compared with ONNX Runtime's output (zoo_reference.py) within
// model_compare::kTolerance. Each model is its own test: ctest -R zoo_<name>.
//
// The wide zoo's test set (WideZoo.<name>, ctest -R wide_<name>): a few small networks of the wide
// set, one per family that torchvision lacks (a text encoder with two int64 inputs, a causal
// decoder with a symbolic batch and sequence, a recurrent classifier, a 1-D audio CNN, a speech
// encoder, a UNet, a 3-D CNN), exported into their own folder, every input bound to its .npy's
// shape (tests/models/model_inputs.h). The rest of the wide set is measured by `scripts/bench.sh
// wide`, too big for a test run.
//
// Unlike model_test, each model is built once (fused, the default): the zoo's purpose is coverage
// of what exporters write, and building every model twice would double the set's time; model_test
// covers fuse=off against the same reference.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/models/model_compare.h"
#include "tests/models/model_inputs.h"

namespace kiln::graph {
namespace {

using model_compare::seconds_since;
constexpr const char* kTarget = "llvm -mcpu=native";

/// Builds DIR/NAME.onnx for the shapes of its inputs, runs it on them and compares its output
/// with ONNX Runtime's.
void check_model(const std::string& dir, const std::string& model) {
  const auto inputs = model_inputs::load(dir, model);
  auto t0 = std::chrono::steady_clock::now();
  Graph g = import_onnx(dir + "/" + model + ".onnx", model_inputs::bind_shapes(inputs));
  BuildReport report;
  runtime::Bundle bundle = build_graph(g, kTarget, BuildOptions{}, &report);
  const double build_s = seconds_since(t0);

  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), model);
  ASSERT_EQ(exec.num_inputs(), inputs.size());
  ASSERT_EQ(exec.num_outputs(), 1u);
  for (const auto& [name, value] : inputs) exec.set_input(name, value);
  t0 = std::chrono::steady_clock::now();
  exec.run();
  const double run_s = seconds_since(t0);
  const model_compare::Errors e = model_compare::compare(
      exec.output(0), runtime::load_npy(dir + "/" + model + ".expected.npy"));
  std::printf(
      "%s: %zu functions from %zu nodes, import and build %.1f s, first run %.1f ms; "
      "relative error %.3g (max |diff| %.3g), max elementwise relative error %.3g\n",
      model.c_str(), report.num_functions, g.nodes().size(), build_s, run_s * 1e3, e.relative,
      e.max_abs_diff, e.elementwise);
  std::fflush(stdout);
  EXPECT_LE(e.relative, model_compare::kTolerance) << model << ": max|kiln - ort| / max|ort|";
}

void check_zoo_model(const std::string& model) {
  // The export leaves the batch symbolic: without a binding the import must say how to give one.
  try {
    import_onnx(std::string(KILN_ZOO_DATA_DIR) + "/" + model + ".onnx");
    ADD_FAILURE() << model << ": imported without --input-shape although its batch is symbolic";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--input-shape"), std::string::npos) << e.what();
  }
  check_model(KILN_ZOO_DATA_DIR, model);
}

TEST(Zoo, densenet121) { check_zoo_model("densenet121"); }
TEST(Zoo, googlenet) { check_zoo_model("googlenet"); }
TEST(Zoo, regnet_y_400mf) { check_zoo_model("regnet_y_400mf"); }
TEST(Zoo, mnasnet1_0) { check_zoo_model("mnasnet1_0"); }
TEST(Zoo, resnext50_32x4d) { check_zoo_model("resnext50_32x4d"); }
TEST(Zoo, convnext_tiny) { check_zoo_model("convnext_tiny"); }
TEST(Zoo, vit_small) { check_zoo_model("vit_small"); }
TEST(Zoo, lraspp_mobilenet_v3_large) { check_zoo_model("lraspp_mobilenet_v3_large"); }
TEST(Zoo, convnext_tiny_opset13) { check_zoo_model("convnext_tiny_opset13"); }
TEST(Zoo, vit_small_opset13) { check_zoo_model("vit_small_opset13"); }

TEST(WideZoo, bert_tiny) { check_model(KILN_WIDE_ZOO_DATA_DIR, "bert_tiny"); }
TEST(WideZoo, gpt_tiny_dynseq) { check_model(KILN_WIDE_ZOO_DATA_DIR, "gpt_tiny_dynseq"); }
TEST(WideZoo, lstm_classifier_small) {
  check_model(KILN_WIDE_ZOO_DATA_DIR, "lstm_classifier_small");
}
TEST(WideZoo, audio_cnn_m5_small) { check_model(KILN_WIDE_ZOO_DATA_DIR, "audio_cnn_m5_small"); }
TEST(WideZoo, speech_encoder_small) { check_model(KILN_WIDE_ZOO_DATA_DIR, "speech_encoder_small"); }
TEST(WideZoo, unet_small) { check_model(KILN_WIDE_ZOO_DATA_DIR, "unet_small"); }
TEST(WideZoo, conv3d_net_small) { check_model(KILN_WIDE_ZOO_DATA_DIR, "conv3d_net_small"); }

}  // namespace
}  // namespace kiln::graph
