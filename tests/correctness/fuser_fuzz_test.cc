// A fuzz-style test of operator fusion (issue 15): random small graphs of convolutions (plain,
// strided, depthwise, grouped), dense layers, pooling, batch norms and every elementwise and
// broadcasting operator the fuser groups (unary activations; binary ops against a scalar, a
// per-channel [C,1,1] or [1,C,1,1] operand, a full-shape constant, or an earlier tensor of the same
// shape as residual blocks do; squeeze-and-excitation's channel scale, a [1,C,1,1] tensor computed
// from a global pool broadcast back over [1,C,H,W]), each built with fusion and without, with and
// without the blocked layout, the builds matching each other (1e-5) and ONNX Runtime (1e-4)
// (tests/common/graph_build_check.h). Every seed is one graph; KILN_FUSER_FUZZ_SEEDS=N runs more.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

/// Builds one random graph from `seed`: an input [1, C, H, W] and a chain of operators, keeping
/// the tensors made so far (by shape) for residual adds and channel scales.
class RandomGraph {
 public:
  explicit RandomGraph(uint32_t seed) : rng_(seed) {
    c_ = pick({3, 4, 8});
    h_ = w_ = pick({6, 8, 9});
    m_.input("x", {1, c_, h_, w_});
    cur_ = "x";
    same_shape_ = {cur_};
    const int steps = static_cast<int>(uniform(3, 8));
    for (int i = 0; i < steps; ++i) step();
    if (uniform(0, 2) == 0) dense_head();
    m_.output(cur_);
  }
  const ModelBuilder& model() const { return m_; }
  const std::string& description() const { return description_; }

 private:
  int64_t uniform(int64_t lo, int64_t hi_exclusive) {
    return std::uniform_int_distribution<int64_t>(lo, hi_exclusive - 1)(rng_);
  }
  int64_t pick(std::vector<int64_t> v) {
    return v[static_cast<size_t>(uniform(0, int64_t(v.size())))];
  }
  std::string fresh() { return "t" + std::to_string(++count_); }
  std::string constant(std::vector<int64_t> shape, float lo = -0.5f, float hi = 0.5f) {
    std::string name = "k" + std::to_string(++count_);
    m_.init(name, std::move(shape), lo, hi);
    return name;
  }
  void note(const std::string& op) { description_ += (description_.empty() ? "" : " ") + op; }
  /// `cur_` now holds a new tensor of shape [1, c_, h_, w_]; a change of shape forgets the others.
  void produced(const std::string& out, bool shape_changed) {
    cur_ = out;
    if (shape_changed) same_shape_.clear();
    same_shape_.push_back(out);
  }

  void step() {
    switch (uniform(0, 10)) {
      case 0:
      case 1:
        conv();
        break;
      case 2:
      case 3:
        unary();
        break;
      case 4:
      case 5:
        binary();
        break;
      case 6:
        pool();
        break;
      case 7:
        batch_norm();
        break;
      case 8:
        squeeze_excitation();
        break;
      default:
        residual();
        break;
    }
  }

