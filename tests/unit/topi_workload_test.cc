// Workloads: every tunable compute attaches one; its canonical text round-trips; the program
// rebuilt from it is the program it was taken from (naive and scheduled by its template); and bad
// workloads (malformed text, wrong types, missing or unknown fields, bad dims, inconsistent
// shapes, sizes that overflow) are kiln::Errors naming the field, never another exception.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_bf16.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/pooling.h"
#include "compiler/topi/tunable.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/topi/workload.h"
#include "compiler/vdla/conv2d_template.h"
#include "tests/common/expect_error.h"

namespace kiln::topi {
namespace {

/// A float32 placeholder with a name of its own (a function's arguments need distinct names).
te::Tensor ph(std::vector<ir::Expr> shape) {
  static int count = 0;
  return te::placeholder(std::move(shape), ir::kFloat32, "t" + std::to_string(count++));
}

/// One tunable operator made directly by its topi compute, and the template that schedules it.
struct Case {
  std::string name;
  std::string tmpl;
  std::function<te::Tensor()> make;
};

/// Every case; the VDLA's template (vdla_conv2d) is compiler/vdla's, registered with topi's
/// registry here as the tuning task does.
std::vector<Case> cases() {
  vdla_compiler::register_templates();
  return {
      {"conv2d_nchw", "conv2d_nchw_x86",
       [] {
         return conv2d_nchw(ph({1, 3, 9, 9}), ph({8, 3, 3, 3}), {1, 1}, {1, 1, 1, 1});
       }},
      {"conv2d_nchw strided dilated asymmetric", "conv2d_nchw_x86",
       [] {
         return conv2d_nchw(ph({2, 4, 12, 11}), ph({6, 4, 3, 2}), {2, 1}, {0, 1, 2, 0}, {2, 1});
       }},
      {"conv2d_nchw grouped", "conv2d_nchw_x86",
       [] {
         return conv2d_nchw(ph({1, 4, 8, 8}), ph({6, 2, 3, 3}), {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
       }},
      {"conv2d_nchw depthwise", "depthwise_conv2d_nchw_x86",
       [] {
         return conv2d_nchw(ph({1, 8, 8, 8}), ph({8, 1, 3, 3}), {2, 2}, {1, 1, 1, 1}, {1, 1}, 8);
       }},
      {"conv2d_nchwc", "conv2d_nchwc_x86",
       [] {
         return conv2d_nchwc(ph({1, 2, 10, 10, 8}), ph({3, 2, 3, 3, 8, 4}), {1, 1}, {1, 1, 1, 1});
       }},
      {"conv2d_nchwc strided unpadded", "conv2d_nchwc_x86",
       [] {
         return conv2d_nchwc(ph({1, 1, 9, 9, 4}), ph({2, 1, 1, 1, 4, 8}), {2, 2}, {0, 0, 0, 0});
       }},
      {"conv2d_nchwc_winograd F(4x4) partial tiles", "conv2d_nchwc_winograd_x86",
       [] {
         return conv2d_nchwc_winograd(ph({1, 2, 10, 9, 8}), ph({6, 6, 3, 16, 4}), {1, 1, 1, 0}, 4);
       }},
      {"conv2d_nchwc_winograd F(2x2)", "conv2d_nchwc_winograd_x86",
       [] {
         return conv2d_nchwc_winograd(ph({2, 1, 8, 8, 16}), ph({4, 4, 2, 16, 8}), {1, 1, 1, 1}, 2);
       }},
      {"conv2d_nchwc_bf16", "conv2d_nchwc_x86",
       [] {
         return conv2d_nchwc_bf16(ph({1, 2, 10, 10, 8}),
                                  te::placeholder({3, 2, 3, 3, 4, 4}, ir::kInt32, "pairs"), {1, 1},
                                  {1, 1, 1, 1});
       }},
      {"conv2d_nchwc_int8", "conv2d_nchwc_int8_x86",
       [] {
         te::Tensor x = te::placeholder({1, 2, 10, 9, 8}, ir::DataType::UInt(8), "x8");
         te::Tensor w = te::placeholder({2, 2, 3, 3, 2, 16, 4}, ir::kInt8, "w8");
         return conv2d_nchwc_int8(x, w, {2, 1}, {1, 0, 1, 2}, {1, 1}, 128);
       }},
      {"group_conv2d_nchwc", "group_conv2d_nchwc_x86",
       [] {
         // 4 groups of 2 input and 2 output blocks of 4 channels.
         return group_conv2d_nchwc(ph({1, 8, 9, 9, 4}), ph({8, 2, 3, 3, 4, 4}), {2, 2},
                                   {1, 1, 1, 1}, {1, 1}, 4);
       }},
      {"depthwise_conv2d_nchwc", "depthwise_conv2d_nchwc_x86",
       [] {
         return depthwise_conv2d_nchwc(ph({1, 2, 10, 10, 8}), ph({2, 1, 3, 3, 1, 8}), {1, 1},
                                       {1, 1, 1, 1}, {2, 2});
       }},
      {"depthwise_conv2d_nchwc_int8", "depthwise_conv2d_nchwc_x86",
       [] {
         te::Tensor x = te::placeholder({1, 2, 10, 9, 16}, ir::DataType::UInt(8), "x8");
         te::Tensor w = te::placeholder({2, 1, 3, 3, 1, 16}, ir::kInt8, "w8");
         return depthwise_conv2d_nchwc_int8(x, w, {2, 1}, {1, 0, 1, 2}, {1, 1}, 7);
       }},
      {"conv2d_transpose_nchw", "conv2d_transpose_nchw_x86",
       [] {
         return conv2d_transpose_nchw(ph({1, 4, 5, 5}), ph({4, 3, 4, 4}), {2, 2}, {1, 1, 1, 1});
       }},
      {"conv2d_transpose_nchw grouped", "conv2d_transpose_nchw_x86",
       [] {
         return conv2d_transpose_nchw(ph({1, 4, 3, 4}), ph({4, 2, 3, 3}), {2, 3}, {0, 1, 1, 0},
                                      {1, 2}, {1, 1}, 2);
       }},
      {"conv2d_transpose_nchw_packed", "conv2d_transpose_nchw_x86",
       [] {
         // [C, M/g, KH, KW] = [4, 4, 2, 2], one group: 16 columns in 2 panels of 8.
         return conv2d_transpose_nchw_packed(ph({1, 4, 5, 5}), ph({2, 4, 8}), {4, 4, 2, 2}, {2, 2},
                                             {0, 0, 0, 0});
       }},
      {"dense", "dense_x86",
       [] {
         return dense(ph({4, 16}), ph({10, 16}));
       }},
      {"dense trans_a", "dense_x86",
       [] {
         return dense(ph({16, 4}), ph({16, 10}), true, false);
       }},
      {"dense_packed", "dense_x86",
       [] {
         return dense_packed(ph({4, 16}), ph({3, 16, 8}), 20);
       }},
      {"dense_packed_bf16", "dense_x86",
       [] {
         return dense_packed_bf16(ph({4, 15}), te::placeholder({3, 8, 8}, ir::kInt32, "pairs"), 20);
       }},
      {"dense_int8", "dense_int8_x86",
       [] {
         te::Tensor x = te::placeholder({2, 6, 12}, ir::DataType::UInt(8), "x8");
         return dense_int8(x, te::placeholder({3, 3, 16, 4}, ir::kInt8, "w8"));
       }},
      {"batch_matmul", "batch_matmul_x86",
       [] {
         return batch_matmul(ph({2, 4, 6}), ph({1, 6, 5}));
       }},
      {"batch_matmul trans", "batch_matmul_x86",
       [] {
         return batch_matmul(ph({3, 6, 4}), ph({3, 5, 6}), true, true);
       }},
      {"max_pool2d", "pool2d_x86",
       [] {
         return max_pool2d(ph({1, 4, 10, 10}), {3, 3}, {2, 2}, {1, 1, 1, 1}, true);
       }},
      {"max_pool2d nchwc", "pool2d_x86",
       [] {
         return max_pool2d(ph({1, 2, 8, 8, 8}), {2, 2}, {2, 2}, {0, 0, 0, 0});
       }},
      {"avg_pool2d", "pool2d_x86",
       [] {
         return avg_pool2d(ph({1, 4, 7, 7}), {3, 2}, {2, 1}, {1, 0, 1, 1}, false, true);
       }},
      {"global_max_pool2d", "pool2d_x86",
       [] {
         return global_max_pool2d(ph({1, 4, 5, 6}));
       }},
      {"global_avg_pool2d nchwc", "pool2d_x86",
       [] {
         return global_avg_pool2d(ph({1, 2, 5, 5, 8}));
       }},
      {"vdla_conv2d", "vdla_conv2d",
       [] {
         return vdla_conv2d({8, 8, 32, 32, 3, 1, 1}, /*relu=*/true).out;
       }},
  };
}

/// The placeholders `out` reads, in order of first appearance breadth-first (as a task's).
std::vector<te::Tensor> args_of(const te::Tensor& out) {
  std::vector<te::Tensor> args, todo{out};
  std::set<const te::TensorNode*> seen;
  for (size_t i = 0; i < todo.size(); ++i) {
    const te::Tensor t = todo[i];
    if (!seen.insert(t.get()).second) continue;
    if (!t->is_compute()) args.push_back(t);
    for (const te::Tensor& in : t->inputs()) todo.push_back(in);
  }
  args.push_back(out);
  return args;
}

/// `out` lowered naive (config null) or scheduled by template `tmpl` at `config`.
ir::PrimFunc lowered(const te::Tensor& out, const TunableTemplate* tmpl = nullptr,
                     const space::Config* config = nullptr) {
  te::Schedule s = te::create_schedule({out});
  if (config != nullptr) tmpl->schedule(s, out, *config, out);
  // The VDLA's template schedules for the VDLA (its naive program lowers for the CPU).
  if (config != nullptr && tmpl->name == "vdla_conv2d")
    return compiler::lower_vdla(s, args_of(out), "f");
  return compiler::lower(s, args_of(out), "f");
}

/// The structural hash of lowered(out, tmpl, config), or the kiln::Error of a config that does not
/// fit (the VDLA template's space holds such points).
std::string lowered_or_error(const te::Tensor& out, const TunableTemplate& tmpl,
                             const space::Config& config) {
  try {
    return "program " + std::to_string(ir::structural_hash(lowered(out, &tmpl, &config)));
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(Workload, EveryComputeIsCoveredAndEveryTemplatesComputeIsKnown) {
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(Workload::parse(*workload_of(c.make())).compute);
  const std::vector<std::string>& known = workload_computes();
  EXPECT_EQ(covered, std::set<std::string>(known.begin(), known.end()));
  for (const TunableTemplate& t : tunable_templates()) {
    EXPECT_FALSE(t.computes.empty()) << t.name;
    for (const std::string& c : t.computes) EXPECT_TRUE(covered.count(c)) << t.name << ": " << c;
  }
}

TEST(Workload, TextRoundTripsCanonically) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::string text = *workload_of(c.make());
    const Workload w = Workload::parse(text);
    EXPECT_EQ(w.json(), text);
    EXPECT_EQ(Workload::parse(w.json()), w);
    EXPECT_EQ(text.find(' '), std::string::npos);
    // Whitespace and member order do not matter; the canonical text is the same.
    std::string spaced;
    for (char ch : text) spaced += ch == ',' ? std::string(", ") : std::string(1, ch);
    EXPECT_EQ(Workload::parse(spaced).json(), text);
  }
  const std::string reordered =
      R"({"inputs":[{"shape":[4,16],"dtype":"float32"},{"shape":[10,16],"dtype":"float32"}],)"
      R"("compute":"dense","attrs":{"trans_b":true,"trans_a":false}})";
  EXPECT_EQ(Workload::parse(reordered).json(), *workload_of(dense(ph({4, 16}), ph({10, 16}))));
}

TEST(Workload, TheRebuiltProgramIsTheOriginal) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const te::Tensor out = c.make();
    const Workload w = Workload::parse(*workload_of(out));
    const te::Tensor again = compute_from_workload(w);
    EXPECT_EQ(*workload_of(again), w.json());
    EXPECT_TRUE(ir::structural_equal(lowered(out), lowered(again)));
    const TunableTemplate& tmpl = tunable_template(c.tmpl);
    check_template_compute(tmpl, w.compute);
    const space::ConfigSpace a = tmpl.space(out), b = tmpl.space(again);
    ASSERT_EQ(a.size(), b.size());
    for (uint64_t i : {uint64_t{0}, a.size() / 2, a.size() - 1}) {
      const space::Config ca = a.get(i), cb = b.get(i);
      if (c.tmpl == "vdla_conv2d") {
        // Points that do not fit are refused alike; the default fits.
        EXPECT_EQ(lowered_or_error(out, tmpl, ca), lowered_or_error(again, tmpl, cb)) << ca.str();
        const space::Config d = tmpl.default_config(out, a, target::Target::parse("vdla"));
        EXPECT_EQ(lowered_or_error(out, tmpl, d).rfind("program ", 0), 0u);
        EXPECT_EQ(lowered_or_error(out, tmpl, d), lowered_or_error(again, tmpl, d));
        continue;
      }
      EXPECT_TRUE(ir::structural_equal(lowered(out, &tmpl, &ca), lowered(again, &tmpl, &cb)))
          << ca.str();
    }
  }
}

TEST(Workload, DifferentAttributesAreDifferentWorkloads) {
  auto conv = [](Ints2 stride, Ints4 pads, Ints2 dil, int groups) {
    return *workload_of(
        conv2d_nchw(ph({1, 4, 9, 9}), ph({4, 4 / groups, 3, 3}), stride, pads, dil, groups));
  };
  const std::set<std::string> texts = {
      conv({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), conv({2, 1}, {1, 1, 1, 1}, {1, 1}, 1),
      conv({1, 1}, {1, 1, 1, 0}, {1, 1}, 1), conv({1, 1}, {1, 1, 1, 1}, {1, 2}, 1),
      conv({1, 1}, {1, 1, 1, 1}, {1, 1}, 2)};
  EXPECT_EQ(texts.size(), 5u);
  EXPECT_NE(*workload_of(max_pool2d(ph({1, 4, 9, 9}), {3, 3}, {2, 2}, {1, 1, 1, 1}, true)),
            *workload_of(max_pool2d(ph({1, 4, 9, 9}), {3, 3}, {2, 2}, {1, 1, 1, 1}, false)));
}

TEST(Workload, OtherDtypesRebuild) {
  for (const char* dtype : {"float16", "float64", "int8", "int32", "uint8"}) {
    SCOPED_TRACE(dtype);
    const std::string text = std::string(R"({"attrs":{},"compute":"global_avg_pool2d",)") +
                             R"("inputs":[{"dtype":")" + dtype + R"(","shape":[1,4,5,5]}]})";
    const te::Tensor out = compute_from_workload(Workload::parse(text));
    EXPECT_EQ(out->dtype().str(), dtype);
    lowered(out);
  }
}

TEST(Workload, OnlyTopiComputesCarryOne) {
  te::Tensor x = ph({4, 4});
  EXPECT_FALSE(workload_of(x).has_value());
  EXPECT_FALSE(workload_of(te::compute({4, 4}, [&](ir::Var i, ir::Var j) {
                 return x(i, j) * 2.0f;
               })).has_value());
}

// --- bad workloads ---

const std::string kConv =
    R"({"attrs":{"dilations":[1,1],"groups":1,"pads":[1,1,1,1],"strides":[1,1]},)"
    R"("compute":"conv2d_nchw","inputs":[{"dtype":"float32","shape":[1,3,8,8]},)"
    R"({"dtype":"float32","shape":[16,3,3,3]}]})";

/// kConv with `from` replaced by `to` (which must occur).
std::string conv_with(const std::string& from, const std::string& to) {
  std::string s = kConv;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

/// Expects parsing (and, where parsing passes, building) `text` to fail with a kiln::Error
/// containing `needle`.
void expect_bad(const std::string& text, const std::string& needle) {
  SCOPED_TRACE(text);
  EXPECT_ERROR_CONTAINS(compute_from_workload(Workload::parse(text)), needle);
}

TEST(WorkloadErrors, MalformedText) {
  ASSERT_NO_THROW(Workload::parse(kConv));
  expect_bad("", "malformed JSON");
  expect_bad(kConv.substr(0, kConv.size() - 1), "malformed JSON");
  expect_bad(R"({"compute":"d\uZZZZ"})", "bad \\u escape");
  expect_bad("[1, 2]", "workload: must be a JSON object, got [1,2]");
  expect_bad(conv_with(R"("compute")", R"("computer")"), "unknown member 'computer'");
  expect_bad(conv_with(R"("compute":"conv2d_nchw",)", ""), "has no member 'compute'");
  expect_bad(
      conv_with(R"("attrs":{"dilations":[1,1],"groups":1,"pads":[1,1,1,1],"strides":[1,1]},)", ""),
      "has no member 'attrs'");
  expect_bad(conv_with(R"("conv2d_nchw")", "7"), "compute must be a string, got 7");
  expect_bad(conv_with(R"("conv2d_nchw")", R"("conv3d")"),
             "compute 'conv3d' is not a tunable compute (known: conv2d_nchw");
  expect_bad(conv_with(R"("inputs":[)", R"("inputs":{"a":1},"x":[)"), "unknown member 'x'");
  expect_bad(R"({"attrs":{},"compute":"dense","inputs":{}})", "inputs must be a list, got {}");
  expect_bad(conv_with(R"({"dtype":"float32","shape":[1,3,8,8]})", "5"),
             "inputs[0] must be an object, got 5");
  expect_bad(conv_with(R"("shape":[1,3,8,8]})", R"("shape":[1,3,8,8],"layout":"NCHW"})"),
             "inputs[0] has an unknown member 'layout'");
  expect_bad(conv_with(R"("shape":[1,3,8,8]})", R"("shape":"1x3x8x8"})"),
             "inputs[0].shape must be a list, got \"1x3x8x8\"");
  expect_bad(conv_with("[1,3,8,8]", R"([1,"3",8,8])"),
             "inputs[0].shape[1] must be an integer, got \"3\"");
  expect_bad(conv_with("[1,3,8,8]", "[1,3.5,8,8]"),
             "inputs[0].shape[1] must be an integer, got 3.5");
  expect_bad(conv_with("[1,3,8,8]", "[1,3,8,99999999999999999999]"),
             "bad number '99999999999999999999'");
  expect_bad(conv_with(R"("dtype":"float32","shape":[16)", R"("dtype":3,"shape":[16)"),
             "inputs[1].dtype must be a dtype name, got 3");
  expect_bad(conv_with(R"("dtype":"float32","shape":[16)", R"("dtype":"float33","shape":[16)"),
             "inputs[1].dtype = 'float33' is not a dtype a workload takes (float16, float32");
  expect_bad(conv_with(R"("dtype":"float32","shape":[16)", R"("dtype":"bool","shape":[16)"),
             "inputs[1].dtype = 'bool' is not a dtype");
  expect_bad(conv_with(R"("dtype":"float32","shape":[16)", R"("dtype":"float64","shape":[16)"),
             "inputs[1].dtype = float64 differs from inputs[0].dtype = float32");
  expect_bad(conv_with(R"("groups":1)", R"("groups":"1")"),
             "attrs.groups must be an integer, true or false, or a list of integers, got \"1\"");
  expect_bad(conv_with("[1,1,1,1]", R"([1,1,true,1])"),
             "attrs.pads[2] must be an integer, got true");
}

TEST(WorkloadErrors, WrongFieldsAndValues) {
  expect_bad(conv_with(R"(,{"dtype":"float32","shape":[16,3,3,3]})", ""), "takes 2 inputs, got 1");
  expect_bad(conv_with("[16,3,3,3]", "[16,3,3]"),
             "inputs[1] (kernel) must have 4 dimensions, got 3");
  expect_bad(conv_with("[1,3,8,8]", "[1,3,0,8]"),
             "inputs[0].shape[2] = 0 must be in [1, 2147483647]");
  expect_bad(conv_with("[1,3,8,8]", "[1,-3,8,8]"), "inputs[0].shape[1] = -3 must be in [1,");
  expect_bad(conv_with("[1,3,8,8]", "[1,3,8,4294967296]"), "inputs[0].shape[3] = 4294967296");
  expect_bad(conv_with("[1,3,8,8]", "[65536,3,65536,8]"),
             "inputs[0] [65536, 3, 65536, 8] has more than 2147483647 elements");
  expect_bad(conv_with(R"("groups":1,)", ""), "attrs.groups is missing");
  expect_bad(conv_with(R"("groups":1)", R"("groups":1,"group":1)"),
             "attrs.group is not an attribute of conv2d_nchw");
  expect_bad(conv_with(R"("groups":1)", R"("groups":[1])"), "attrs.groups must be an integer");
  expect_bad(conv_with(R"("groups":1)", R"("groups":0)"),
             "attrs.groups = 0 must be in [1, 2147483647]");
  expect_bad(conv_with(R"("strides":[1,1])", R"("strides":[1,0])"),
             "attrs.strides[1] = 0 must be in [1, 2147483647]");
  expect_bad(conv_with(R"("strides":[1,1])", R"("strides":[1,1099511627776])"),
             "attrs.strides[1] = 1099511627776 must be in [1, 2147483647]");
  expect_bad(conv_with("[1,1,1,1]", "[1,1,-1,1]"), "attrs.pads[2] = -1 must be in [0,");
  expect_bad(conv_with("[1,1,1,1]", "[1,1]"), "attrs.pads must be a list of 4 integers, got 2");
  expect_bad(conv_with("[1,1,1,1]", "1"), "attrs.pads must be a list of 4 integers");
  expect_bad(R"({"attrs":{"trans_a":0,"trans_b":true},"compute":"dense","inputs":[)"
             R"({"dtype":"float32","shape":[4,16]},{"dtype":"float32","shape":[10,16]}]})",
             "attrs.trans_a must be true or false");
}

TEST(WorkloadErrors, InconsistentShapes) {
  // The reported bad model: a kernel of 5 input channels on an input of 3.
  expect_bad(conv_with("[16,3,3,3]", "[16,5,3,3]"),
             "inputs[1].shape[1] = 5 must equal inputs[0].shape[1] / attrs.groups (input "
             "channels per group) = 3");
  expect_bad(conv_with(R"("groups":1)", R"("groups":2)"),
             "inputs[0].shape[1] = 3 (input channels) is not a multiple of attrs.groups = 2");
  expect_bad(conv_with("[16,3,3,3]", "[16,3,11,3]"),
             "the kernel inputs[1].shape[2] = 11 at attrs.dilations[0] = 1 spans 11, more than "
             "inputs[0].shape[2] = 8 padded by attrs.pads[0] + attrs.pads[2] = 1 + 1");
  expect_bad(conv_with(R"("dilations":[1,1])", R"("dilations":[1,2147483647])"),
             "the kernel inputs[1].shape[3] = 3 at attrs.dilations[1] = 2147483647 spans");
  expect_bad(R"({"attrs":{"trans_a":false,"trans_b":true},"compute":"dense","inputs":[)"
             R"({"dtype":"float32","shape":[4,16]},{"dtype":"float32","shape":[10,15]}]})",
             "inputs[1].shape[1] = 15 must equal inputs[0].shape[1] (the reduction) = 16");
  expect_bad(R"({"attrs":{"n":25},"compute":"dense_packed","inputs":[)"
             R"({"dtype":"float32","shape":[4,16]},{"dtype":"float32","shape":[3,16,8]}]})",
             "attrs.n = 25 columns are more than inputs[1].shape[0] * inputs[1].shape[2] = 24");
  expect_bad(R"({"attrs":{"n":20},"compute":"dense_packed_bf16","inputs":[)"
             R"({"dtype":"float32","shape":[4,16]},{"dtype":"int32","shape":[3,16,8]}]})",
             "inputs[1].shape[1] = 16 must equal (inputs[0].shape[1] + 1) / 2 (the pairs) = 8");
  expect_bad(R"({"attrs":{"n":20},"compute":"dense_packed_bf16","inputs":[)"
             R"({"dtype":"float32","shape":[4,16]},{"dtype":"float32","shape":[3,8,8]}]})",
             "inputs[1] (packed).dtype = float32 must be int32");
  expect_bad(R"({"attrs":{"dilations":[1,1],"pads":[0,0,0,0],"strides":[1,1]},)"
             R"("compute":"conv2d_nchwc_bf16","inputs":[{"dtype":"float32","shape":[1,2,8,8,8]},)"
             R"({"dtype":"int32","shape":[2,2,3,3,8,8]}]})",
             "inputs[1].shape[4] = 8 must equal inputs[0].shape[4] / 2 (input channel pairs per "
             "block) = 4");
  expect_bad(R"({"attrs":{"trans_a":false,"trans_b":false},"compute":"batch_matmul","inputs":[)"
             R"({"dtype":"float32","shape":[2,4,6]},{"dtype":"float32","shape":[3,6,5]}]})",
             "the batches inputs[0].shape[0] = 2 and inputs[1].shape[0] = 3 do not broadcast");
  expect_bad(R"({"attrs":{"dilations":[1,1],"pads":[0,0,0,0],"strides":[1,1]},)"
             R"("compute":"conv2d_nchwc","inputs":[{"dtype":"float32","shape":[1,2,8,8,8]},)"
             R"({"dtype":"float32","shape":[2,2,3,3,4,8]}]})",
             "inputs[1].shape[4] = 4 must equal inputs[0].shape[4] (input channels per block) = 8");
  expect_bad(R"({"attrs":{"dilations":[1,1],"pads":[0,0,0,0],"strides":[1,1]},)"
             R"("compute":"depthwise_conv2d_nchwc","inputs":[{"dtype":"float32",)"
             R"("shape":[1,2,8,8,8]},{"dtype":"float32","shape":[2,2,3,3,1,8]}]})",
             "inputs[1].shape[1] = 2 must equal 1 (a depthwise kernel's input channel blocks)");
  expect_bad(R"({"attrs":{"dilations":[1,1],"groups":3,"pads":[0,0,0,0],"strides":[1,1]},)"
             R"("compute":"group_conv2d_nchwc","inputs":[{"dtype":"float32",)"
             R"("shape":[1,6,8,8,8]},{"dtype":"float32","shape":[4,2,3,3,8,8]}]})",
             "inputs[1].shape[0] = 4 (output channel blocks) is not a multiple of "
             "attrs.groups = 3");
  expect_bad(R"({"attrs":{"dilations":[1,1],"groups":2,"pads":[0,0,0,0],"strides":[1,1]},)"
             R"("compute":"group_conv2d_nchwc","inputs":[{"dtype":"float32",)"
             R"("shape":[1,6,8,8,8]},{"dtype":"float32","shape":[4,2,3,3,8,8]}]})",
             "inputs[1].shape[1] = 2 must equal inputs[0].shape[1] / attrs.groups (input channel "
             "blocks per group) = 3");
  const std::string pool =
      R"({"attrs":{"ceil_mode":false,"kernel_shape":[3,3],"pads":[1,1,1,1],"strides":[2,2]},)"
      R"("compute":"max_pool2d","inputs":[{"dtype":"float32","shape":[1,4,9,9]}]})";
  ASSERT_NO_THROW(Workload::parse(pool));
  std::string p = pool;
  p.replace(p.find("[1,1,1,1]"), 9, "[1,3,1,1]");
  expect_bad(p, "attrs.pads[1] = 3 must be smaller than attrs.kernel_shape[1] = 3");
  p = pool;
  p.replace(p.find("[1,4,9,9]"), 9, "[1,4,9,1]");
  p.replace(p.find("[1,1,1,1]"), 9, "[0,0,0,0]");
  expect_bad(p, "the window attrs.kernel_shape[1] = 3 is larger than inputs[0].shape[3] = 1");
  p = pool;
  p.replace(p.find("[1,4,9,9]"), 9, "[1,4,9]");
  expect_bad(p, "inputs[0] (data) must have 4 or 5 dimensions, got 3");
}

TEST(WorkloadErrors, TransposedConvolutions) {
  const std::string t =
      R"({"attrs":{"dilations":[1,1],"groups":1,"output_padding":[0,0],"pads":[1,1,1,1],)"
      R"("strides":[2,2]},"compute":"conv2d_transpose_nchw","inputs":[{"dtype":"float32",)"
      R"("shape":[1,4,5,5]},{"dtype":"float32","shape":[4,3,4,4]}]})";
  ASSERT_NO_THROW(compute_from_workload(Workload::parse(t)));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = t;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_bad(with("[4,3,4,4]", "[5,3,4,4]"),
             "inputs[1].shape[0] = 5 must equal inputs[0].shape[1] (input channels) = 4");
  expect_bad(with(R"("output_padding":[0,0])", R"("output_padding":[0,2])"),
             "attrs.output_padding[1] = 2 must be smaller than attrs.strides[1] = 2 or "
             "attrs.dilations[1] = 1");
  expect_bad(with(R"("pads":[1,1,1,1])", R"("pads":[6,1,6,1])"), "remove the whole output");
  expect_bad(with("[1,4,5,5]", "[1,4,40000,40000]"), "has more than 2147483647 elements");
  // A huge kernel at stride 1 would write out millions of gather terms: refused by the compute.
  std::string huge = with("[1,4,5,5]", "[1,4,100,100]");
  huge.replace(huge.find("[4,3,4,4]"), 9, "[4,3,100,100]");
  huge.replace(huge.find("[2,2]"), 5, "[1,1]");
  expect_bad(huge, "adds 10000 terms per output point, more than the 4096 Kiln writes out");
  const std::string packed =
      R"({"attrs":{"dilations":[1,1],"groups":1,"kernel_shape":[4,4,2,2],"output_padding":[0,0],)"
      R"("pads":[0,0,0,0],"strides":[2,2]},"compute":"conv2d_transpose_nchw_packed","inputs":[)"
      R"({"dtype":"float32","shape":[1,4,5,5]},{"dtype":"float32","shape":[2,4,8]}]})";
  ASSERT_NO_THROW(compute_from_workload(Workload::parse(packed)));
  std::string bad = packed;
  bad.replace(bad.find("[2,4,8]"), 7, "[3,4,8]");
  expect_bad(bad, "inputs[1].shape[0] = 3 must equal the columns");
  bad = packed;
  bad.replace(bad.find("[2,4,8]"), 7, "[1,4,3]");
  expect_bad(bad, "inputs[1].shape[2] = 3 (the panel) must divide");
}

/// Mutated workload texts: each either builds or is a kiln::Error; no other exception escapes.
TEST(WorkloadErrors, MutationsAreErrorsOrWorkloads) {
  std::vector<std::string> seeds;
  for (const Case& c : cases()) seeds.push_back(*workload_of(c.make()));
  std::mt19937 rng(14);
  const std::string alphabet = "0123456789-[]{},:\"tfeE.x \\u";
  int built = 0, refused = 0;
  for (int k = 0; k < 20000; ++k) {
    std::string s = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0 && !s.empty(); --edits) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(at, 1 + rng() % 4);
          break;
        case 2:
          s.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          s.insert(at, std::to_string(rng()));
          break;
      }
    }
    try {
      compute_from_workload(Workload::parse(s));
      ++built;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "'" << s << "' raised " << typeid(e).name() << ": " << e.what();
    }
  }
  EXPECT_GT(built, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace kiln::topi
