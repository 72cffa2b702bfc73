// The `kiln` command line end to end: `kiln compile` on an ONNX model built here, `kiln run` on the
// bundle with an .npy input, the output .npy checked against a reference computed here (written
// into the folder -o names, one file per output); `kiln --help` and every command's --help; then
// command-line mistakes (exit code 2) and bad files (a missing model, a truncated model, an input
// of the wrong shape, a corrupted bundle), each an exit code of 1 and an "error: ..." line naming
// the problem.
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
#include <string>
#include <utility>
#include <vector>

#include "deploy/runtime/npy.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/run_command.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using runtime::NDArray;

/// y = relu(x + c) for x [2, 3] and the constant c [3] = {-0.5, 0, 0.5}; with `sum_output`, the
/// sum s = x + c is an output too (before y). `y` and `s` name the outputs. With `batch`, x's first
/// dimension is that symbol instead of 2 (an export with dynamic_axes).
std::string make_model(const std::string& y = "y", const std::string& s = "s",
                       bool sum_output = false, const std::string& batch = "") {
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
  if (batch.empty()) {
    tt->mutable_shape()->add_dim()->set_dim_value(2);
  } else {
    tt->mutable_shape()->add_dim()->set_dim_param(batch);
  }
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
  add->add_output(s);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input(s);
  relu->add_output(y);
  if (sum_output) g->add_output()->set_name(s);
  g->add_output()->set_name(y);
  return m.SerializeAsString();
}

