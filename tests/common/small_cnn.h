// A small CNN for tests of tuning and of the farm, built with libonnx (no files in git):
// x [1, 8, 12, 12] (or another height and width) -> Conv 3x3 (16) -> Relu -> Conv 3x3 (16) ->
// GlobalAveragePool -> Flatten
// -> Gemm (10): four tuning tasks (two convolutions, the pooling, the dense layer); the last two
// have spaces smaller than a budget of 12, which they exhaust.
#pragma once

#include <string>

#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::testing {

inline std::string small_cnn_model(int64_t hw = 12) {
  OnnxModelBuilder m;
  m.input("x", {1, 8, hw, hw});
  auto init = [&](const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    runtime::NDArray a = random_array(shape, seed, -0.3f, 0.3f);
    m.init_values(name, shape, a.to_vector<float>());
  };
  init("w1", {16, 8, 3, 3}, 1);
  init("w2", {16, 16, 3, 3}, 2);
  init("fc", {10, 16}, 3);
  auto* c1 = m.node("Conv", {"x", "w1"}, {"c1"});
  OnnxModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"});
  auto* c2 = m.node("Conv", {"r1", "w2"}, {"c2"});
  OnnxModelBuilder::attr(c2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("GlobalAveragePool", {"c2"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  auto* g = m.node("Gemm", {"f", "fc"}, {"y"});
  OnnxModelBuilder::attr(g, "transB", int64_t{1});
  m.output("y");
  return m.bytes();
}

}  // namespace kiln::testing
