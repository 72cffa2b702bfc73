// kiln-run on this machine (the board's runner, runtime only): bundles made by `kiln compile` from
// models built here run, their outputs written as DIR/<output name>.npy and checked against
// references computed here; an input with a default value may be left out; --profile, --repeat and
// --threads; every mistake in the command line, the inputs or the bundle (a bundle compiled for
// another CPU among them) is exit code 2 with an "error: ..." line naming the input or the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "deploy/runtime/npy.h"
#include "tests/board/board_test_util.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::run;

/// y = relu(x + c) for x [2, 3] and the constant c [3] = {-0.5, 0, 0.5}.
std::string relu_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {2, 3});
  m.init_values("c", {3}, {-0.5f, 0.0f, 0.5f});
  m.node("Add", {"x", "c"}, {"s"});
  m.node("Relu", {"s"}, {"y"});
  m.output("y");
  return m.bytes();
}

/// y = x + b for x [2, 3] and the input b [3], whose initializer {1, 2, 3} is its default.
std::string default_input_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {2, 3});
  m.input("b", {3});
  m.init_values("b", {3}, {1.0f, 2.0f, 3.0f});
  m.node("Add", {"x", "b"}, {"y"});
  m.output("y");
  return m.bytes();
}

/// A target for another CPU than this one: a bundle for it must not load here.
std::string foreign_target() {
#if defined(__aarch64__)
  return "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64";
#else
  return "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";
#endif
}

class KilnRunTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }

  /// Compiles `model` (ONNX bytes) for `target` into NAME.kiln and returns its path.
  std::string compile(const std::string& model, const std::string& name,
                      const std::string& target = "llvm") {
    const std::string onnx = path(name + ".onnx"), bundle = path(name + ".kiln");
    std::ofstream(onnx, std::ios::binary) << model;
    testing::Run r = run({KILN_BINARY, "compile", onnx, "--target", target, "-o", bundle}, logs());
    EXPECT_EQ(r.code, 0) << r.err;
    return bundle;
  }

  testing::Run kiln_run(std::vector<std::string> args) const {
    args.insert(args.begin(), KILN_RUN_BINARY);
    return run(args, logs());
  }
  std::string logs() const { return dir_.path().string(); }

  testing::TempDir dir_{"kiln_run_test"};
};

