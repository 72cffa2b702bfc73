// The ONNX front end: models built here with libonnx's protobuf classes, serialized and imported.
#include "compiler/graph/onnx_frontend.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/common/expect_error.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;

/// The shared builder, plus float initializers whose values are scale*i (in float_data, or in
/// raw_data when `raw`).
class ModelBuilder : public testing::OnnxModelBuilder {
 public:
  using OnnxModelBuilder::OnnxModelBuilder;
  void init_float(const std::string& name, std::vector<int64_t> shape, bool raw = false,
                  float scale = 0.01f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * float(i);
    init_values(name, shape, v, raw);
  }
};

class OnnxFrontendTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_.path() / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  testing::TempDir dir_{"kiln_onnx_test"};
};

const Node& find_node(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes()) {
    if (n.op == op) return n;
  }
  throw std::runtime_error("no node " + op + " in\n" + g.to_string());
}

/// Conv -> BatchNormalization -> Relu -> MaxPool -> Flatten -> Gemm -> Softmax, as a
/// classifier's head would be exported.
ModelBuilder small_cnn() {
  ModelBuilder m(13);
  m.input("image", {1, 3, 32, 32});
  m.init_float("conv.w", {8, 3, 3, 3}, /*raw=*/true);
  m.init_float("conv.b", {8});
  for (const char* p : {"bn.scale", "bn.bias", "bn.mean", "bn.var"}) m.init_float(p, {8});
  m.init_float("fc.w", {10, 8 * 8 * 8});
  m.init_float("fc.b", {10});
  auto* conv = m.node("Conv", "conv1", {"image", "conv.w", "conv.b"}, {"c1"});
  ModelBuilder::attr(conv, "strides", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(conv, "auto_pad", std::string("SAME_UPPER"));
  auto* bn = m.node("BatchNormalization", "bn1", {"c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"},
                    {"b1"});
  ModelBuilder::attr(bn, "epsilon", 1e-3f);
  m.node("Relu", "relu1", {"b1"}, {"r0"});
  m.node("Dropout", "drop", {"r0"}, {"r1"});  // inference: an alias, no node
  auto* pool = m.node("MaxPool", "pool1", {"r1"}, {"p1"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(pool, "strides", std::vector<int64_t>{2, 2});
  m.node("Flatten", "flatten", {"p1"}, {"f1"});
  auto* gemm = m.node("Gemm", "fc", {"f1", "fc.w", "fc.b"}, {"logits"});
  ModelBuilder::attr(gemm, "transB", int64_t{1});
  m.node("Softmax", "softmax", {"logits"}, {"prob"});
  m.output("prob");
  return m;
}

TEST_F(OnnxFrontendTest, SmallCnn) {
  Graph g = import_onnx(write("cnn.onnx", small_cnn().bytes()));
  SCOPED_TRACE(g.to_string());
  ASSERT_EQ(g.nodes().size(), 7u);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).type_string(), "float32[1,3,32,32]");

  const Node& conv = find_node(g, "Conv");
  EXPECT_EQ(conv.name, "conv1");
  EXPECT_EQ(conv.ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv.ints("pads"), (std::vector<int64_t>{0, 0, 1, 1}));  // SAME_UPPER, 32 -> 16
  EXPECT_EQ(conv.ints("dilations"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv.ints("kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(conv.i("group"), 1);
  EXPECT_FALSE(conv.has_attr("auto_pad"));
  EXPECT_EQ(g.value(conv.outputs[0]).type_string(), "float32[1,8,16,16]");
  const Value& w = g.value(conv.inputs[1]);
  ASSERT_TRUE(w.is_constant());
  EXPECT_EQ(w.type_string(), "float32[8,3,3,3]");
  EXPECT_FLOAT_EQ(w.data->data<float>()[5], 0.05f);                        // from raw_data
  EXPECT_FLOAT_EQ(g.value(conv.inputs[2]).data->data<float>()[7], 0.07f);  // from float_data

  EXPECT_FLOAT_EQ(find_node(g, "BatchNormalization").f("epsilon"), 1e-3f);
  const Node& pool = find_node(g, "MaxPool");
  EXPECT_EQ(pool.ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(pool.i("ceil_mode"), 0);
  EXPECT_EQ(g.value(pool.outputs[0]).type_string(), "float32[1,8,8,8]");
  EXPECT_EQ(find_node(g, "Flatten").i("axis"), 1);
  const Node& gemm = find_node(g, "Gemm");
  EXPECT_EQ(gemm.i("transA"), 0);
  EXPECT_EQ(gemm.i("transB"), 1);
  EXPECT_FLOAT_EQ(gemm.f("alpha"), 1.0f);
  EXPECT_EQ(g.value(gemm.outputs[0]).type_string(), "float32[1,10]");
  const Node& softmax = find_node(g, "Softmax");
  EXPECT_EQ(softmax.i("axis"), 1);  // -1 normalized
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0], softmax.outputs[0]);
  EXPECT_NO_THROW(g.verify());
  EXPECT_NE(g.to_string().find("= Conv(%"), std::string::npos);
}

TEST_F(OnnxFrontendTest, Opset13InputsBecomeAttributes) {
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.init_int64("axes0", {0, -1});
  m.init_int64("axes_sq", {3});
  m.node("Unsqueeze", "unsq", {"x", "axes0"}, {"u"});  // [1,2,3,1]
  m.node("Squeeze", "sq", {"u", "axes_sq"}, {"s"});    // [1,2,3]
  auto* cmin = m.node("Constant", "cmin", {}, {"lo"});
  ModelBuilder::attr(cmin, "value_float", -1.0f);
  m.init_float("hi", {}, false);  // scalar 0.0 from an initializer
  m.node("Clip", "clip", {"s", "lo", "hi"}, {"c"});
  m.node("Clip", "clip_max_only", {"c", "", "hi"}, {"c2"});
  m.init_int64("pads", {0, 1, 0, 0, 2, 0});
  m.node("Pad", "pad", {"c2", "pads"}, {"p"});  // [1,5,3]
  m.init_int64("starts", {1});
  m.init_int64("ends", {-1});
  m.init_int64("axes_sl", {1});
  m.node("Slice", "slice", {"p", "starts", "ends", "axes_sl"}, {"y"});  // [1,3,3]
  m.output("y");
  Graph g = import_onnx_bytes(m.bytes(), "<opset13>");
  SCOPED_TRACE(g.to_string());
  EXPECT_EQ(find_node(g, "Unsqueeze").ints("axes"), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(find_node(g, "Unsqueeze").inputs.size(), 1u);
  EXPECT_EQ(g.value(find_node(g, "Unsqueeze").outputs[0]).type_string(), "float32[1,2,3,1]");
  EXPECT_EQ(find_node(g, "Squeeze").ints("axes"), std::vector<int64_t>{3});
  const Node& clip = g.nodes()[2];
  EXPECT_EQ(clip.op, "Clip");
  EXPECT_EQ(clip.inputs.size(), 1u);
  EXPECT_FLOAT_EQ(clip.f("min"), -1.0f);
  EXPECT_FLOAT_EQ(clip.f("max"), 0.0f);
  const Node& clip2 = g.nodes()[3];
  EXPECT_TRUE(std::isinf(clip2.f("min")) && clip2.f("min") < 0);
  const Node& pad = find_node(g, "Pad");
  EXPECT_EQ(pad.ints("pads"), (std::vector<int64_t>{0, 1, 0, 0, 2, 0}));
  EXPECT_EQ(pad.s("mode"), "constant");
  EXPECT_EQ(pad.inputs.size(), 1u);
  const Node& slice = find_node(g, "Slice");
  EXPECT_EQ(slice.ints("starts"), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(slice.ints("ends"), (std::vector<int64_t>{1, 4, 3}));
  EXPECT_EQ(slice.ints("steps"), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[1,3,3]");
}

TEST_F(OnnxFrontendTest, ShapeSubgraphIsFolded) {
  // PyTorch's flatten: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])).
  ModelBuilder m(13);
  m.input("x", {4, 2, 3});
  m.node("Shape", "shape", {"x"}, {"sh"});
  m.init_int64("zero", {0}, /*scalar=*/true);
  auto* gather = m.node("Gather", "gather", {"sh", "zero"}, {"n"});
  ModelBuilder::attr(gather, "axis", int64_t{0});
  m.init_int64("ax", {0});
  m.node("Unsqueeze", "unsq", {"n", "ax"}, {"n1"});
  m.init_int64("minus1", {-1});
  auto* concat = m.node("Concat", "concat", {"n1", "minus1"}, {"shape2"});
  ModelBuilder::attr(concat, "axis", int64_t{0});
  m.node("Reshape", "reshape", {"x", "shape2"}, {"y"});
  m.node("Identity", "id", {"y"}, {"z"});
  m.output("z");
  Graph g = import_onnx_bytes(m.bytes(), "<flatten>");
  SCOPED_TRACE(g.to_string());
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node& reshape = g.nodes()[0];
  EXPECT_EQ(reshape.op, "Reshape");
  EXPECT_EQ(reshape.inputs.size(), 1u);
  EXPECT_EQ(reshape.ints("shape"), (std::vector<int64_t>{4, 6}));
  const Value& shape2 = g.value(g.find_value("shape2"));
  ASSERT_TRUE(shape2.is_constant());
  EXPECT_EQ(shape2.data->to_vector<int64_t>(), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(g.outputs()[0], reshape.outputs[0]);
}

TEST_F(OnnxFrontendTest, ExportedShapeArithmeticIsFolded) {
  // What torch.onnx.export writes around a symbolic batch (torchvision's vision transformer and
  // LR-ASPP head): shapes computed with Div, Mul, Cast, Slice, Equal and Where from Shape(x).
  // With the batch bound, all of it folds and only the three consumers remain.
  ModelBuilder m(13);
  m.input("x", {-1, 8, 4, 6}, onnx::TensorProto::FLOAT, "batch");
  m.node("Shape", "shape", {"x"}, {"sh"});
  for (int64_t i : {0, 2, 3}) m.init_int64("i" + std::to_string(i), {i}, /*scalar=*/true);
  m.init_int64("two", {2}, /*scalar=*/true);
  m.init_int64("ax0", {0});
  m.node("Gather", "g0", {"sh", "i0"}, {"b"});
  m.node("Gather", "g2", {"sh", "i2"}, {"h"});
  m.node("Gather", "g3", {"sh", "i3"}, {"w"});
  m.node("Div", "half_w", {"w", "two"}, {"w2"});  // 3
  auto* cast = m.node("Cast", "cast", {"w2"}, {"w2c"});
  ModelBuilder::attr(cast, "to", int64_t{onnx::TensorProto::INT64});
  m.node("Mul", "hw2", {"h", "w2c"}, {"hw2"});  // 12
  m.node("Mul", "hw", {"hw2", "two"}, {"hw"});  // 24
  m.node("Unsqueeze", "ub", {"b", "ax0"}, {"b1"});
  m.node("Unsqueeze", "uhw", {"hw", "ax0"}, {"hw1"});
  m.init_int64("eight", {8});
  auto* cat = m.node("Concat", "cat", {"b1", "eight", "hw1"}, {"patch_shape"});
  ModelBuilder::attr(cat, "axis", int64_t{0});
  m.node("Reshape", "patches", {"x", "patch_shape"}, {"p"});  // [batch, 8, 24]

  // The class token's expand: Where(Equal(s, -ones), ones, s) with s = [batch, -1, -1].
  m.init_values("token", {1, 1, 8}, std::vector<float>(8, 0.5f));
  m.init_int64("minus1", {-1, -1});
  auto* cat2 = m.node("Concat", "cat2", {"b1", "minus1"}, {"s"});
  ModelBuilder::attr(cat2, "axis", int64_t{0});
  m.node("Shape", "shape_s", {"s"}, {"s_rank"});
  auto* ones = m.node("ConstantOfShape", "ones", {"s_rank"}, {"one3"});
  onnx::TensorProto one;
  one.set_data_type(onnx::TensorProto::INT64);
  one.add_dims(1);
  one.add_int64_data(1);
  auto* value = ones->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = one;
  m.init_int64("neg", {-1}, /*scalar=*/true);
  m.node("Mul", "neg_ones", {"one3", "neg"}, {"neg3"});
  m.node("Equal", "eq", {"s", "neg3"}, {"is_neg"});
  m.node("Where", "where", {"is_neg", "one3", "s"}, {"expand_shape"});
  m.node("Expand", "expand", {"token", "expand_shape"}, {"t"});  // [batch, 1, 8]

  // Resize to twice the spatial size: sizes = Concat(Slice(sh, 0, 2), Slice(sh, 2, 4) * 2).
  m.init_int64("s0", {0});
  m.init_int64("s2", {2});
  m.init_int64("s4", {4});
  m.node("Slice", "lead", {"sh", "s0", "s2", "ax0"}, {"nc"});
  m.node("Slice", "spatial", {"sh", "s2", "s4"}, {"hw_in"});
  m.node("Mul", "double", {"hw_in", "two"}, {"hw_out"});
  auto* cat3 = m.node("Concat", "cat3", {"nc", "hw_out"}, {"sizes"});
  ModelBuilder::attr(cat3, "axis", int64_t{0});
  m.node("Resize", "resize", {"x", "", "", "sizes"}, {"r"});  // [batch, 8, 8, 12]
  m.output("p");
  m.output("t");
  m.output("r");

  OnnxImportOptions o;
  o.input_shapes = {{"x", {2, 8, 4, 6}}};
  Graph g = import_onnx_bytes(m.bytes(), "<exported shapes>", o);
  SCOPED_TRACE(g.to_string());
  std::vector<std::string> ops;
  for (const Node& n : g.nodes()) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Expand", "Resize"}));
  EXPECT_EQ(find_node(g, "Reshape").ints("shape"), (std::vector<int64_t>{2, 8, 24}));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[2,8,24]");
  EXPECT_EQ(g.value(g.find_value("expand_shape")).data->to_vector<int64_t>(),
            (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(g.value(g.outputs()[1]).type_string(), "float32[2,1,8]");
  EXPECT_EQ(g.value(g.outputs()[2]).type_string(), "float32[2,8,8,12]");
  EXPECT_EQ(find_node(g, "Resize").floats("scales"), (std::vector<float>{1, 1, 2, 2}));
}

TEST_F(OnnxFrontendTest, WindowPaddingArithmeticIsFolded) {
  // torchvision's Swin pads each feature map to whole windows: the pads are computed as
  // (window - size % window) % window with Mod, concatenated, then reshaped to [k, 2], reversed
  // with a Slice of step -1, transposed and flattened (F.pad's order into ONNX's). All of it
  // folds at import, so the Pad has constant pads and a static output.
  ModelBuilder m(13);
  m.input("x", {1, 5, 7, 3});
  m.init_int64("h", {5}, /*scalar=*/true);
  m.init_int64("w", {7}, /*scalar=*/true);
  m.init_int64("win", {4}, /*scalar=*/true);
  m.init_int64("neg", {-3}, /*scalar=*/true);
  m.node("Mod", "h_mod", {"h", "win"}, {"hm"});               // 1
  m.node("Sub", "h_rest", {"win", "hm"}, {"hr"});             // 3
  m.node("Mod", "h_pad", {"hr", "win"}, {"hp"});              // 3
  m.node("Mod", "w_mod", {"w", "win"}, {"wm"});               // 3
  m.node("Sub", "w_rest", {"win", "wm"}, {"wr"});             // 1
  m.node("Mod", "w_pad", {"wr", "win"}, {"wp"});              // 1
  m.node("Mod", "floor_mod", {"neg", "win"}, {"nm"});         // -3 mod 4 = 1 (the divisor's sign)
  auto* fm = m.node("Mod", "c_mod", {"neg", "win"}, {"cm"});  // fmod: -3
  ModelBuilder::attr(fm, "fmod", int64_t{1});
  m.init_int64("ax0", {0});
  m.init_int64("zero", {0});
  for (const char* v : {"hp", "wp", "nm", "cm"})
    m.node("Unsqueeze", std::string("u_") + v, {v, "ax0"}, {std::string(v) + "1"});
  // F.pad(x, (0, 0, 0, wp, 0, hp)) in torch's last-axis-first pairs, padded to rank 4.
  auto* cat =
      m.node("Concat", "pairs", {"zero", "zero", "zero", "wp1", "zero", "hp1", "zero", "zero"},
             {"torch_pads"});
  ModelBuilder::attr(cat, "axis", int64_t{0});
  m.init_int64("pairs_shape", {-1, 2});
  m.node("Reshape", "as_pairs", {"torch_pads", "pairs_shape"}, {"p2"});  // [4, 2]
  m.init_int64("minus1", {-1});
  m.init_int64("big_neg", {-9223372036854775807});
  m.node("Slice", "reverse", {"p2", "minus1", "big_neg", "ax0", "minus1"}, {"rev"});
  auto* tr = m.node("Transpose", "begins_ends", {"rev"}, {"t"});
  ModelBuilder::attr(tr, "perm", std::vector<int64_t>{1, 0});
  m.init_int64("flat", {-1});
  m.node("Reshape", "flatten", {"t", "flat"}, {"pads"});
  m.node("Pad", "pad", {"x", "pads"}, {"y"});
  auto* cat2 = m.node("Concat", "mods", {"nm1", "cm1"}, {"mods"});
  ModelBuilder::attr(cat2, "axis", int64_t{0});
  m.output("y");
  m.output("mods");
  Graph g = import_onnx_bytes(m.bytes(), "<window padding>");
  SCOPED_TRACE(g.to_string());
  std::vector<std::string> ops;
  for (const Node& n : g.nodes()) ops.push_back(n.op);
  // (A constant graph output is given through an Identity.)
  EXPECT_EQ(ops, (std::vector<std::string>{"Pad", "Identity"}));
  EXPECT_EQ(find_node(g, "Pad").ints("pads"), (std::vector<int64_t>{0, 0, 0, 0, 0, 3, 1, 0}));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[1,8,8,3]");
  EXPECT_EQ(g.value(g.find_value("mods")).data->to_vector<int64_t>(),
            (std::vector<int64_t>{1, -3}));
}

TEST_F(OnnxFrontendTest, PowByASmallWholeConstantIsProducts) {
  // A decomposed LayerNorm's variance squares with Pow(d, 2): imported as Mul(d, d); the tanh
  // GELU's Pow(x, 3) as (x * x) * x, Pow(x, 6) as ((x * x) * x)^2. A fractional exponent, one
  // above 16, or one that broadcasts the output to a larger shape stays a Pow.
  ModelBuilder m(13);
  m.input("x", {2, 8});
  m.init_values("two", {}, {2.0f});
  m.init_values("three", {}, {3.0f});
  m.init_values("six", {}, {6.0f});
  m.init_values("half", {}, {2.5f});
  m.init_values("big", {}, {17.0f});
  m.init_values("two_3d", {1, 1, 1}, {2.0f});
  m.node("Pow", "square", {"x", "two"}, {"sq"});
  m.node("Pow", "cube", {"sq", "three"}, {"cu"});
  m.node("Pow", "sixth", {"cu", "six"}, {"s6"});
  m.node("Pow", "fractional", {"s6", "half"}, {"fr"});
  m.node("Pow", "large", {"fr", "big"}, {"lg"});
  m.node("Pow", "lifted", {"lg", "two_3d"}, {"y"});
  m.output("y");
  Graph g = import_onnx_bytes(m.bytes(), "<pow>");
  SCOPED_TRACE(g.to_string());
  std::vector<std::string> ops;
  for (const Node& n : g.nodes()) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Mul", "Mul", "Mul", "Mul", "Mul", "Mul", "Pow", "Pow",
                                           "Pow"}));
  const Node& square = g.nodes()[0];
  EXPECT_EQ(square.name, "square");
  EXPECT_EQ(square.inputs, (std::vector<ValueId>{g.inputs()[0], g.inputs()[0]}));
  // The cube: sq * sq, then that times sq, into the node's own output.
  const ValueId sq = square.outputs[0];
  EXPECT_EQ(g.nodes()[1].inputs, (std::vector<ValueId>{sq, sq}));
  EXPECT_EQ(g.nodes()[2].name, "cube");
  EXPECT_EQ(g.nodes()[2].inputs, (std::vector<ValueId>{g.nodes()[1].outputs[0], sq}));
  EXPECT_EQ(g.nodes()[2].outputs[0], g.find_value("cu"));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[1,2,8]");
}

TEST_F(OnnxFrontendTest, InitializerDtypes) {
  ModelBuilder m(13);
  m.input("x", {2});
  auto add = [&](const std::string& name, int type) {
    auto* t = m.graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(2);
    return t;
  };
  auto* i32 = add("i32", onnx::TensorProto::INT32);
  i32->add_int32_data(-7), i32->add_int32_data(9);
  auto* i8 = add("i8", onnx::TensorProto::INT8);
  i8->add_int32_data(-128), i8->add_int32_data(127);
  auto* f16 = add("f16", onnx::TensorProto::FLOAT16);
  f16->add_int32_data(0x3c00), f16->add_int32_data(0xc000);  // 1.0, -2.0
  auto* f16raw = add("f16raw", onnx::TensorProto::FLOAT16);
  f16raw->set_raw_data(std::string("\x00\x3c\x00\x40", 4));  // 1.0, 2.0
  auto* i64raw = add("i64raw", onnx::TensorProto::INT64);
  const int64_t v[2] = {int64_t{1} << 40, -3};
  i64raw->set_raw_data(std::string(reinterpret_cast<const char*>(v), 16));
  // Keep them alive: each feeds a Cast whose result is summed into the output.
  std::string acc = "x";
  int k = 0;
  for (const char* name : {"i32", "i8", "f16", "f16raw", "i64raw"}) {
    auto* cast = m.node("Cast", std::string("cast_") + name, {name}, {std::string("c_") + name});
    ModelBuilder::attr(cast, "to", int64_t{onnx::TensorProto::FLOAT});
    const std::string next = "acc" + std::to_string(k++);
    m.node("Add", "add_" + std::string(name), {acc, std::string("c_") + name}, {next});
    acc = next;
  }
  m.output(acc);
  Graph g = import_onnx_bytes(m.bytes(), "<dtypes>");
  SCOPED_TRACE(g.to_string());
  auto data = [&](const std::string& name) -> const runtime::NDArray& {
    ValueId v = g.find_value(name);
    EXPECT_NE(v, kNoValue) << name;
    return *g.value(v).data;
  };
  EXPECT_EQ(data("i32").to_vector<int32_t>(), (std::vector<int32_t>{-7, 9}));
  EXPECT_EQ(data("i8").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_TRUE(runtime::dtype_equal(data("f16").dtype(), runtime::kFloat16));
  EXPECT_EQ(data("f16").to_vector<uint16_t>(), (std::vector<uint16_t>{0x3c00, 0xc000}));
  EXPECT_EQ(data("f16raw").to_vector<uint16_t>(), (std::vector<uint16_t>{0x3c00, 0x4000}));
  EXPECT_EQ(data("i64raw").to_vector<int64_t>(), (std::vector<int64_t>{int64_t{1} << 40, -3}));
  // Casts of constants are folded.
  EXPECT_EQ(g.nodes().size(), 5u);
  EXPECT_EQ(data("c_i32").to_vector<float>(), (std::vector<float>{-7.0f, 9.0f}));
  EXPECT_EQ(data("c_f16").to_vector<float>(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(data("c_f16raw").to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(data("c_i64raw").to_vector<float>(), (std::vector<float>{1099511627776.0f, -3.0f}));
}

TEST_F(OnnxFrontendTest, ConstantNodes) {
  ModelBuilder m(13);
  m.input("x", {2, 2});
  auto* c = m.node("Constant", "k", {}, {"kv"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_float_data(3.0f);
  a->mutable_t()->add_float_data(4.0f);
  m.node("Mul", "mul", {"x", "kv"}, {"y"});
  m.output("y");
  Graph g = import_onnx_bytes(m.bytes(), "<const>");
  ASSERT_EQ(g.nodes().size(), 1u);
  const Value& k = g.value(g.nodes()[0].inputs[1]);
  ASSERT_TRUE(k.is_constant());
  EXPECT_EQ(k.data->to_vector<float>(), (std::vector<float>{3.0f, 4.0f}));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[2,2]");
}

TEST_F(OnnxFrontendTest, OpsetRange) {
  for (int64_t opset : {11, 12, 13, 17, 18}) {
    ModelBuilder m(opset);
    m.input("x", {1, 4});
    m.node("Relu", "r", {"x"}, {"y"});
    auto* sm = m.node("Softmax", "s", {"y"}, {"z"});
    ModelBuilder::attr(sm, "axis", int64_t{1});
    m.output("z");
    Graph g = import_onnx_bytes(m.bytes(), "<opset>");
    EXPECT_EQ(g.nodes().size(), 2u) << "opset " << opset;
  }
  {
    ModelBuilder m(19);
    m.input("x", {1, 4});
    m.node("Relu", "r", {"x"}, {"y"});
    m.output("y");
    EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<new>"),
                          "opset 19; Kiln accepts opsets 11 to 18");
  }
  // An older opset reads as 11 when its operators did not change since (Relu: opset 6 to 12) ...
  {
    ModelBuilder m(9);
    m.input("x", {1, 4});
    m.node("Relu", "r", {"x"}, {"y"});
    m.output("y");
    EXPECT_EQ(import_onnx_bytes(m.bytes(), "<old>").nodes().size(), 1u);
  }
  // ... and is refused, naming the operator, when one did (Softmax changed at opset 11).
  {
    ModelBuilder m(9);
    m.input("x", {1, 4});
    m.node("Relu", "r", {"x"}, {"y"});
    m.node("Softmax", "s", {"y"}, {"z"});
    m.output("z");
    EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<old>"),
                          "opset 9, and operator 'Softmax' (node 's') changed before opset 11");
  }
}

TEST_F(OnnxFrontendTest, Opset18PadWithAxes) {
  // libonnx 1.12 predates opset 18; the front end rewrites Pad's axes input itself.
  ModelBuilder m(18);
  m.input("x", {2, 3});
  m.init_int64("pads", {1, 2});
  m.init_int64("axes", {-1});
  m.node("Relu", "relu", {"x"}, {"r"});
  m.node("Pad", "pad", {"r", "pads", "", "axes"}, {"y"});
  m.output("y");
  Graph g = import_onnx_bytes(m.bytes(), "<pad18>");
  SCOPED_TRACE(g.to_string());
  const Node& pad = find_node(g, "Pad");
  EXPECT_EQ(pad.inputs.size(), 1u);
  EXPECT_EQ(pad.ints("pads"), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_FLOAT_EQ(pad.f("value"), 0.0f);
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[2,6]");
}

TEST_F(OnnxFrontendTest, Opset11UnsqueezeAxesAttribute) {
  ModelBuilder m(11);
  m.input("x", {3});
  auto* u = m.node("Unsqueeze", "u", {"x"}, {"y"});
  ModelBuilder::attr(u, "axes", std::vector<int64_t>{-1});
  auto* c = m.node("Clip", "c", {"y"}, {"z"});
  (void)c;
  m.output("z");
  Graph g = import_onnx_bytes(m.bytes(), "<opset11>");
  EXPECT_EQ(find_node(g, "Unsqueeze").ints("axes"), std::vector<int64_t>{1});
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[3,1]");
}

TEST_F(OnnxFrontendTest, UnsupportedOperatorNamesOpAndNode) {
  ModelBuilder m(13);
  m.input("boxes", {1, 10, 4});
  m.input("scores", {1, 1, 10});
  m.node("NonMaxSuppression", "nms_1", {"boxes", "scores"}, {"sel"});
  m.output("sel");
  try {
    import_onnx_bytes(m.bytes(), "<nms>");
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unsupported operator 'NonMaxSuppression' at node 'nms_1'"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("Kiln supports: Abs, Acos, Acosh, Add"), std::string::npos) << msg;
  }
  // A non-constant input where a constant is needed.
  ModelBuilder m2(13);
  m2.input("x", {2, 3});
  m2.input("axes", {1}, onnx::TensorProto::INT64);
  m2.node("Unsqueeze", "unsq_dyn", {"x", "axes"}, {"y"});
  m2.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m2.bytes(), "<dyn-axes>"), "unsq_dyn");
  // Attributes libonnx would divide by are checked before its shape inference runs.
  ModelBuilder m3(13);
  m3.input("x", {1, 1, 4, 4});
  auto* pool = m3.node("MaxPool", "pool0", {"x"}, {"y"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(pool, "strides", std::vector<int64_t>{0, 1});
  m3.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m3.bytes(), "<stride0>"),
                        "node 'pool0' (MaxPool): attribute 'strides' is [0,1]; each value must "
                        "be positive, got 0");
  // Gemm whose inner dimensions differ.
  ModelBuilder m4(13);
  m4.input("a", {2, 24});
  m4.init_float("b", {5, 30});
  auto* gemm = m4.node("Gemm", "fc", {"a", "b"}, {"y"});
  ModelBuilder::attr(gemm, "transB", int64_t{1});
  m4.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m4.bytes(), "<gemm>"), "node 'fc' (Gemm): inner dim");
}

TEST(OnnxFrontendOps, SupportedListIsSorted) {
  const auto& ops = supported_onnx_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  // With Einsum, GRU, QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, GatherND,
  // ScatterElements, ScatterND, GridSample, ConvInteger, MatMulInteger and DynamicQuantizeLinear.
  EXPECT_EQ(ops.size(), 123u);
}

TEST_F(OnnxFrontendTest, BadFiles) {
  const std::string good = small_cnn().bytes();
  const std::string truncated = write("truncated.onnx", good.substr(0, good.size() / 2));
  EXPECT_ERROR_CONTAINS(import_onnx(truncated), "truncated.onnx");
  EXPECT_ERROR_CONTAINS(import_onnx(truncated), "not a valid ModelProto");

  std::string garbage(4096, '\0');
  std::mt19937 rng(42);
  for (char& ch : garbage) ch = static_cast<char>(rng());
  const std::string garbage_path = write("garbage.onnx", garbage);
  EXPECT_ERROR_CONTAINS(import_onnx(garbage_path), "garbage.onnx");

  EXPECT_ERROR_CONTAINS(import_onnx((dir_.path() / "missing.onnx").string()), "missing.onnx");
  EXPECT_ERROR_CONTAINS(import_onnx((dir_.path() / "missing.onnx").string()), "No such file");
  EXPECT_ERROR_CONTAINS(import_onnx(write("empty.onnx", "")), "empty");

  // A well-formed protobuf whose initializer holds fewer bytes than its shape needs.
  ModelBuilder m(13);
  m.input("x", {1});
  auto* t = m.graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1000000000000);
  t->set_raw_data("abcd");
  m.node("Add", "add", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<short>"), "initializer 'w' holds 4 bytes");

  // Many truncations of a valid model: each is an error, never a crash.
  for (size_t n = 1; n < good.size(); n += 97) {
    try {
      import_onnx_bytes(good.substr(0, n), "<prefix>");
    } catch (const Error&) {
    }
  }
}

TEST_F(OnnxFrontendTest, DynamicInputDimension) {
  ModelBuilder m(13);
  m.input("x", {-1, 3}, onnx::TensorProto::FLOAT, "batch");
  m.node("Relu", "r", {"x"}, {"y"});
  m.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<dyn>"),
                        "'<dyn>': input 'x' has a symbolic dimension 0 ('batch'); give its size "
                        "with --input-shape x=1,3");
  // A dimension without a name or a value: the same advice.
  ModelBuilder open(13);
  open.input("x", {2, -1, 4});
  open.node("Relu", "r", {"x"}, {"y"});
  open.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(open.bytes(), "<dyn>"),
                        "input 'x' has a dynamic dimension 1; give its size with --input-shape "
                        "x=2,1,4");
}

/// x [batch, 3] and z [batch, 3] (the same symbol), an initializer c [3], y = x + z + c.
ModelBuilder symbolic_model() {
  ModelBuilder m(13);
  m.input("x", {-1, 3}, onnx::TensorProto::FLOAT, "batch");
  m.input("z", {-1, 3}, onnx::TensorProto::FLOAT, "batch");
  m.init_values("c", {3}, {1, 2, 3});
  m.node("Add", "add", {"x", "z"}, {"s"});
  m.node("Add", "add_c", {"s", "c"}, {"y"});
  m.output("y");
  // Declared with the symbol, as exporters write it: bound with the inputs.
  auto* t = m.graph()->mutable_output(0)->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(3);
  return m;
}

TEST_F(OnnxFrontendTest, InputShapesBindSymbolicDimensions) {
  const ModelBuilder m = symbolic_model();
  // Unbound: the first input says how.
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<sym>"),
                        "input 'x' has a symbolic dimension 0 ('batch'); give its size with "
                        "--input-shape x=1,3");
  for (int64_t batch : {1, 5}) {
    OnnxImportOptions o;
    o.input_shapes = {{"x", {batch, 3}}, {"z", {batch, 3}}};
    const Graph g = import_onnx_bytes(m.bytes(), "<sym>", o);
    ASSERT_EQ(g.inputs().size(), 2u);
    for (ValueId v : g.inputs()) EXPECT_EQ(g.value(v).shape, (std::vector<int64_t>{batch, 3}));
    ASSERT_EQ(g.outputs().size(), 1u);
    EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{batch, 3}));
  }
  // One bound, the other not: the other is named.
  OnnxImportOptions half;
  half.input_shapes = {{"x", {2, 3}}};
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<sym>", half),
                        "input 'z' has a symbolic dimension 0 ('batch'); give its size with "
                        "--input-shape z=1,3");
}

TEST_F(OnnxFrontendTest, InputShapeMistakes) {
  const ModelBuilder m = symbolic_model();
  auto import_with = [&](std::map<std::string, std::vector<int64_t>> shapes) {
    OnnxImportOptions o;
    o.input_shapes = std::move(shapes);
    return import_onnx_bytes(m.bytes(), "<sym>", o);
  };
  // A fixed dimension that disagrees: the input, the index and both values.
  EXPECT_ERROR_CONTAINS(import_with({{"x", {2, 4}}, {"z", {2, 3}}}),
                        "'<sym>': input 'x': dimension 1 is 3 in the model, but --input-shape "
                        "gives 4 (declared [batch,3], given [2,4])");
  // Another rank.
  EXPECT_ERROR_CONTAINS(import_with({{"x", {2, 3, 1}}, {"z", {2, 3}}}),
                        "input 'x' has rank 2 (declared [batch,3]), but --input-shape gives 3 "
                        "dimensions, [2,3,1]");
  // No such input: the inputs are listed (not the initializer).
  EXPECT_ERROR_CONTAINS(import_with({{"w", {2, 3}}}),
                        "--input-shape names 'w', which is not an input of the model; its "
                        "inputs are 'x', 'z'");
  EXPECT_ERROR_CONTAINS(import_with({{"c", {3}}}),
                        "--input-shape names 'c', which is not an input of the model; its inputs "
                        "are 'x', 'z'");
  // An input with an initializer (a default value) has a fixed shape.
  ModelBuilder with_default = symbolic_model();
  with_default.input("c", {3});
  OnnxImportOptions o;
  o.input_shapes = {{"c", {3}}};
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(with_default.bytes(), "<sym>", o),
                        "--input-shape names 'c', which is not an input of the model (it has an "
                        "initializer, a fixed value); its inputs are 'x', 'z'");
  // One symbol, two sizes: both inputs are named.
  EXPECT_ERROR_CONTAINS(import_with({{"x", {2, 3}}, {"z", {4, 3}}}),
                        "the symbolic dimension 'batch' is bound to 2 by input 'x' dimension 0 "
                        "and to 4 by input 'z' dimension 0; a symbol has one size");
  // Sizes must be positive.
  EXPECT_ERROR_CONTAINS(import_with({{"x", {0, 3}}, {"z", {0, 3}}}),
                        "input 'x': --input-shape gives dimension 0 the size 0");
}