using Result = ::kiln::testing::CommandResult;

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
  static std::string read(const std::string& p) { return ::kiln::testing::read_file(p); }

  /// Runs `kiln ARGS` with stdout and stderr captured.
  Result kiln(const std::string& args) const {
    return ::kiln::testing::run_command(KILN_BINARY, args, dir_);
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

TEST_F(CliTest, RunWritesOneFilePerOutputIntoTheFolder) {
  // Output names that are no file names: '/' and ':' become '_', and the second output whose name
  // becomes "y_1" gets "y_1_2".
  write(path("two.onnx"), make_model("y/1", "y:1", /*sum_output=*/true));
  Result r = kiln("compile '" + path("two.onnx") + "' -o '" + path("two.kiln") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  NDArray x = testing::random_array({2, 3}, 11);
  runtime::save_npy(path("x.npy"), x);
  // -o names a folder that does not exist yet (two levels), without a trailing '/'.
  const std::string out = path("results/run1");
  r = kiln("run '" + path("two.kiln") + "' --input '" + path("x.npy") + "' -o '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::is_directory(out));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"y_1.npy", "y_1_2.npy"}));
  EXPECT_FALSE(fs::exists(path("results/run1y_1.npy")));
  const float c[3] = {-0.5f, 0.0f, 0.5f};
  std::vector<float> sum(6), relu(6);
  for (int i = 0; i < 6; ++i) {
    sum[i] = x.data<float>()[i] + c[i % 3];
    relu[i] = std::max(0.0f, sum[i]);
  }
  EXPECT_TRUE(testing::all_close(runtime::load_npy(out + "/y_1.npy"), sum));
  EXPECT_TRUE(testing::all_close(runtime::load_npy(out + "/y_1_2.npy"), relu));
  EXPECT_NE(r.out.find("output 'y:1': float32[2, 3] -> " + out + "/y_1.npy"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("output 'y/1': float32[2, 3] -> " + out + "/y_1_2.npy"), std::string::npos)
      << r.out;

  // Run again into the same folder: the files are replaced.
  r = kiln("run '" + path("two.kiln") + "' --input '" + path("x.npy") + "' -o '" + out + "'");
  EXPECT_EQ(r.code, 0) << r.err;

  // -o naming a file is an error that names it, and the file is left alone.
  write(path("taken"), "not a folder");
  r = kiln("run '" + path("two.kiln") + "' --input '" + path("x.npy") + "' -o '" + path("taken") +
           "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: -o '" + path("taken") + "': cannot create that folder"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read(path("taken")), "not a folder");
}

TEST_F(CliTest, HelpForKilnAndEveryCommand) {
  // The commands and the flags each one's --help must list (and nothing it does not take).
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"compile",
       {"--target", "-o", "--no-fuse", "--no-layout", "--no-winograd", "--records", "--precision",
        "--quantize", "--calibrate", "--scales", "--input-shape"}},
      {"quantize", {"--calibrate", "-o", "--scales", "--input-shape"}},
      {"run", {"--input", "-o", "--profile", "--threads", "--device"}},
      {"tune",
       {"--target", "--trials", "--budget", "--time", "--early-stop", "--records", "--no-transfer",
        "-o", "--no-winograd", "--precision", "--explorer", "--cost-model", "--batch", "--seed",
        "--threads", "--repeat", "--flush-cache", "--input-shape"}},
      {"example", {"--n", "--threads", "--target"}},
      {"ops", {}},
      {"submit",
       {"--target", "--device-key", "--trials", "--budget", "--time", "--early-stop", "--name",
        "--priority", "--owner", "--watch", "--input-shape", "--server", "--token-file",
        "--tls-ca"}},
      {"jobs", {"--owner", "--state", "--server", "--token-file", "--tls-ca"}},
      {"watch", {"--server", "--token-file", "--tls-ca"}},
      {"fetch", {"-o", "--server", "--token-file", "--tls-ca"}},
      {"devices", {"--key", "--server", "--token-file", "--tls-ca"}},
      {"cancel", {"--reason", "--server", "--token-file", "--tls-ca"}},
      {"records list", {}},
      {"records export", {"--key", "-o", "--emulated"}},
      {"records import", {"--records"}},
  };
  Result top = kiln("--help");
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_EQ(top.out.rfind("usage: kiln COMMAND", 0), 0u) << top.out;
  EXPECT_EQ(kiln("-h").out, top.out);
  EXPECT_EQ(kiln("help").out, top.out);
  for (const auto& [name, flags] : commands) {
    EXPECT_NE(top.out.find("\n  " + name + " "), std::string::npos) << name << "\n" << top.out;
    for (const std::string& how : {name + " --help", name + " -h", "help " + name}) {
      Result r = kiln(how);
      EXPECT_EQ(r.code, 0) << how << ": " << r.err;
      EXPECT_EQ(r.out.rfind("usage: kiln " + name, 0), 0u) << how << ": " << r.out;
    }
    const std::string usage = kiln(name + " --help").out;
    // One line per flag, the flags listed and no other: "  --flag VALUE  what (default: ...)".
    std::vector<std::string> listed;
    std::istringstream lines(usage);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LE(line.size(), 100u) << name << ": " << line;
      if (line.rfind("  -", 0) != 0) continue;
      const std::string flag = line.substr(2, line.find(' ', 2) - 2);
      listed.push_back(flag);
      const bool has_value = line.find(' ', 2) < line.find("  ", 2);
      if (has_value) {
        EXPECT_TRUE(line.find("(default: ") != std::string::npos ||
                    line.find("(required") != std::string::npos ||
                    line.find("once per input") != std::string::npos)
            << name << ": a flag with a value says its default: " << line;
      }
    }
    EXPECT_EQ(listed, flags) << name << "\n" << usage;
  }
  // Defaults come from the code: kiln tune's trials are the tuner's.
  EXPECT_NE(kiln("tune --help").out.find("(default: 200)"), std::string::npos);
  // kiln run --help says what -o writes.
  EXPECT_NE(kiln("run --help").out.find("DIR/<output name>.npy"), std::string::npos);
  // --help wins over the rest of the command line, even a mistake.
  Result r = kiln("compile --no-such-flag --help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("usage: kiln compile", 0), 0u) << r.out;
}

TEST_F(CliTest, CommandLineMistakes) {
  // No command: the overview on stderr, exit 2.
  Result r = kiln("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("usage: kiln COMMAND", 0), 0u) << r.err;

  r = kiln("frobnicate --fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: unknown command 'frobnicate'; the commands are: compile, quantize, "
                       "run, tune, example, ops, submit, jobs, watch, fetch, devices, cancel"),
            std::string::npos)
      << r.err;
  r = kiln("help frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;

  r = kiln("compile '" + model_ + "' --fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: unknown flag '--fast'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: kiln compile MODEL.onnx"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kiln compile --help"), std::string::npos) << r.err;

  r = kiln("compile '" + model_ + "' --target");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --target needs a value (TARGET)"), std::string::npos) << r.err;

  r = kiln("compile '" + model_ + "' --precision fp16");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --precision takes fp32 or bf16, got 'fp16'"), std::string::npos)
      << r.err;
  // bf16 on a CPU without avx512_bf16 (named, so this needs no such machine): refused, saying
  // what the CPU has.
  r = kiln("compile '" + model_ + "' --precision bf16 --target 'llvm -mcpu=znver3' -o '" +
           path("bf16.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: --precision bf16 needs avx512_bf16 (vdpbf16ps); target 'llvm "
                       "-mcpu=znver3' (CPU 'znver3') has sse4.2, avx2, fma but not avx512_bf16"),
            std::string::npos)
      << r.err;

  r = kiln("jobs 7");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: kiln jobs takes no argument, got '7'"), std::string::npos) << r.err;

  r = kiln("compile");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("kiln compile needs a MODEL.onnx"), std::string::npos) << r.err;

  r = kiln("tune '" + model_ + "' --trials 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--trials needs a positive number, got '0'"), std::string::npos) << r.err;

  r = kiln("example matrix");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'matrix'"), std::string::npos) << r.err;
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
  EXPECT_NE(r.err.find("2 kernels (2 distinct) from 2 operators"), std::string::npos) << r.err;
  Result fused = kiln("compile '" + model_ + "' -o '" + path("f.kiln") + "'");
  EXPECT_NE(fused.err.find("1 kernels (1 distinct) from 2 operators"), std::string::npos)
      << fused.err;
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

// A model with a symbolic batch: refused without --input-shape (saying how), compiled for batch 1
// and 3 with it, each bundle run at its batch and checked; a bundle run with another batch, and
// malformed or repeated --input-shape values, are refused naming the input.
TEST_F(CliTest, SymbolicBatchNeedsInputShape) {
  const std::string model = path("dyn.onnx");
  write(model, make_model("y", "s", false, "batch"));
  Result r = kiln("compile '" + model + "' --target llvm -o '" + path("dyn.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: '" + model +
                       "': input 'x' has a symbolic dimension 0 ('batch'); "
                       "give its size with --input-shape x=1,3"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("dyn.kiln")));
  const float c[3] = {-0.5f, 0.0f, 0.5f};
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::string bundle = path("dyn" + std::to_string(batch) + ".kiln");
    r = kiln("compile '" + model + "' --target llvm --input-shape x=" + std::to_string(batch) +
             ",3 -o '" + bundle + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    NDArray x = testing::random_array({batch, 3}, static_cast<uint32_t>(10 + batch));
    runtime::save_npy(path("x.npy"), x);
    r = kiln("run '" + bundle + "' --input '" + path("x.npy") + "' -o '" + path("out/") + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    NDArray y = runtime::load_npy(path("out/y.npy"));
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{batch, 3}));
    std::vector<float> ref(static_cast<size_t>(batch * 3));
    for (size_t i = 0; i < ref.size(); ++i) {
      ref[i] = std::max(0.0f, x.data<float>()[i] + c[i % 3]);
    }
    EXPECT_TRUE(testing::all_close(y, ref));
    // Another batch than the bundle's: the input, the shape it was built for and the file's.
    runtime::save_npy(path("other.npy"), testing::random_array({batch + 1, 3}, 3));
    r = kiln("run '" + bundle + "' --input '" + path("other.npy") + "'");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("error: input 'x' must have shape [" + std::to_string(batch) +
                         ", 3], got [" + std::to_string(batch + 1) + ", 3]"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("the bundle was built for that shape"), std::string::npos) << r.err;
  }
  // A shape that disagrees with the model's fixed dimension.
  r = kiln("compile '" + model + "' --target llvm --input-shape x=2,4 -o '" + path("d.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input 'x': dimension 1 is 3 in the model, but --input-shape gives 4"),
            std::string::npos)
      << r.err;
  // An input the model does not have.
  r = kiln("compile '" + model + "' --target llvm --input-shape w=2,3 -o '" + path("d.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--input-shape names 'w', which is not an input of the model; its inputs "
                       "are 'x'"),
            std::string::npos)
      << r.err;
  // Command-line mistakes: exit 2.
  for (const char* bad : {"x=2,,3", "x", "x=2,-3"}) {
    r = kiln("compile '" + model + "' --input-shape '" + bad + "'");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--input-shape"), std::string::npos) << r.err;
  }
  r = kiln("compile '" + model + "' --input-shape x=2,3 --input-shape x=3,3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--input-shape gives input 'x' twice"), std::string::npos) << r.err;
  r = kiln("tune '" + model + "' --input-shape x=2,3,4 --trials 1 --records '" + path("records") +
           "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input 'x' has rank 2"), std::string::npos) << r.err;
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