TEST_F(KilnRunTest, RunsABundleAndWritesEachOutput) {
  const std::string bundle = compile(relu_model(), "relu");
  NDArray x = testing::random_array({2, 3}, 5);
  runtime::save_npy(path("x.npy"), x);
  const float c[3] = {-0.5f, 0.0f, 0.5f};
  std::vector<float> ref(6);
  for (int i = 0; i < 6; ++i) ref[i] = std::max(0.0f, x.data<float>()[i] + c[i % 3]);

  // By name, into a folder that does not exist yet.
  testing::Run r = kiln_run({bundle, "--input", "x=" + path("x.npy"), "-o", path("out/a")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(testing::all_close(runtime::load_npy(path("out/a/y.npy")), ref));
  EXPECT_NE(r.out.find("output 'y': float32[2, 3] -> " + path("out/a/y.npy")), std::string::npos)
      << r.out;

  // By position, printing the first values instead.
  r = kiln_run({bundle, "--input", path("x.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("output 'y': float32[2, 3] = ["), std::string::npos) << r.out;

  // The same as `kiln run` writes (one implementation).
  r = run({KILN_BINARY, "run", bundle, "--input", "x=" + path("x.npy"), "-o", path("out/b")},
          logs());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(testing::read_file(path("out/a/y.npy")), testing::read_file(path("out/b/y.npy")));
}

TEST_F(KilnRunTest, AnInputWithADefaultMayBeLeftOut) {
  const std::string bundle = compile(default_input_model(), "default");
  NDArray x = testing::random_array({2, 3}, 9);
  runtime::save_npy(path("x.npy"), x);
  testing::Run r = kiln_run({bundle, "--input", "x=" + path("x.npy"), "-o", path("out")});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<float> ref(6);
  for (int i = 0; i < 6; ++i) ref[i] = x.data<float>()[i] + static_cast<float>(i % 3 + 1);
  EXPECT_TRUE(testing::all_close(runtime::load_npy(path("out/y.npy")), ref));

  // Given, it replaces the default.
  NDArray b = testing::random_array({3}, 10);
  runtime::save_npy(path("b.npy"), b);
  r = kiln_run({bundle, "--input", "x=" + path("x.npy"), "--input", "b=" + path("b.npy"), "-o",
                path("out")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (int i = 0; i < 6; ++i) ref[i] = x.data<float>()[i] + b.data<float>()[i % 3];
  EXPECT_TRUE(testing::all_close(runtime::load_npy(path("out/y.npy")), ref));
}

TEST_F(KilnRunTest, ProfileRepeatAndThreads) {
  const std::string bundle = compile(relu_model(), "relu");
  runtime::save_npy(path("x.npy"), testing::random_array({2, 3}, 1));
  testing::Run r = kiln_run({bundle, "--input", path("x.npy"), "--profile", "--repeat", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over 3 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("machine: peak "), std::string::npos) << r.out;  // the measured roofs
  EXPECT_NE(r.out.find("lost_ms  function\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  Relu_"), std::string::npos) << r.out;  // the kernel's function
  EXPECT_NE(r.out.find("3 runs after a warm-up run, time per run: median "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("output 'y'"), std::string::npos) << r.out;

  r = kiln_run({bundle, "--input", path("x.npy"), "--repeat", "2", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 runs, time per run: median "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("kernels"), std::string::npos) << r.out;  // no profile asked for

  r = kiln_run({"--help"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("usage: kiln-run BUNDLE", 0), 0u) << r.out;
  for (const char* flag : {"--input", "-o DIR", "--profile", "--threads N", "--repeat N"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
}

TEST_F(KilnRunTest, BadInputsAreErrorsNamingTheInputOrTheFile) {
  const std::string bundle = compile(relu_model(), "relu");
  runtime::save_npy(path("x.npy"), testing::random_array({2, 3}, 1));
  runtime::save_npy(path("wrong_shape.npy"), testing::random_array({3, 2}, 1));
  runtime::save_npy(path("wrong_dtype.npy"), NDArray::empty({2, 3}, runtime::kInt32));
  std::ofstream(path("not.npy")) << "not an array";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {{}, {"input 'x' (float32[2,3]) is not given (use --input x=FILE.npy)"}},
      {{"--input", "z=" + path("x.npy")}, {"has no input named 'z' (its inputs: x)"}},
      {{"--input", "x=" + path("wrong_shape.npy")},
       {"input 'x' must have shape [2, 3], got [3, 2]", path("wrong_shape.npy")}},
      {{"--input", "x=" + path("wrong_dtype.npy")},
       {"input 'x' must be float32, got int32", path("wrong_dtype.npy")}},
      {{"--input", "x=" + path("missing.npy")}, {path("missing.npy")}},
      {{"--input", "x=" + path("not.npy")}, {path("not.npy")}},
      {{"--input", path("x.npy"), "--input", "x=" + path("x.npy")}, {"input 'x' is given twice"}},
      {{"--input", path("x.npy"), "--input", path("x.npy")}, {"takes 1 input(s)", "one too many"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {bundle};
    args.insert(args.end(), c.args.begin(), c.args.end());
    testing::Run r = kiln_run(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    for (const std::string& s : c.says) EXPECT_NE(r.err.find(s), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // A bundle that is not there, or not a bundle.
  testing::Run r = kiln_run({path("nothing.kiln")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("nothing.kiln")), std::string::npos) << r.err;
  r = kiln_run({path("not.npy")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("not.npy")), std::string::npos) << r.err;
}

TEST_F(KilnRunTest, CommandLineMistakesShowTheUsage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "kiln-run needs a BUNDLE"},
      {{"a.kiln", "b.kiln"}, "kiln-run takes one BUNDLE, got 'a.kiln' and 'b.kiln'"},
      {{"a.kiln", "--frobnicate"}, "unknown flag '--frobnicate'"},
      {{"a.kiln", "--repeat", "0"}, "--repeat needs a positive number, got '0'"},
      {{"a.kiln", "--threads", "many"}, "--threads needs a positive number, got 'many'"},
      {{"a.kiln", "--input"}, "--input needs a value ([NAME=]FILE.npy)"},
      {{"a.kiln", "--profile=3"}, "--profile takes no value, got '--profile=3'"},
      {{"a.kiln", "--input", "x="}, "--input 'x=' names no file"},
  };
  for (const auto& [args, says] : cases) {
    testing::Run r = kiln_run(args);
    EXPECT_EQ(r.code, 2) << says;
    EXPECT_NE(r.err.find("error: " + says), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("usage: kiln-run"), std::string::npos) << r.err;
  }
  // --help wins over a mistake.
  EXPECT_EQ(kiln_run({"--frobnicate", "--help"}).code, 0);
}

TEST_F(KilnRunTest, ABundleForAnotherCpuNamesBothArchitectures) {
  const std::string bundle = compile(relu_model(), "foreign", foreign_target());
  runtime::save_npy(path("x.npy"), testing::random_array({2, 3}, 1));
  testing::Run r = kiln_run({bundle, "--input", path("x.npy")});
  EXPECT_EQ(r.code, 2) << r.err;
#if defined(__aarch64__)
  const std::string why = "the library is for x86_64, this machine runs aarch64";
#else
  const std::string why = "the library is for aarch64, this machine runs x86_64";
#endif
  EXPECT_NE(r.err.find("error: cannot load the library of bundle '" + bundle + "': " + why),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("ELF"), std::string::npos) << "no loader's words: " << r.err;
}

}  // namespace
}  // namespace kiln