TEST_F(OnnxFrontendTest, ParseInputShape) {
  EXPECT_EQ(parse_input_shape("x=1,3,224,224"),
            (std::pair<std::string, std::vector<int64_t>>{"x", {1, 3, 224, 224}}));
  EXPECT_EQ(parse_input_shape("a=b=7"), (std::pair<std::string, std::vector<int64_t>>{"a=b", {7}}));
  EXPECT_EQ(parse_input_shape("s="), (std::pair<std::string, std::vector<int64_t>>{"s", {}}));
  EXPECT_ERROR_CONTAINS(parse_input_shape("1,3,224"), "--input-shape needs NAME=D0,D1,...");
  EXPECT_ERROR_CONTAINS(parse_input_shape("=1,3"), "--input-shape needs NAME=D0,D1,...");
  EXPECT_ERROR_CONTAINS(parse_input_shape("x=1,0"), "'0' is not a positive whole number");
  EXPECT_ERROR_CONTAINS(parse_input_shape("x=1,-3"), "'-3' is not a positive whole number");
  EXPECT_ERROR_CONTAINS(parse_input_shape("x=1,,3"), "'' is not a positive whole number");
  EXPECT_ERROR_CONTAINS(parse_input_shape("x=1,3,"), "ends with a comma");
  EXPECT_ERROR_CONTAINS(parse_input_shape("x=99999999999999999999"),
                        "is not a positive whole number");
}

