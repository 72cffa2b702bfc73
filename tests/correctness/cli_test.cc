// The `kiln` command line end to end: `kiln compile` on an ONNX model built here, `kiln run` on the
// bundle with an .npy input, the output .npy checked against a reference computed here; then bad
// files (a missing model, a truncated model, an input of the wrong shape, a corrupted bundle), each
// an exit code of 1 and an "error: ..." line naming the problem.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "deploy/runtime/npy.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using runtime::NDArray;

/// y = relu(x + c) for x [2, 3] and the constant c [3] = {-0.5, 0, 0.5}.
std::string make_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("cli");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  auto* c = g->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_dims(3);
  for (float v : {-0.5f, 0.0f, 0.5f}) c->add_float_data(v);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("c");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("s");
  relu->add_output("y");
  g->add_output()->set_name("y");
  return m.SerializeAsString();
}

struct Result {
  int code = -1;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = path("model.onnx");
    write(model_, make_model());
  }

  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  static void write(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// Runs `kiln ARGS` with stdout and stderr captured.
  Result kiln(const std::string& args) const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd =
        std::string("'") + KILN_BINARY + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read(out);
    r.err = read(err);
    return r;
  }

  /// Compiles the model into model.kiln and returns its path.
  std::string compile() {
    const std::string bundle = path("model.kiln");
    Result r = kiln("compile '" + model_ + "' --target llvm -o '" + bundle + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::exists(bundle));
    return bundle;
  }

  testing::TempDir dir_{"kiln_cli_test"};
  std::string model_;
};

TEST_F(CliTest, CompileAndRun) {
  const std::string bundle = compile();
  NDArray x = testing::random_array({2, 3}, 7);
  runtime::save_npy(path("x.npy"), x);
  Result r = kiln("run '" + bundle + "' --input '" + path("x.npy") + "' -o '" + path("out/") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  NDArray y = runtime::load_npy(path("out/y.npy"));
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  std::vector<float> ref(6);
  const float c[3] = {-0.5f, 0.0f, 0.5f};
  for (int i = 0; i < 6; ++i) ref[i] = std::max(0.0f, x.data<float>()[i] + c[i % 3]);
  EXPECT_TRUE(testing::all_close(y, ref));

  // By name, printing instead of writing.
  r = kiln("run '" + bundle + "' --input 'x=" + path("x.npy") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("output 'y': float32[2, 3]"), std::string::npos) << r.out;
}

TEST_F(CliTest, CompileShowsProgress) {
  Result r = kiln("compile '" + model_ + "' --target llvm -o '" + path("m.kiln") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  // Add and Relu fuse into one function, named after its last node.
  EXPECT_NE(r.err.find("1/1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("compiling relu_0"), std::string::npos) << r.err;
}

TEST_F(CliTest, CompileWithoutFusionKeepsOneKernelPerOperator) {
  Result r = kiln("compile '" + model_ + "' --no-fuse --no-layout -o '" + path("nf.kiln") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 kernels from 2 operators"), std::string::npos) << r.err;
  Result fused = kiln("compile '" + model_ + "' -o '" + path("f.kiln") + "'");
  EXPECT_NE(fused.err.find("1 kernels from 2 operators"), std::string::npos) << fused.err;
}

TEST_F(CliTest, MissingModelFile) {
  Result r = kiln("compile '" + path("nope.onnx") + "' -o '" + path("nope.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("nope.onnx"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("nope.kiln")));
}

TEST_F(CliTest, TruncatedModel) {
  const std::string bytes = make_model();
  write(path("cut.onnx"), bytes.substr(0, bytes.size() / 2));
  Result r = kiln("compile '" + path("cut.onnx") + "' -o '" + path("cut.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cut.onnx"), std::string::npos) << r.err;
}

TEST_F(CliTest, RunProfilePrintsEveryKernel) {
  const std::string bundle = compile();
  runtime::save_npy(path("x.npy"), testing::random_array({2, 3}, 1));
  Result r = kiln("run '" + bundle + "' --input '" + path("x.npy") + "' --profile 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relu_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output 'y'"), std::string::npos) << r.out;
  Result bad = kiln("run '" + bundle + "' --input '" + path("x.npy") + "' --profile zero");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--profile needs a positive number"), std::string::npos) << bad.err;
}

TEST_F(CliTest, WrongInputShape) {
  const std::string bundle = compile();
  runtime::save_npy(path("bad.npy"), testing::random_array({3, 2}, 1));
  Result r = kiln("run '" + bundle + "' --input '" + path("bad.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: input 'x' must have shape"), std::string::npos) << r.err;

  r = kiln("run '" + bundle + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input 'x'"), std::string::npos) << r.err;

  r = kiln("run '" + bundle + "' --input '" + path("missing.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing.npy"), std::string::npos) << r.err;

  r = kiln("run '" + bundle + "' --input 'w=" + path("bad.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no input named 'w'"), std::string::npos) << r.err;
}

TEST_F(CliTest, CorruptedBundle) {
  const std::string bundle = compile();
  std::string bytes = read(bundle);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  write(path("bad.kiln"), bytes);
  runtime::save_npy(path("x.npy"), testing::random_array({2, 3}, 7));
  Result r = kiln("run '" + path("bad.kiln") + "' --input '" + path("x.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("corrupted"), std::string::npos) << r.err;

  write(path("short.kiln"), read(bundle).substr(0, 100));
  r = kiln("run '" + path("short.kiln") + "' --input '" + path("x.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln
