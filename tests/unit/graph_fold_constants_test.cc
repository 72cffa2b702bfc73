// fold_constants: nodes of constants computed at build time by Kiln's own kernels, compared with
// the same arithmetic in C++; chains fold entirely; graph outputs and nodes reading inputs stay.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "compiler/graph/fold_constants.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;

TEST(FoldConstants, ChainOfConstantNodesBecomesOneConstant) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {2, 3});
  NDArray wa = testing::random_array({4, 3}, 1);
  ValueId w = g.add_constant("w", wa.copy());
  ValueId s = g.add_constant("s", NDArray::from_vector<float>({2.0f}, {1}));
  ValueId wt =
      g.add_op("Transpose", "wt", {w}, {{"perm", std::vector<int64_t>{1, 0}}}, kFloat32, {3, 4});
  ValueId ws = g.add_op("Mul", "ws", {wt, s}, {}, kFloat32, {3, 4});
  ValueId y = g.add_op("MatMul", "mm", {x, ws}, {}, kFloat32, {2, 4});
  ValueId r = g.add_op("Relu", "out", {y}, {}, kFloat32, {2, 4});
  g.add_output(r);
  Graph original = g;

  EXPECT_EQ(fold_constants(g), 2u);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0].op, "MatMul");
  ASSERT_TRUE(g.value(ws).is_constant());
  const float* folded = g.value(ws).data->data<float>();
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(folded[k * 4 + j], 2.0f * wa.data<float>()[j * 3 + k]);
  }
  g.verify();

  // The build (which folds by itself) computes what the unfolded graph does.
  BuildReport rep;
  auto exec = runtime::GraphExecutor::from_bundle(build_graph(original, "llvm", {}, &rep), "g");
  EXPECT_EQ(rep.constants_folded, 2u);
  NDArray xa = testing::random_array({2, 3}, 2);
  exec.set_input("x", xa);
  exec.run();
  std::vector<float> ref;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k)
        acc += xa.data<float>()[i * 3 + k] * 2.0f * wa.data<float>()[j * 3 + k];
      ref.push_back(std::max(acc, 0.0f));
    }
  }
  EXPECT_TRUE(testing::all_close(exec.output(0), ref, 1e-5, 1e-6));
}

TEST(FoldConstants, GraphOutputsAndSizeLimitStayComputed) {
  Graph g;
  ValueId c = g.add_constant("c", testing::random_array({8}, 3));
  ValueId a = g.add_op("Abs", "abs", {c}, {}, kFloat32, {8});
  ValueId n = g.add_op("Neg", "neg", {a}, {}, kFloat32, {8});
  g.add_output(n);
  // Abs folds; Neg writes a graph output and stays.
  Graph limited = g;
  EXPECT_EQ(fold_constants(g), 1u);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "Neg");
  // Outputs above the element limit are left alone.
  EXPECT_EQ(fold_constants(limited, /*max_elements=*/4), 0u);
  EXPECT_EQ(limited.nodes().size(), 2u);
}

}  // namespace
}  // namespace kiln::graph
