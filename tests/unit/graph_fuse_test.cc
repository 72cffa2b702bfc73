// Operator patterns and fuse_ops: the exact groups for small networks built with the Graph API.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "compiler/graph/fold_batch_norm.h"
#include "compiler/graph/fuse.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_pattern.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

/// A graph under construction with shorthands for the ops the tests use.
struct Builder {
  Graph g;
  int count = 0;

  std::string fresh(const std::string& base) { return base + std::to_string(count++); }
  ValueId constant(const Shape& shape) {
    NDArray a = NDArray::empty(shape, kFloat32);
    std::vector<float> ones(static_cast<size_t>(a.num_elements()), 1.0f);
    a.copy_from(ones);
    return g.add_constant(fresh("c"), std::move(a));
  }
  const Shape& shape(ValueId v) { return g.value(v).shape; }
  ValueId conv(ValueId x, int64_t cout) {
    const Shape s = shape(x);
    const ValueId w = constant({cout, s[1], 3, 3});
    return g.add_op("Conv", fresh("conv"), {x, w},
                    {{"group", int64_t{1}},
                     {"pads", Shape{1, 1, 1, 1}},
                     {"strides", Shape{1, 1}},
                     {"dilations", Shape{1, 1}},
                     {"kernel_shape", Shape{3, 3}}},
                    kFloat32, {s[0], cout, s[2], s[3]});
  }
  ValueId bn(ValueId x) {
    const int64_t c = shape(x)[1];
    const Shape s = shape(x);
    return g.add_op("BatchNormalization", fresh("bn"),
                    {x, constant({c}), constant({c}), constant({c}), constant({c})},
                    {{"epsilon", 1e-5f}}, kFloat32, s);
  }
  ValueId unary(const std::string& op, ValueId x, Attrs attrs = {}) {
    const Shape s = shape(x);
    return g.add_op(op, fresh(op), {x}, std::move(attrs), kFloat32, s);
  }
  ValueId binary(const std::string& op, ValueId a, ValueId b) {
    const Shape s = shape(a);
    return g.add_op(op, fresh(op), {a, b}, {}, kFloat32, s);
  }
  ValueId gemm(ValueId x, int64_t n, bool bias = true) {
    const Shape s = shape(x);
    std::vector<ValueId> in = {x, constant({s[1], n})};
    if (bias) in.push_back(constant({n}));
    return g.add_op(
        "Gemm", fresh("gemm"), in,
        {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", int64_t{0}}}, kFloat32,
        {s[0], n});
  }
};

/// "Conv,BatchNormalization,Relu@Conv" per group: the ops in order and the master's op.
std::vector<std::string> describe(const Graph& g, const std::vector<FusedGroup>& groups) {
  std::vector<std::string> out;
  for (const FusedGroup& grp : groups) {
    std::string s;
    for (size_t i : grp.nodes) s += (s.empty() ? "" : ",") + g.nodes()[i].op;
    out.push_back(s + "@" + g.nodes()[grp.master].op);
  }
  return out;
}

/// The structural invariants of any grouping.
void check_partition(const Graph& g, const std::vector<FusedGroup>& groups) {
  std::vector<int> seen(g.nodes().size(), 0);
  std::vector<int64_t> group_of(g.num_values(), -1);
  for (size_t k = 0; k < groups.size(); ++k) {
    const FusedGroup& grp = groups[k];
    ASSERT_FALSE(grp.nodes.empty());
    for (size_t j = 0; j < grp.nodes.size(); ++j) {
      ++seen[grp.nodes[j]];
      if (j > 0) {
        EXPECT_LT(grp.nodes[j - 1], grp.nodes[j]);
      }
    }
    EXPECT_EQ(grp.output, g.nodes()[grp.nodes.back()].outputs[0]);
    // Inputs come from earlier groups (topological order of groups) or are inputs/constants.
    for (ValueId v : grp.inputs) {
      const int64_t p = g.producer(v);
      if (p < 0) continue;
      ASSERT_GE(group_of[static_cast<size_t>(v)], 0) << "input %" << v << " of group " << k;
    }
    for (ValueId v : grp.outputs) group_of[static_cast<size_t>(v)] = static_cast<int64_t>(k);
    // Inner values are read only inside the group.
    for (size_t i : grp.nodes) {
      if (i == grp.nodes.back()) continue;
      const ValueId v = g.nodes()[i].outputs[0];
      EXPECT_FALSE(g.is_output(v));
      for (size_t c : g.consumers(v)) {
        EXPECT_NE(std::find(grp.nodes.begin(), grp.nodes.end(), c), grp.nodes.end());
      }
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

/// x -> Conv -> BN -> Relu -> Conv -> BN -> Add(x) -> Relu
struct ResNetBlock {
  Builder b;
  ValueId x, r1, out;
  ResNetBlock() {
    x = b.g.add_input("x", kFloat32, {1, 8, 8, 8});
    r1 = b.unary("Relu", b.bn(b.conv(x, 8)));
    out = b.unary("Relu", b.binary("Add", b.bn(b.conv(r1, 8)), x));
    b.g.add_output(out);
    b.g.verify();
  }
};

TEST(OpPatternTest, EveryFrontEndOp) {
  const std::map<std::string, OpPattern> expected = {
      {"Relu", OpPattern::kElemWise},         {"Cast", OpPattern::kElemWise},
      {"Clip", OpPattern::kElemWise},         {"Add", OpPattern::kBroadcast},
      {"Pow", OpPattern::kBroadcast},         {"BatchNormalization", OpPattern::kBroadcast},
      {"Reshape", OpPattern::kInjective},     {"Concat", OpPattern::kInjective},
      {"Slice", OpPattern::kInjective},       {"Pad", OpPattern::kInjective},
      {"MaxPool", OpPattern::kCommReduce},    {"GlobalAveragePool", OpPattern::kCommReduce},
      {"Conv", OpPattern::kOutEWiseFusable},  {"MatMul", OpPattern::kOutEWiseFusable},
      {"Gemm", OpPattern::kOutEWiseFusable},  {"Softmax", OpPattern::kOpaque},
      {"LogSoftmax", OpPattern::kOpaque},     {"LSTM", OpPattern::kOpaque},
      {"Erf", OpPattern::kElemWise},          {"HardSwish", OpPattern::kElemWise},
      {"Equal", OpPattern::kBroadcast},       {"Where", OpPattern::kBroadcast},
      {"Expand", OpPattern::kBroadcast},      {"Tile", OpPattern::kInjective},
      {"ReduceMean", OpPattern::kCommReduce}, {"ArgMax", OpPattern::kCommReduce},
      {"Split", OpPattern::kOpaque},          {"Resize", OpPattern::kInjective},
  };
  Node n;
  for (const auto& [op, pattern] : expected) {
    n.op = op;
    EXPECT_EQ(op_pattern(n), pattern) << op;
  }
  n.op = "NoSuchOp";
  EXPECT_EQ(op_pattern(n), OpPattern::kOpaque);
  // Every supported op has a deliberate pattern: only these are opaque.
  for (const std::string& op : supported_onnx_ops()) {
    n.op = op;
    if (op_pattern(n) == OpPattern::kOpaque) {
      EXPECT_TRUE(op == "LSTM" || op == "Softmax" || op == "LogSoftmax" || op == "Constant" ||
                  op == "Shape" || op == "Split" || op == "ConstantOfShape" || op == "Range" ||
                  op == "Size" || op == "LayerNormalization" || op == "InstanceNormalization" ||
                  op == "CastLike" || op == "CumSum" || op == "Hardmax" || op == "Einsum" ||
                  op == "GRU" || op == "QLinearConv" || op == "QLinearMatMul" ||  // imported as QDQ
                  op == "ScatterElements" || op == "ScatterND" ||
                  op == "Scatter" ||                // their own loop
                  op == "DynamicQuantizeLinear" ||  // a whole-tensor range, then the quantization
                  op == "Upsample" ||               // imported as Resize
                  op == "Dropout")                  // an alias of its input
          << op;
    }
  }
  EXPECT_STREQ(op_pattern_name(OpPattern::kOutEWiseFusable), "out_ewise_fusable");
}

TEST(FuseTest, ResNetBlock) {
  ResNetBlock r;
  const Graph& g = r.b.g;
  const auto groups = fuse_ops(g);
  check_partition(g, groups);
  EXPECT_EQ(describe(g, groups),
            (std::vector<std::string>{"Conv,BatchNormalization,Relu@Conv",
                                      "Conv,BatchNormalization,Add,Relu@Conv"}));
  EXPECT_EQ(groups[0].pattern, OpPattern::kOutEWiseFusable);
  EXPECT_EQ(groups[0].output, r.r1);
  EXPECT_EQ(groups[1].output, r.out);
  // Inputs in first-use order: the activation, the weight, BN's four parameters, the skip.
  ASSERT_EQ(groups[1].inputs.size(), 7u);
  EXPECT_EQ(groups[1].inputs.front(), r.r1);
  EXPECT_EQ(groups[1].inputs.back(), r.x);
  EXPECT_TRUE(g.value(groups[1].inputs[1]).is_constant());
  EXPECT_EQ(groups[0].inputs.front(), r.x);
  EXPECT_EQ(fused_groups_to_string(g, groups),
            "group 0 [out_ewise_fusable, master Conv]: Conv, BatchNormalization, Relu\n"
            "group 1 [out_ewise_fusable, master Conv]: Conv, BatchNormalization, Add, Relu\n");

  // After batch-norm folding: Conv+Relu and Conv+Add+Relu.
  Graph folded = g;
  EXPECT_EQ(fold_batch_norm(folded), 2u);
  folded.verify();
  const auto groups2 = fuse_ops(folded);
  check_partition(folded, groups2);
  EXPECT_EQ(describe(folded, groups2),
            (std::vector<std::string>{"Conv,Relu@Conv", "Conv,Add,Relu@Conv"}));
}

// A squeeze-and-excitation block: the scale's 1x1 convolution outputs [1,8,1,1], and the Mul
// that broadcasts it over the block's [1,8,8,8] input has more elements than the convolution's
// tile, so it is no epilogue of that convolution: the chain stops at Sigmoid and the Mul joins
// the residual Add after it. A Mul of the same shape (a per-channel constant) stays in the
// epilogue.
// A quantized residual block: the skip branch's DequantizeLinear, read by the epilogue's Add
// alone, joins the conv's group (the epilogue reads the bytes); one that another node reads too,
// or that is not a DequantizeLinear, stays a group of its own.
TEST(FuseTest, DequantizedSkipJoinsTheEpilogue) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 8, 8, 8});
  const ValueId q = b.g.add_input("q", runtime::kUInt8, {1, 8, 8, 8});
  const ValueId scale = b.g.add_constant("s", NDArray::from_vector(std::vector<float>{0.5f}, {}));
  const ValueId zero = b.g.add_constant("z", NDArray::from_vector(std::vector<uint8_t>{128}, {}));
  auto dequantize = [&](const std::string& name) {
    return b.g.add_op("DequantizeLinear", name, {q, scale, zero}, {{"axis", int64_t{0}}}, kFloat32,
                      {1, 8, 8, 8});
  };
  const ValueId skip = dequantize("dq_skip");
  const ValueId y = b.unary("Relu", b.binary("Add", b.conv(x, 8), skip));
  const ValueId shared = dequantize("dq_shared");
  const ValueId z = b.binary("Add", b.conv(y, 8), shared);
  const ValueId w = b.binary("Mul", b.conv(z, 8), b.unary("Sigmoid", x));
  b.g.add_output(w);
  b.g.add_output(shared);
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  EXPECT_EQ(describe(b.g, groups),
            (std::vector<std::string>{"DequantizeLinear,Conv,Add,Relu@Conv",
                                      "DequantizeLinear@DequantizeLinear", "Conv,Add@Conv",
                                      "Sigmoid@Sigmoid", "Conv,Mul@Conv"}));
}

TEST(FuseTest, SqueezeExcitationScaleIsNotAnEpilogue) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 8, 8, 8});
  const ValueId body = b.unary("Relu", b.conv(x, 8));
  const ValueId pooled = b.g.add_op("GlobalAveragePool", "gap", {body}, {}, kFloat32, {1, 8, 1, 1});
  auto conv1x1 = [&](ValueId in, int64_t cout) {
    const ValueId w = b.constant({cout, b.shape(in)[1], 1, 1});
    return b.g.add_op("Conv", b.fresh("conv"), {in, w},
                      {{"group", int64_t{1}},
                       {"pads", Shape{0, 0, 0, 0}},
                       {"strides", Shape{1, 1}},
                       {"dilations", Shape{1, 1}},
                       {"kernel_shape", Shape{1, 1}}},
                      kFloat32, {1, cout, 1, 1});
  };
  const ValueId s = b.unary("Sigmoid", conv1x1(b.unary("Relu", conv1x1(pooled, 4)), 8));
  const ValueId scaled = b.g.add_op("Mul", "scale", {body, s}, {}, kFloat32, {1, 8, 8, 8});
  const ValueId block = b.binary("Add", scaled, x);
  const ValueId out = b.binary("Mul", b.conv(block, 8), b.constant({8, 1, 1}));
  b.g.add_output(out);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  EXPECT_EQ(describe(b.g, groups),
            (std::vector<std::string>{"Conv,Relu@Conv", "GlobalAveragePool@GlobalAveragePool",
                                      "Conv,Relu@Conv", "Conv,Sigmoid@Conv", "Mul,Add@Add",
                                      "Conv,Mul@Conv"}));
}

TEST(FuseTest, DisabledGivesOneGroupPerNode) {
  ResNetBlock r;
  const Graph& g = r.b.g;
  const auto groups = fuse_ops(g, /*enable=*/false);
  check_partition(g, groups);
  ASSERT_EQ(groups.size(), g.nodes().size());
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(groups[i].nodes, std::vector<size_t>{i});
    EXPECT_EQ(groups[i].master, i);
    EXPECT_EQ(groups[i].pattern, op_pattern(g.nodes()[i]));
    EXPECT_EQ(groups[i].output, g.nodes()[i].outputs[0]);
  }
}

TEST(FuseTest, Mlp) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {4, 16});
  ValueId h = b.g.add_op("MatMul", "mm", {x, b.constant({16, 32})}, {}, kFloat32, {4, 32});
  h = b.unary("Relu", b.binary("Add", h, b.constant({32})));
  h = b.unary("Relu", b.gemm(h, 32));
  h = b.unary("Softmax", b.gemm(h, 10), {{"axis", int64_t{1}}});
  b.g.add_output(h);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  EXPECT_EQ(describe(b.g, groups),
            (std::vector<std::string>{"MatMul,Add,Relu@MatMul", "Gemm,Relu@Gemm", "Gemm@Gemm",
                                      "Softmax@Softmax"}));
  EXPECT_EQ(groups[3].pattern, OpPattern::kOpaque);
}

// x -> Conv -> Relu(r) -+-> Conv -> Relu ----+-> Add -> out
//                       +-> Conv -> Sigmoid -+
TEST(FuseTest, BranchesEndGroups) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 4, 8, 8});
  const ValueId r = b.unary("Relu", b.conv(x, 4));
  const ValueId left = b.unary("Relu", b.conv(r, 4));
  const ValueId right = b.unary("Sigmoid", b.conv(r, 4));
  const ValueId out = b.binary("Add", left, right);
  b.g.add_output(out);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  // The Add goes with the first conv that reaches it; the other branch stays a group of its own
  // (two out-ewise-fusable ops never share a group). Groups are in topological order.
  EXPECT_EQ(describe(b.g, groups), (std::vector<std::string>{"Conv,Relu@Conv", "Conv,Sigmoid@Conv",
                                                             "Conv,Relu,Add@Conv"}));
  EXPECT_EQ(groups[0].output, r);
  EXPECT_EQ(groups[1].output, right);
  EXPECT_EQ(groups[2].inputs.back(), right);

  // A graph output read by another node also ends its group.
  b.g.add_output(left);
  EXPECT_EQ(
      describe(b.g, fuse_ops(b.g)),
      (std::vector<std::string>{"Conv,Relu@Conv", "Conv,Relu@Conv", "Conv,Sigmoid,Add@Conv"}));
}

TEST(FuseTest, ReductionHeadAndSoftmax) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 8, 4, 4});
  ValueId h = b.unary("Relu", b.conv(x, 8));
  h = b.g.add_op("GlobalAveragePool", "gap", {h}, {}, kFloat32, {1, 8, 1, 1});
  h = b.g.add_op("Reshape", "flat", {h}, {{"shape", Shape{1, 8}}}, kFloat32, {1, 8});
  h = b.unary("Softmax", b.gemm(h, 10), {{"axis", int64_t{1}}});
  b.g.add_output(h);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  // The reduction does not take the conv's group nor its consumer; Reshape is not fused into the
  // Gemm (nothing is fused into an out-ewise-fusable op's inputs).
  EXPECT_EQ(describe(b.g, groups),
            (std::vector<std::string>{"Conv,Relu@Conv", "GlobalAveragePool@GlobalAveragePool",
                                      "Reshape@Reshape", "Gemm@Gemm", "Softmax@Softmax"}));
  EXPECT_EQ(groups[1].pattern, OpPattern::kCommReduce);
  EXPECT_EQ(groups[2].pattern, OpPattern::kInjective);
}

TEST(FuseTest, InjectiveChainsAndReductionInputs) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 4, 8, 8});
  ValueId h =
      b.g.add_op("Transpose", "t", {x}, {{"perm", Shape{0, 1, 3, 2}}}, kFloat32, {1, 4, 8, 8});
  h = b.unary("Exp", h);
  h = b.g.add_op(
      "MaxPool", "pool", {h},
      {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}, {"pads", Shape{0, 0, 0, 0}}},
      kFloat32, {1, 4, 4, 4});
  h = b.g.add_op("Flatten", "flat", {h}, {{"axis", int64_t{1}}}, kFloat32, {1, 64});
  h = b.unary("Relu", h);
  h = b.binary("Mul", h, h);  // reads the Relu twice: still one reader
  b.g.add_output(h);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  EXPECT_EQ(describe(b.g, groups),
            (std::vector<std::string>{"Transpose,Exp,MaxPool@MaxPool", "Flatten,Relu,Mul@Mul"}));
  EXPECT_EQ(groups[0].pattern, OpPattern::kCommReduce);
  EXPECT_EQ(groups[1].pattern, OpPattern::kInjective);
  EXPECT_EQ(groups[0].inputs, std::vector<ValueId>{x});
}

