// Tensors too large for a kernel (more than 2^31 - 1 elements: kernels index with 32-bit integers)
// are refused when they are typed, before anything is allocated, naming the node or input, the
// tensor and its size, with element counts computed in 64 bits and every product checked. The
// issue's cases: ConstantOfShape of 2^40 elements ended in "std::bad_alloc"; a Resize to
// 2^20 x 2^20 in "floordiv by the constant zero", naming no node; a graph input of 2^31 elements
// was "dimension 0 must be positive, got -2147483648" (read into 32 bits).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/tensor_limits.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::graph {
namespace {

using MB = testing::OnnxModelBuilder;
constexpr int64_t k2to20 = int64_t{1} << 20, k2to31 = int64_t{1} << 31, k2to40 = int64_t{1} << 40;

/// The message of the kiln::Error importing `m` (and building it) raises; "" when none.
std::string refusal(const MB& m, const OnnxImportOptions& options = {}) {
  try {
    build_graph(import_onnx_bytes(m.bytes(), "big.onnx", options), "llvm");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorSize, ConstantOfShapeOfTwoToTheFortyElements) {
  MB m;
  m.input("x", {1});
  m.init_int64("shape", {k2to40});
  m.node("ConstantOfShape", "fill", {"shape"}, {"c"});
  m.node("Add", "add", {"x", "c"}, {"y"});
  m.output("y");
  EXPECT_EQ(refusal(m),
            "error: 'big.onnx': node 'fill' (ConstantOfShape): output 'c' has shape "
            "[1099511627776]: 1099511627776 elements (4.0 TiB of float32), more than the "
            "2147483647 (2^31 - 1) a tensor may hold (kernels index with 32-bit integers)");
  // A shape whose product overflows 64 bits is refused too, not wrapped into a small size.
  MB o;
  o.input("x", {1});
  o.init_int64("shape", {int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32});
  o.node("ConstantOfShape", "fill", {"shape"}, {"c"});
  o.node("Add", "add", {"x", "c"}, {"y"});
  o.output("y");
  EXPECT_EQ(refusal(o),
            "error: 'big.onnx': node 'fill' (ConstantOfShape): output 'c' has shape "
            "[4294967296,4294967296,4294967296]: more than 2^63 elements, more than the "
            "2147483647 (2^31 - 1) a tensor may hold (kernels index with 32-bit integers)");
}

TEST(TensorSize, ResizeToTwoToTheTwentySquared) {
  MB m;
  m.input("x", {1, 1, 4, 4});
  m.init_int64("sizes", {1, 1, k2to20, k2to20});
  m.node("Resize", "up", {"x", "", "", "sizes"}, {"y"});
  m.output("y");
  EXPECT_EQ(refusal(m),
            "error: 'big.onnx': 'y' (output of node 'up' (Resize)) has shape "
            "[1,1,1048576,1048576]: 1099511627776 elements (4.0 TiB of float32), more than the "
            "2147483647 (2^31 - 1) a tensor may hold (kernels index with 32-bit integers)");
}

TEST(TensorSize, GraphInputOfTwoToTheThirtyOneElements) {
  MB m;
  m.input("x", {k2to31});
  m.node("Relu", "relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_EQ(refusal(m),
            "error: 'big.onnx': 'x' (graph input) has shape [2147483648]: 2147483648 elements "
            "(8.0 GiB of float32), more than the 2147483647 (2^31 - 1) a tensor may hold (kernels "
            "index with 32-bit integers)");
  // One element fewer is a tensor a kernel indexes: it imports (nothing is allocated).
  MB ok;
  ok.input("x", {k2to31 - 1});
  ok.node("Relu", "relu", {"x"}, {"y"});
  ok.output("y");
  EXPECT_EQ(import_onnx_bytes(ok.bytes(), "ok.onnx").value(0).shape,
            (std::vector<int64_t>{k2to31 - 1}));
  // The same size bound to a symbolic dimension by --input-shape.
  MB sym;
  sym.input("x", {-1, 2}, onnx::TensorProto::FLOAT, "batch");
  sym.node("Relu", "relu", {"x"}, {"y"});
  sym.output("y");
  OnnxImportOptions bound;
  bound.input_shapes["x"] = {k2to31 / 2, 2};
  EXPECT_EQ(refusal(sym, bound),
            "error: 'big.onnx': 'x' (graph input) has shape [1073741824,2]: 2147483648 elements "
            "(8.0 GiB of float32), more than the 2147483647 (2^31 - 1) a tensor may hold (kernels "
            "index with 32-bit integers)");
}

TEST(TensorSize, ExpandAndRangeBeyondTheLimit) {
  MB e;
  e.input("x", {1, 1});
  e.init_int64("shape", {k2to40, k2to40});
  e.node("Expand", "grow", {"x", "shape"}, {"y"});
  e.output("y");
  EXPECT_EQ(refusal(e),
            "error: 'big.onnx': 'y' (output of node 'grow' (Expand)) has shape "
            "[1099511627776,1099511627776]: more than 2^63 elements, more than the 2147483647 "
            "(2^31 - 1) a tensor may hold (kernels index with 32-bit integers)");
  MB r;
  r.init_scalar("start", 0.0f);
  r.init_scalar("limit", 1e30f);
  r.init_scalar("delta", 1.0f);
  r.node("Range", "steps", {"start", "limit", "delta"}, {"y"});
  r.output("y");
  const std::string msg = refusal(r);
  EXPECT_NE(msg.find("'big.onnx': node 'steps' (Range): output 'y' would hold 1e+30 elements "
                     "(from start 0, limit 1e+30, delta 1), more than the 2147483647"),
            std::string::npos)
      << msg;
}

// A graph made with the Graph API, not imported: the build checks every value before constant
// folding allocates any.
TEST(TensorSize, BuildRefusesAHandMadeGraph) {
  Graph g;
  const ValueId x = g.add_input("x", runtime::kFloat32, {k2to20, k2to20});
  g.add_output(g.add_op("Relu", "relu", {x}, {}, runtime::kFloat32, {k2to20, k2to20}));
  try {
    build_graph(g, "llvm");
    FAIL() << "the graph built";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "error: graph build: graph input 'x' has shape [1048576,1048576]: 1099511627776 "
              "elements (4.0 TiB of float32), more than the 2147483647 (2^31 - 1) a tensor may "
              "hold (kernels index with 32-bit integers)");
  }
  EXPECT_EQ(tensor_size_problem({0, k2to40, k2to40}, runtime::kFloat32), "");  // empty
  EXPECT_EQ(tensor_size_problem({k2to31 - 1}, runtime::kInt64), "");
}

}  // namespace
}  // namespace kiln::graph
