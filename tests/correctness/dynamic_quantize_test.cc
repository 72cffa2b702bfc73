// DynamicQuantizeLinear end to end against ONNX Runtime, bit for bit: the uint8 y, the float
// scale and the uint8 zero point of ranges that straddle 0, lie above it (min widened to 0, zero
// point 0), below it (max widened to 0, zero point 255) and are empty (an all-zero x: ONNX
// Runtime's scale 1); shapes whose last dimension 16 divides (the range folded in vector lanes) and
// others (one reduction over every axis), a BERT-base activation among them. Both ends of the range
// come from one pass, the minimum as the maximum of -x, so signed zeros (x * 0) are among them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "deploy/runtime/npy.h"
#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;

/// Whether `got` and `want` hold the same bytes (same dtype and shape); names the first element
/// that differs.
::testing::AssertionResult same_bits(const NDArray& got, const NDArray& want) {
  if (!runtime::dtype_equal(got.dtype(), want.dtype()) || got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "dtype or shape differs";
  }
  const size_t width = static_cast<size_t>(got.dtype().bits / 8);
  const auto* a = static_cast<const uint8_t*>(got.data());
  const auto* b = static_cast<const uint8_t*>(want.data());
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (std::memcmp(a + i * width, b + i * width, width) != 0) {
      if (width == 1) {
        return ::testing::AssertionFailure()
               << "element " << i << ": " << int{a[i]} << " vs " << int{b[i]} << " (ONNX Runtime)";
      }
      float x = 0, y = 0;
      std::memcpy(&x, a + i * width, 4);
      std::memcpy(&y, b + i * width, 4);
      return ::testing::AssertionFailure()
             << "element " << i << ": " << x << " vs " << y << " (ONNX Runtime)";
    }
  }
  return ::testing::AssertionSuccess();
}

class DynamicQuantizeTest : public GraphBuildTest {
 protected:
  /// Builds `m`, runs it on random inputs in [-1, 1) and compares every output with ONNX
  /// Runtime's exactly.
  void check_exact(const MB& m, const std::string& tag) {
    const std::string path = (dir_.path() / (tag + ".onnx")).string();
    ASSERT_TRUE(m.write(path));
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(
        build_graph(import_onnx(path), "llvm -mcpu=native"), tag);
    std::vector<NDArray> refs;
    onnxruntime_outputs(m.inputs(), tag, path, exec, &refs);
    if (IsSkipped() || HasFatalFailure()) return;
    for (size_t i = 0; i < exec.num_outputs(); ++i) {
      EXPECT_TRUE(same_bits(exec.output(i), refs[i])) << tag << " output " << exec.output_name(i);
    }
  }

  /// DynamicQuantizeLinear of `x` into outputs x_y, x_scale, x_zp.
  static void quantize(MB& m, const std::string& x) {
    m.node("DynamicQuantizeLinear", {x}, {x + "_y", x + "_scale", x + "_zp"});
    for (const char* o : {"_y", "_scale", "_zp"}) m.output(x + o);
  }
};

TEST_F(DynamicQuantizeTest, RangesAndShapesMatchOnnxRuntimeExactly) {
  MB m(13);
  m.input("lanes", {2, 3, 64});     // last dimension a multiple of 16
  m.input("plain", {5, 7});         // one reduction over every axis
  m.input("conv", {1, 8, 14, 14});  // an NCHW activation
  m.input("bert", {1, 128, 768});   // BERT-base's hidden state
  m.init_scalar("zero", 0.0f);
  m.init_scalar("wide", 37.5f);
  m.node("Relu", {"plain"}, {"above"});         // min widened to 0
  m.node("Neg", {"above"}, {"below"});          // max widened to 0
  m.node("Mul", {"plain", "zero"}, {"zeros"});  // an empty range
  m.node("Mul", {"conv", "wide"}, {"conv_wide"});
  // The same ends with the range folded in lanes, where the minimum is the negated maximum of -x.
  m.node("Relu", {"lanes"}, {"lanes_above"});
  m.node("Neg", {"lanes_above"}, {"lanes_below"});
  m.node("Mul", {"lanes", "zero"}, {"lanes_zeros"});
  for (const char* x : {"lanes", "plain", "above", "below", "zeros", "conv_wide", "bert",
                        "lanes_above", "lanes_below", "lanes_zeros"}) {
    quantize(m, x);
  }
  check_exact(m, "dynamic_quantize");
}

}  // namespace
}  // namespace kiln::graph