// A blocked value converted back to NCHW stays out of a Flatten that reads it when its rows are 16
// or longer (its own kernel tiles the transposition), and joins it when they are shorter.
TEST(FuseTest, UnblockingIntoAFlattenStaysItsOwnKernel) {
  for (int64_t w : {20, 7}) {
    Builder b;
    const ValueId x = b.g.add_input("x", kFloat32, {1, 2, 4, w, 16});
    ValueId h = b.g.add_op("LayoutTransform", "unblock", {x},
                           {{"src_block", int64_t{16}}, {"dst_block", int64_t{0}}}, kFloat32,
                           {1, 32, 4, w});
    h = b.g.add_op("Flatten", "flat", {h}, {{"axis", int64_t{1}}}, kFloat32, {1, 32 * 4 * w});
    h = b.unary("Relu", h);
    b.g.add_output(h);
    b.g.verify();
    const auto groups = fuse_ops(b.g);
    check_partition(b.g, groups);
    const std::vector<std::string> expected =
        w >= 16 ? std::vector<std::string>{"LayoutTransform@LayoutTransform", "Flatten,Relu@Relu"}
                : std::vector<std::string>{"LayoutTransform,Flatten,Relu@Relu"};
    EXPECT_EQ(describe(b.g, groups), expected) << "width " << w;
  }
}