TEST_F(OnnxFrontendTest, UndefinedInput) {
  ModelBuilder m(13);
  m.input("x", {3});
  m.node("Add", "add", {"x", "nowhere"}, {"y"});
  m.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<undef>"),
                        "node 'add' (Add): input 'nowhere' is not defined");
}

TEST_F(OnnxFrontendTest, ConvTransposeLstmAndPools) {
  ModelBuilder m(13);
  m.input("x", {1, 4, 5, 5});
  m.init_float("wt", {4, 2, 3, 3});
  auto* ct = m.node("ConvTranspose", "up", {"x", "wt"}, {"u"});
  ModelBuilder::attr(ct, "strides", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(ct, "pads", std::vector<int64_t>{1, 1, 1, 1});
  ModelBuilder::attr(ct, "output_padding", std::vector<int64_t>{1, 1});  // 2*4+3-2+1 = 10
  auto* ap = m.node("AveragePool", "avg", {"u"}, {"a"});
  ModelBuilder::attr(ap, "kernel_shape", std::vector<int64_t>{3, 3});
  ModelBuilder::attr(ap, "auto_pad", std::string("SAME_LOWER"));
  m.node("GlobalAveragePool", "gap", {"a"}, {"g"});
  m.output("g");
  // An LSTM on a separate input.
  m.input("seq", {5, 1, 8});
  m.init_float("W", {1, 16, 8});
  m.init_float("R", {1, 16, 4});
  auto* l = m.node("LSTM", "lstm", {"seq", "W", "R"}, {"Y", "Y_h"});
  ModelBuilder::attr(l, "hidden_size", int64_t{4});
  m.output("Y");
  m.output("Y_h");
  Graph g = import_onnx_bytes(m.bytes(), "<mixed>");
  SCOPED_TRACE(g.to_string());
  const Node& up = find_node(g, "ConvTranspose");
  EXPECT_EQ(up.ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(up.ints("output_padding"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(g.value(up.outputs[0]).type_string(), "float32[1,2,10,10]");
  const Node& avg = find_node(g, "AveragePool");
  EXPECT_EQ(avg.ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(avg.i("count_include_pad"), 0);
  EXPECT_EQ(g.value(find_node(g, "GlobalAveragePool").outputs[0]).type_string(),
            "float32[1,2,1,1]");
  const Node& lstm = find_node(g, "LSTM");
  EXPECT_EQ(lstm.s("direction"), "forward");
  EXPECT_EQ(lstm.i("hidden_size"), 4);
  ASSERT_EQ(lstm.outputs.size(), 2u);
  EXPECT_EQ(g.value(lstm.outputs[0]).type_string(), "float32[5,1,1,4]");
  EXPECT_EQ(g.value(lstm.outputs[1]).type_string(), "float32[1,1,4]");
}

TEST_F(OnnxFrontendTest, ConstantInputsOption) {
  // Parameters fed as graph inputs, as ONNX's node tests do, bound to values at import.
  ModelBuilder m(13);
  m.input("x", {3, 4});
  m.input("lo", {}, onnx::TensorProto::FLOAT);
  m.input("pads", {4}, onnx::TensorProto::INT64);
  m.node("Clip", "clip", {"x", "lo"}, {"c"});
  m.node("Pad", "pad", {"c", "pads"}, {"y"});
  m.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<unbound>"), "must be a constant");
  OnnxImportOptions options;
  options.constant_inputs.emplace("lo", runtime::NDArray::from_vector<float>({-0.5f}, {}));
  options.constant_inputs.emplace("pads",
                                  runtime::NDArray::from_vector<int64_t>({0, 1, 2, 3}, {4}));
  Graph g = import_onnx_bytes(m.bytes(), "<bound>", options);
  SCOPED_TRACE(g.to_string());
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_FLOAT_EQ(find_node(g, "Clip").f("min"), -0.5f);
  EXPECT_EQ(find_node(g, "Pad").ints("pads"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.value(g.outputs()[0]).type_string(), "float32[5,8]");

  OnnxImportOptions wrong;
  wrong.constant_inputs.emplace("pads", runtime::NDArray::from_vector<int32_t>({0, 1, 2, 3}, {4}));
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<wrong>", wrong),
                        "the value bound to graph input 'pads' is int32");
  OnnxImportOptions missing;
  missing.constant_inputs.emplace("nope", runtime::NDArray::from_vector<float>({1.0f}, {1}));
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<missing>", missing), "'nope'");
}

TEST_F(OnnxFrontendTest, DropoutMaskAndConvTransposeOutputShape) {
  ModelBuilder m(13);
  m.input("x", {1, 1, 3, 3});
  m.init_float("w", {1, 2, 3, 3});
  m.node("Dropout", "drop", {"x"}, {"d", "mask"});
  auto* ct = m.node("ConvTranspose", "up", {"d", "w"}, {"y"});
  ModelBuilder::attr(ct, "strides", std::vector<int64_t>{3, 2});
  ModelBuilder::attr(ct, "output_shape", std::vector<int64_t>{10, 8});
  m.output("y");
  m.output("mask");
  Graph g = import_onnx_bytes(m.bytes(), "<ct>");
  SCOPED_TRACE(g.to_string());
  // The ConvTranspose, and an Identity that returns the constant mask under its own name.
  ASSERT_EQ(g.nodes().size(), 2u);
  const Node& up = g.nodes()[0];
  EXPECT_EQ(g.value(up.outputs[0]).type_string(), "float32[1,2,10,8]");
  // 3*(3-1)+3 = 9 rows and 2*(3-1)+3 = 7 columns; one more of each from output_padding.
  EXPECT_EQ(up.ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(up.ints("output_padding"), (std::vector<int64_t>{1, 1}));
  const Node& ret = g.nodes()[1];
  EXPECT_EQ(ret.op, "Identity");
  EXPECT_EQ(ret.outputs[0], g.outputs()[1]);
  EXPECT_EQ(g.value(g.outputs()[1]).name, "mask");
  const Value& mask = g.value(ret.inputs[0]);
  ASSERT_TRUE(mask.is_constant());
  EXPECT_EQ(mask.type_string(), "bool[1,1,3,3]");
  EXPECT_EQ(mask.data->to_vector<uint8_t>(), std::vector<uint8_t>(9, 1));

  // Training mode drops and rescales, except with a ratio of 0 (torchvision's Swin exports its
  // attention dropout so): then it is its input.
  for (float ratio : {0.5f, 0.0f}) {
    ModelBuilder t(13);
    t.input("x", {2});
    t.init_scalar("ratio", ratio);
    auto* train = t.graph()->add_initializer();
    train->set_name("train");
    train->set_data_type(onnx::TensorProto::BOOL);
    train->add_int32_data(1);
    t.node("Dropout", "drop_train", {"x", "ratio", "train"}, {"y"});
    t.node("Relu", "relu", {"y"}, {"z"});
    t.output("z");
    if (ratio != 0.0f) {
      EXPECT_ERROR_CONTAINS(import_onnx_bytes(t.bytes(), "<train>"),
                            "node 'drop_train' (Dropout): training-mode Dropout is not supported");
      continue;
    }
    Graph tg = import_onnx_bytes(t.bytes(), "<train, ratio 0>");
    ASSERT_EQ(tg.nodes().size(), 1u);
    EXPECT_EQ(tg.nodes()[0].inputs, std::vector<ValueId>{tg.inputs()[0]});
  }
}

TEST_F(OnnxFrontendTest, OmittedLeadingOutput) {
  // As in ONNX's test_lstm_defaults: Y omitted, only Y_h.
  ModelBuilder m(14);
  m.input("seq", {3, 2, 5});
  m.init_float("W", {1, 12, 5});
  m.init_float("R", {1, 12, 3});
  auto* l = m.node("LSTM", "lstm", {"seq", "W", "R"}, {"", "Y_h"});
  ModelBuilder::attr(l, "hidden_size", int64_t{3});
  m.output("Y_h");
  Graph g = import_onnx_bytes(m.bytes(), "<lstm>");
  const Node& lstm = find_node(g, "LSTM");
  ASSERT_EQ(lstm.outputs.size(), 2u);
  EXPECT_EQ(lstm.outputs[0], kNoValue);
  EXPECT_EQ(g.value(lstm.outputs[1]).type_string(), "float32[1,2,3]");
  EXPECT_NE(g.to_string().find("_, %"), std::string::npos) << g.to_string();
  EXPECT_NO_THROW(g.verify());
  g.sort_topologically();
  EXPECT_EQ(g.remove_dead_nodes(), 0u);
}

TEST_F(OnnxFrontendTest, InitializerThatIsAnInputIsAnInputWithADefault) {
  // IR version 4 and later: a graph input with an initializer is an input the caller may give.
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.input("b", {-1}, onnx::TensorProto::FLOAT, "n");  // the declaration leaves the size open
  m.init_float("b", {3});
  m.init_float("w", {3});  // an initializer only: a constant
  m.node("Mul", "mul", {"x", "w"}, {"t"});
  m.node("Add", "add", {"t", "b"}, {"y"});
  m.output("y");
  Graph g = import_onnx_bytes(m.bytes(), "<default>");
  SCOPED_TRACE(g.to_string());
  ASSERT_EQ(g.inputs().size(), 2u);
  const ValueId b = g.inputs()[1];
  EXPECT_EQ(g.value(b).name, "b");
  EXPECT_EQ(g.value(b).type_string(), "float32[3]");
  EXPECT_FALSE(g.value(b).is_constant());
  ASSERT_NE(g.input_default(b), nullptr);
  EXPECT_EQ(g.input_default(b)->to_vector<float>(), (std::vector<float>{0.0f, 0.01f, 0.02f}));
  EXPECT_TRUE(g.value(g.find_value("w")).is_constant());
  EXPECT_EQ(g.input_default(g.inputs()[0]), nullptr);

  // Before IR version 4 every initializer had to be listed as an input: those are constants.
  m.ir_version(3);
  Graph old = import_onnx_bytes(m.bytes(), "<ir3>");
  ASSERT_EQ(old.inputs().size(), 1u);
  EXPECT_TRUE(old.value(old.find_value("b")).is_constant());
}

TEST_F(OnnxFrontendTest, InputDefaultsAgainstTheirDeclaration) {
  auto model = [](std::vector<int64_t> declared, int elem) {
    ModelBuilder m(13);
    m.input("x", {3});
    m.input("b", std::move(declared), elem);
    m.init_float("b", {3});
    m.node("Add", "add", {"x", "b"}, {"y"});
    m.output("y");
    return m;
  };
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(model({4}, onnx::TensorProto::FLOAT).bytes(), "<d>"),
                        "graph input 'b' is declared with shape [4], but its initializer (the "
                        "default value) has shape [3]");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(model({3}, onnx::TensorProto::DOUBLE).bytes(), "<d>"),
                        "graph input 'b' is declared DOUBLE, but its initializer (the default "
                        "value) is FLOAT");
  // A parameter Kiln needs at compile time cannot come from an input the caller may replace.
  ModelBuilder c(13);
  c.input("x", {3});
  c.input("lo", {});
  c.init_float("lo", {});
  c.node("Clip", "clip", {"x", "lo"}, {"y"});
  c.output("y");
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(c.bytes(), "<clip>"),
                        "node 'clip' (Clip): input 'min' is graph input 'lo', whose initializer is "
                        "only a default");
}

TEST_F(OnnxFrontendTest, DeclaredTypesThatDisagreeWithInference) {
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.node("Relu", "relu", {"x"}, {"y"});
  m.output("y");
  auto* shape = m.graph()->mutable_output(0)->mutable_type()->mutable_tensor_type();
  shape->set_elem_type(onnx::TensorProto::FLOAT);
  shape->mutable_shape()->add_dim()->set_dim_value(2);
  shape->mutable_shape()->add_dim()->set_dim_value(4);
  EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<declared>"),
                        "node 'relu' (Relu): ONNX shape inference failed");
}

}  // namespace
}  // namespace kiln::graph