  void conv() {
    const int64_t kind = uniform(0, 8);
    const bool depthwise = kind < 2;
    const int64_t k = pick({1, 3}), stride = h_ >= 6 ? pick({1, 1, 2}) : 1, pad = k / 2;
    // 72 channels: blocks of 16 with a padded last one (the build pads to 16).
    int64_t out_c = depthwise ? c_ : pick({4, 8, 16, 16, 72});
    // Grouped (not depthwise): 2, 4 or 8 groups where they divide the channels, the output's
    // channels as many as the input's or twice (blocked with a group per block, several groups
    // a block, or left in NCHW, as alter_layout chooses).
    int64_t groups = depthwise ? c_ : 1;
    if (kind >= 6) {
      out_c = c_ * pick({1, 2});
      for (int64_t g : {pick({2, 4, 8}), int64_t{2}}) {
        if (c_ % g == 0 && g < c_) {
          groups = g;
          break;
        }
      }
    }
    std::string w = constant({out_c, c_ / groups, k, k});
    std::string b = constant({out_c});
    std::string out = fresh();
    auto* n = m_.node("Conv", {cur_, w, b}, {out});
    ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{k, k});
    ModelBuilder::attr(n, "pads", std::vector<int64_t>{pad, pad, pad, pad});
    ModelBuilder::attr(n, "strides", std::vector<int64_t>{stride, stride});
    if (groups != 1) ModelBuilder::attr(n, "group", groups);
    const std::string name = depthwise     ? "DepthwiseConv"
                             : groups != 1 ? "GroupConv" + std::to_string(groups) + "x"
                                           : "Conv";
    note(name + std::to_string(k) + "s" + std::to_string(stride));
    h_ = (h_ + 2 * pad - k) / stride + 1;
    w_ = (w_ + 2 * pad - k) / stride + 1;
    c_ = out_c;
    produced(out, true);
  }

  void unary() {
    static const std::vector<std::string> ops = {"Relu",        "Sigmoid",   "Tanh", "LeakyRelu",
                                                 "HardSigmoid", "HardSwish", "Clip", "Elu",
                                                 "Softplus",    "Abs",       "Neg",  "Exp"};
    const std::string& op = ops[static_cast<size_t>(uniform(0, int64_t(ops.size())))];
    std::string out = fresh();
    if (op == "Clip") {
      m_.init_scalar(out + "_lo", 0.0f);
      m_.init_scalar(out + "_hi", 0.6f);
      m_.node(op, {cur_, out + "_lo", out + "_hi"}, {out});
    } else if (op == "Exp") {
      // exp of a bounded value: tanh first, so that a chain of them stays finite.
      std::string t = fresh();
      m_.node("Tanh", {cur_}, {t});
      m_.node(op, {t}, {out});
    } else {
      m_.node(op, {cur_}, {out});
    }
    note(op);
    produced(out, false);
  }

  void binary() {
    static const std::vector<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    const std::string& op = ops[static_cast<size_t>(uniform(0, int64_t(ops.size())))];
    std::vector<std::vector<int64_t>> shapes = {
        {1}, {c_, 1, 1}, {1, c_, 1, 1}, {1, c_, h_, w_}, {w_}};
    std::vector<int64_t> shape = shapes[static_cast<size_t>(uniform(0, int64_t(shapes.size())))];
    // A divisor away from zero.
    std::string k = op == "Div" ? constant(shape, 0.5f, 1.5f) : constant(shape);
    std::string out = fresh();
    // The constant first as often (a broadcast from the left), but never as a dividend: x near
    // zero would make k / x ill-conditioned, and the builds' rounding would differ by more than
    // any tolerance.
    if (op == "Div" || uniform(0, 2) == 0) {
      m_.node(op, {cur_, k}, {out});
    } else {
      m_.node(op, {k, cur_}, {out});
    }
    note(op + "[" + std::to_string(shape.size()) + "d]");
    produced(out, false);
  }

  void pool() {
    const int64_t kind = uniform(0, 3);
    std::string out = fresh();
    if (kind == 2 || h_ < 4) {
      m_.node("GlobalAveragePool", {cur_}, {out});
      note("GlobalAveragePool");
      h_ = w_ = 1;
    } else {
      auto* n = m_.node(kind == 0 ? "MaxPool" : "AveragePool", {cur_}, {out});
      ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
      ModelBuilder::attr(n, "strides", std::vector<int64_t>{2, 2});
      note(kind == 0 ? "MaxPool" : "AveragePool");
      h_ /= 2;
      w_ /= 2;
    }
    produced(out, true);
  }

  void batch_norm() {
    std::string out = fresh();
    m_.node("BatchNormalization",
            {cur_, constant({c_}, 0.5f, 1.5f), constant({c_}), constant({c_}),
             constant({c_}, 0.5f, 1.5f)},
            {out});
    note("BatchNorm");
    produced(out, false);
  }

  /// global pool -> 1x1 conv -> relu -> 1x1 conv -> sigmoid -> Mul with the block's input.
  void squeeze_excitation() {
    if (h_ == 1) return unary();
    const int64_t mid = std::max<int64_t>(2, c_ / 2);
    std::string pooled = fresh(), a = fresh(), r = fresh(), b = fresh(), s = fresh(), out = fresh();
    m_.node("GlobalAveragePool", {cur_}, {pooled});
    m_.node("Conv", {pooled, constant({mid, c_, 1, 1}), constant({mid})}, {a});
    m_.node("Relu", {a}, {r});
    m_.node("Conv", {r, constant({c_, mid, 1, 1}), constant({c_})}, {b});
    m_.node("Sigmoid", {b}, {s});
    m_.node("Mul", {cur_, s}, {out});
    note("SqueezeExcitation");
    produced(out, false);
  }

  /// Adds an earlier tensor of the same shape (a residual block's skip connection).
  void residual() {
    if (same_shape_.size() < 2) return unary();
    const std::string& skip =
        same_shape_[static_cast<size_t>(uniform(0, int64_t(same_shape_.size()) - 1))];
    std::string out = fresh();
    m_.node("Add", {cur_, skip}, {out});
    note("Residual");
    produced(out, false);
  }

  void dense_head() {
    std::string flat = fresh(), out = fresh();
    m_.node("Flatten", {cur_}, {flat});
    const int64_t features = c_ * h_ * w_, units = pick({5, 10});
    m_.node("Gemm", {flat, constant({units, features}), constant({units})}, {out});
    ModelBuilder::attr(m_.graph()->mutable_node(m_.graph()->node_size() - 1), "transB", int64_t{1});
    note("Flatten Gemm");
    cur_ = out;
  }

  std::mt19937 rng_;
  ModelBuilder m_{14};  // HardSwish is opset 14
  int64_t c_ = 0, h_ = 0, w_ = 0;
  int count_ = 0;
  std::string cur_;
  std::vector<std::string> same_shape_;
  std::string description_;
};

class FuserFuzzTest : public GraphBuildTest {};

TEST_F(FuserFuzzTest, RandomGraphsFusedAndUnfusedMatchOnnxRuntime) {
  const char* env = std::getenv("KILN_FUSER_FUZZ_SEEDS");
  const int seeds = env ? std::atoi(env) : 12;
  for (int seed = 1; seed <= seeds; ++seed) {
    RandomGraph g(static_cast<uint32_t>(seed));
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + g.description());
    check(g.model(), "fuzz" + std::to_string(seed), /*layouts=*/true);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

}  // namespace
}  // namespace kiln::graph