TEST(FuseTest, OpaqueMultiOutputNodeStaysAlone) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {2, 1, 3});
  const ValueId y = b.g.add_value("y", kFloat32, {2, 1, 1, 4});
  const ValueId yh = b.g.add_value("yh", kFloat32, {1, 1, 4});
  Node lstm;
  lstm.op = "LSTM";
  lstm.name = "lstm";
  lstm.inputs = {x, b.constant({1, 16, 3}), b.constant({1, 16, 4})};
  lstm.outputs = {y, yh, kNoValue};
  b.g.add_node(lstm);
  const ValueId r = b.unary("Tanh", yh);
  b.g.add_output(y);
  b.g.add_output(r);
  b.g.verify();
  const auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  EXPECT_EQ(describe(b.g, groups), (std::vector<std::string>{"LSTM@LSTM", "Tanh@Tanh"}));
  EXPECT_EQ(groups[0].outputs, (std::vector<ValueId>{y, yh}));
}

// A group stops growing at kMaxGroupOps operators: a chain of 600 elementwise nodes (an epilogue
// of a conv, then a chain of its own) becomes groups of at most 256, so that no kernel's
// expression is as deep as the graph; a linear Resize reads 4 places of its input (2-D), so a
// chain of them counts 1, 5, 21, 85, then 341 operators: groups of 4.
TEST(FuseTest, GroupsStopAtTheirOperatorLimit) {
  Builder b;
  const ValueId x = b.g.add_input("x", kFloat32, {1, 4, 8, 8});
  ValueId h = b.conv(x, 4);
  for (int i = 0; i < 600; ++i) h = i % 2 ? b.binary("Add", h, x) : b.unary("Relu", h);
  b.g.add_output(h);
  b.g.verify();
  auto groups = fuse_ops(b.g);
  check_partition(b.g, groups);
  std::vector<size_t> sizes;
  for (const FusedGroup& grp : groups) sizes.push_back(grp.nodes.size());
  // The conv and 255 epilogue nodes; then chains of 256 and the last 89.
  EXPECT_EQ(sizes, (std::vector<size_t>{256, 256, 89}));
  EXPECT_EQ(groups[0].pattern, OpPattern::kOutEWiseFusable);

  Builder r;
  ValueId y = r.g.add_input("y", kFloat32, {1, 1, 8, 8});
  for (int i = 0; i < 10; ++i) {
    const int64_t side = 8 + i + 1;
    y = r.g.add_op(
        "Resize", r.fresh("resize"), {y},
        {{"mode", std::string("linear")},
         {"scales", std::vector<float>{1.0f, 1.0f, side / (side - 1.0f), side / (side - 1.0f)}}},
        kFloat32, {1, 1, side, side});
  }
  r.g.add_output(y);
  r.g.verify();
  groups = fuse_ops(r.g);
  check_partition(r.g, groups);
  sizes.clear();
  for (const FusedGroup& grp : groups) sizes.push_back(grp.nodes.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 2}));
}

}  // namespace
}  // namespace kiln::graph
