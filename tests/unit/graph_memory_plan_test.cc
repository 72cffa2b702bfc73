// plan_memory and verify_memory_plan: lifetimes over fused groups, reuse, alignment, and the
// checker catching overlapping live tensors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/memory_plan.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

/// x -> Relu -> Relu -> ... (n ops) -> out
Graph relu_chain(int n, const Shape& shape) {
  Graph g;
  ValueId h = g.add_input("x", kFloat32, shape);
  for (int i = 0; i < n; ++i)
    h = g.add_op("Relu", "relu" + std::to_string(i), {h}, {}, kFloat32, shape);
  g.add_output(h);
  g.verify();
  return g;
}

TEST(MemoryPlanTest, ChainReusesTwoBuffers) {
  const Graph g = relu_chain(10, {1, 16, 16, 16});
  const int64_t tensor = 16 * 16 * 16 * 4;
  const auto groups = fuse_ops(g, /*enable=*/false);
  ASSERT_EQ(groups.size(), 10u);
  const MemoryPlan plan = plan_memory(g, groups);
  verify_memory_plan(g, groups, plan);
  EXPECT_EQ(plan.placement.size(), 9u);  // the last output is the graph's
  EXPECT_EQ(plan.bytes_without_reuse, 9 * tensor);
  EXPECT_EQ(plan.bytes_with_reuse, 2 * tensor);
  ASSERT_EQ(plan.pool_bytes, std::vector<int64_t>{2 * tensor});
  // Consecutive tensors alternate between the two halves.
  for (size_t i = 0; i + 1 < 9; ++i) {
    const ValueId a = g.nodes()[i].outputs[0], b = g.nodes()[i + 1].outputs[0];
    EXPECT_NE(plan.placement.at(a).second, plan.placement.at(b).second);
  }
  // Fused, the chain is one kernel and nothing is planned.
  const auto fused = fuse_ops(g);
  ASSERT_EQ(fused.size(), 1u);
  const MemoryPlan none = plan_memory(g, fused);
  verify_memory_plan(g, fused, none);
  EXPECT_TRUE(none.placement.empty());
  EXPECT_TRUE(none.pool_bytes.empty());
  EXPECT_EQ(none.bytes_with_reuse, 0);
}

// x -> Conv -> Relu(r) -+-> Conv -> Relu ---------+-> Add -> out
//                       +-> Conv -> Sigmoid -> Exp +
TEST(MemoryPlanTest, BranchesKeepValuesAliveUntilLastReader) {
  Graph g;
  const Shape s = {1, 4, 8, 8};
  const ValueId x = g.add_input("x", kFloat32, s);
  const ValueId w = g.add_constant("w", runtime::NDArray::empty({4, 4, 1, 1}, kFloat32));
  const Attrs conv = {{"group", int64_t{1}},
                      {"pads", Shape{0, 0, 0, 0}},
                      {"strides", Shape{1, 1}},
                      {"dilations", Shape{1, 1}},
                      {"kernel_shape", Shape{1, 1}}};
  const ValueId c0 = g.add_op("Conv", "c0", {x, w}, conv, kFloat32, s);
  const ValueId r = g.add_op("Relu", "r", {c0}, {}, kFloat32, s);
  const ValueId c1 = g.add_op("Conv", "c1", {r, w}, conv, kFloat32, s);
  const ValueId l = g.add_op("Relu", "l", {c1}, {}, kFloat32, s);
  const ValueId c2 = g.add_op("Conv", "c2", {r, w}, conv, kFloat32, s);
  const ValueId sg = g.add_op("Sigmoid", "sg", {c2}, {}, kFloat32, s);
  const ValueId e = g.add_op("Exp", "e", {sg}, {}, kFloat32, s);
  const ValueId out = g.add_op("Add", "add", {l, e}, {}, kFloat32, s);
  g.add_output(out);
  g.verify();
  for (bool enable : {false, true}) {
    const auto groups = fuse_ops(g, enable);
    const MemoryPlan plan = plan_memory(g, groups);
    verify_memory_plan(g, groups, plan);
    EXPECT_LE(plan.bytes_with_reuse, plan.bytes_without_reuse);
    for (const auto& [v, where] : plan.placement) {
      EXPECT_EQ(where.first, 0);
      EXPECT_EQ(where.second % kMemoryAlignment, 0);
    }
  }
  // Unfused: r (read by groups 2 and 4) must not share bytes with c1, l or c2.
  const auto groups = fuse_ops(g, false);
  const MemoryPlan plan = plan_memory(g, groups);
  for (ValueId other : {c1, l, c2}) {
    EXPECT_NE(plan.placement.at(r).second, plan.placement.at(other).second);
  }
  // Fused: [c0, r], [c2, sg, e], [c1, l, add]; only r and e are intermediates, both live in the
  // last group, so they take two buffers.
  const auto fused = fuse_ops(g);
  ASSERT_EQ(fused.size(), 3u);
  const MemoryPlan fused_plan = plan_memory(g, fused);
  EXPECT_EQ(fused_plan.placement.size(), 2u);
  EXPECT_EQ(fused_plan.placement.count(r), 1u);
  EXPECT_EQ(fused_plan.placement.count(e), 1u);
  EXPECT_EQ(fused_plan.bytes_with_reuse, 2 * 4 * 8 * 8 * 4);
}

TEST(MemoryPlanTest, OddSizesAreAligned) {
  Graph g;
  ValueId h = g.add_input("x", kFloat32, {3, 5});
  for (int i = 0; i < 4; ++i)
    h = g.add_op("Neg", "n" + std::to_string(i), {h}, {}, kFloat32, {3, 5});
  g.add_output(h);
  const auto groups = fuse_ops(g, false);
  const MemoryPlan plan = plan_memory(g, groups);
  verify_memory_plan(g, groups, plan);
  EXPECT_EQ(aligned_bytes(g.value(g.nodes()[0].outputs[0])), 64);
  EXPECT_EQ(plan.bytes_without_reuse, 3 * 64);
  EXPECT_EQ(plan.bytes_with_reuse, 2 * 64);
}

TEST(MemoryPlanTest, CheckerCatchesOverlap) {
  const Graph g = relu_chain(4, {8, 8});
  const auto groups = fuse_ops(g, false);
  MemoryPlan plan = plan_memory(g, groups);
  verify_memory_plan(g, groups, plan);
  const ValueId a = g.nodes()[0].outputs[0], b = g.nodes()[1].outputs[0];
  MemoryPlan bad = plan;
  bad.placement[b] = bad.placement[a];  // both live during group 1
  EXPECT_THROW(verify_memory_plan(g, groups, bad), InternalError);
  bad = plan;
  bad.placement[a].second += 32;  // misaligned
  EXPECT_THROW(verify_memory_plan(g, groups, bad), InternalError);
  bad = plan;
  bad.placement.erase(a);  // missing
  EXPECT_THROW(verify_memory_plan(g, groups, bad), InternalError);
  // a (groups 0..1) and the third tensor (groups 2..3) may share bytes.
  bad = plan;
  bad.placement[g.nodes()[2].outputs[0]] = bad.placement[a];
  EXPECT_NO_THROW(verify_memory_plan(g, groups, bad));
}

}  // namespace
}  // namespace kiln::graph
