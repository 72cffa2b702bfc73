// Tests for loading modules and calling their functions through c_abi.h, using a hand-written C
// shared library (data/abi_test_module.c) and an in-memory ModuleNode; the same library with its
// ELF header made another CPU's is refused, naming both architectures.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/expect_error.h"

#ifndef KILN_ABI_TEST_MODULE
#error "KILN_ABI_TEST_MODULE must name the test shared library"
#endif

namespace kiln::runtime {
namespace {

Module load_test_module() { return Module::load_library(KILN_ABI_TEST_MODULE); }

TEST(ModuleTest, LoadsALibraryAndCallsAFunction) {
  Module m = load_test_module();
  EXPECT_TRUE(m.defined());
  EXPECT_EQ(m.kind(), "library");
  EXPECT_NE(m.name().find(KILN_ABI_TEST_MODULE), std::string::npos);
  EXPECT_TRUE(m.has_function("add_one"));
  EXPECT_FALSE(m.has_function("no_signature"));
  EXPECT_FALSE(m.has_function("missing"));

  Function add_one = m.function("add_one");
  EXPECT_EQ(add_one.name(), "add_one");
  EXPECT_EQ(add_one.signature(), "tt");
  NDArray in = NDArray::from_vector<float>({1, 2, 3}, {3});
  NDArray out = NDArray::empty({3}, kFloat32);
  add_one(in, out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2, 3, 4}));

  // Raw tensor views work as arguments too, and so does the span form.
  add_one(out.tensor(), in.tensor());
  EXPECT_EQ(in.to_vector<float>(), (std::vector<float>{3, 4, 5}));
  std::vector<Arg> args = {in, out};
  add_one.call(args);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST(ModuleTest, FunctionKeepsTheModuleAlive) {
  Function f;
  EXPECT_FALSE(f.defined());
  {
    Module m = load_test_module();
    f = m.function("add_one");
  }
  NDArray in = NDArray::from_vector<float>({10}, {1});
  NDArray out = NDArray::empty({1}, kFloat32);
  f(in, out);
  EXPECT_EQ(out.to_vector<float>()[0], 11.0f);
}

TEST(ModuleTest, ScalarArguments) {
  Function scale = load_test_module().function("scale");
  EXPECT_EQ(scale.signature(), "tfi");
  NDArray x = NDArray::from_vector<float>({1, 2}, {2});
  scale(x, 2.5, 2);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2.5f, 5.0f}));
  scale(x, 2, int64_t{2});  // an integer converts to a float parameter
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{5.0f, 10.0f}));
  scale(x, 0.5f, 2L);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2.5f, 5.0f}));
}

TEST(ModuleTest, ParallelLaunchGoesThroughTheRuntimePool) {
  Module m = load_test_module();
  auto* launch = static_cast<KilnParallelLaunch*>(m.symbol("__kiln_parallel_launch"));
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(*launch, &kiln_parallel_launch);

  const int saved = num_threads();
  Function fill = m.function("fill_parallel");
  for (int n : {1, 2, 3}) {
    set_num_threads(n);
    NDArray out = NDArray::empty({1001}, kFloat32);
    NDArray tasks = NDArray::empty({1}, kInt32);
    fill(out, -1, tasks);
    EXPECT_EQ(tasks.to_vector<int32_t>()[0], n);
    std::vector<float> v = out.to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(2 * i)) << i;
  }
  // A failing task surfaces as the function's error.
  set_num_threads(2);
  NDArray out = NDArray::empty({16}, kFloat32);
  NDArray tasks = NDArray::empty({1}, kInt32);
  EXPECT_ERROR_CONTAINS(fill(out, 1, tasks),
                        "fill_parallel: fill_parallel: a parallel task failed");
  set_num_threads(saved);
}

TEST(ModuleTest, MissingLibraryNamesTheFile) {
  EXPECT_ERROR_CONTAINS(Module::load_library("/nonexistent/dir/libnothing.so"),
                        "cannot load module '/nonexistent/dir/libnothing.so'");
  EXPECT_ERROR_CONTAINS(Module::load_library("/nonexistent/dir/libnothing.so"), "No such file");
}

TEST(ModuleTest, NotASharedObjectIsAnError) {
  // A C source file is not an ELF object.
  const std::string path = std::string(KILN_TEST_DATA_DIR) + "/abi_test_module.c";
  EXPECT_ERROR_CONTAINS(Module::load_library(path), "cannot load module '" + path + "'");
}

/// The test library's bytes with its ELF header's e_machine changed to another CPU architecture
/// than this process's (aarch64 here on x86_64, x86_64 on aarch64); *arch and *host name them.
std::string library_for_another_cpu(std::string* arch, std::string* host) {
  std::ifstream in(KILN_ABI_TEST_MODULE, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(bytes.size(), 20u);
  const bool on_arm = static_cast<uint8_t>(bytes[18]) == 183;
  *host = on_arm ? "aarch64" : "x86_64";
  *arch = on_arm ? "x86_64" : "aarch64";
  const uint16_t machine = on_arm ? 62 : 183;  // EM_X86_64, EM_AARCH64 (little-endian)
  bytes[18] = static_cast<char>(machine & 0xff);
  bytes[19] = static_cast<char>(machine >> 8);
  return bytes;
}

TEST(ModuleTest, LibraryForAnotherCpuNamesBothArchitectures) {
  std::string arch, host;
  const std::string bytes = library_for_another_cpu(&arch, &host);
  const std::string why = "is for " + arch + ", this machine runs " + host;
  // From bytes, as a bundle's library is loaded.
  EXPECT_ERROR_CONTAINS(Module::load_library_bytes(bytes, "bundle 'm.kiln'"),
                        "cannot load the library of bundle 'm.kiln': the library " + why);
  // From a file, as kiln-runner loads a kernel.
  const std::string path = ::testing::TempDir() + "/kiln_module_test_foreign.so";
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_ERROR_CONTAINS(Module::load_library(path), "cannot load module '" + path + "'");
  EXPECT_ERROR_CONTAINS(Module::load_library(path), why);
  std::remove(path.c_str());
  // Through the graph executor, which loads a bundle's library before it reads the graph.
  Bundle bundle;
  bundle.graph_json = "{}";
  bundle.library = bytes;
  EXPECT_ERROR_CONTAINS(GraphExecutor::from_bundle(std::move(bundle), "model.kiln"),
                        "cannot load the library of bundle 'model.kiln': the library " + why);
  // The library itself, unchanged, loads from bytes.
  std::ifstream in(KILN_ABI_TEST_MODULE, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Module::load_library_bytes(good, "the test library").has_function("add_one"));
}

TEST(ModuleTest, MissingFunctionOrSignature) {
  Module m = load_test_module();
  EXPECT_ERROR_CONTAINS(m.function("missing"), "function 'missing' not found in library '");
  EXPECT_ERROR_CONTAINS(m.function("no_signature"), "function 'no_signature' in library '");
  EXPECT_ERROR_CONTAINS(m.function("no_signature"), "has no signature");
  EXPECT_ERROR_CONTAINS(m.function("bad_signature"), "malformed signature 'tq'");
  Module null;
  EXPECT_FALSE(null.defined());
  EXPECT_THROW(null.function("add_one"), Error);
}

TEST(ModuleTest, WrongArgumentCountOrKind) {
  Module m = load_test_module();
  Function add_one = m.function("add_one");
  NDArray a = NDArray::empty({3}, kFloat32);
  EXPECT_ERROR_CONTAINS(add_one(a),
                        "error: function 'add_one' expects 2 arguments (tensor, tensor), got 1");
  EXPECT_ERROR_CONTAINS(add_one(a, a, a), "expects 2 arguments (tensor, tensor), got 3");
  EXPECT_ERROR_CONTAINS(add_one(a, 3), "argument 1 of 'add_one' must be a tensor, got an integer");
  EXPECT_ERROR_CONTAINS(add_one(2.0, a), "argument 0 of 'add_one' must be a tensor, got a float");
  EXPECT_ERROR_CONTAINS(add_one(a, static_cast<const KilnTensor*>(nullptr)),
                        "argument 1 of 'add_one' is a null tensor");

  Function scale = m.function("scale");
  EXPECT_ERROR_CONTAINS(scale(a, a, 3), "argument 1 of 'scale' must be a float, got a tensor");
  EXPECT_ERROR_CONTAINS(scale(a, 1.0, 3.0),
                        "argument 2 of 'scale' must be an integer, got a float");
  EXPECT_ERROR_CONTAINS(scale(a), "expects 3 arguments (tensor, float, int), got 1");

  Function silent = m.function("fail_silently");
  EXPECT_ERROR_CONTAINS(silent(a), "expects 0 arguments (), got 1");
}

TEST(ModuleTest, ErrorReturnBecomesAnError) {
  Module m = load_test_module();
  Function add_one = m.function("add_one");
  NDArray in = NDArray::empty({3}, kFloat32);
  NDArray out = NDArray::empty({4}, kFloat32);
  EXPECT_ERROR_CONTAINS(add_one(in, out),
                        "error: add_one: add_one: shape mismatch between in and out");
  NDArray ints = NDArray::empty({3}, kInt32);
  EXPECT_ERROR_CONTAINS(add_one(in, ints), "arguments must be 1-d float32 tensors");
  EXPECT_ERROR_CONTAINS(m.function("fail_silently")(),
                        "fail_silently: failed without a message (code 5)");
}

/// A module made of a table, as a JIT would provide.
class TableModuleNode final : public ModuleNode {
 public:
  std::map<std::string, void*> symbols;
  void* symbol(const std::string& name) override {
    auto it = symbols.find(name);
    return it == symbols.end() ? nullptr : it->second;
  }
  std::string kind() const override { return "table"; }
};

KilnParallelLaunch g_table_launch = nullptr;
const char g_twice_sig[] = "ti";

int32_t twice(const KilnArg* args, int32_t, const char** error) {
  if (args[1].i < 0) {
    *error = "n must be non-negative";
    return 1;
  }
  static_cast<int64_t*>(args[0].tensor->data)[0] = 2 * args[1].i;
  return 0;
}

TEST(ModuleTest, CustomNodeGetsTheParallelLaunchPointer) {
  auto node = std::make_shared<TableModuleNode>();
  node->symbols["__kiln_parallel_launch"] = reinterpret_cast<void*>(&g_table_launch);
  node->symbols["twice"] = reinterpret_cast<void*>(&twice);
  node->symbols["__kiln_sig_twice"] = const_cast<char*>(g_twice_sig);
  Module m = Module::from_node(node);
  EXPECT_EQ(g_table_launch, &kiln_parallel_launch);
  EXPECT_EQ(m.kind(), "table");
  EXPECT_EQ(m.name(), "table");

  NDArray r = NDArray::empty({1}, kInt64);
  m.function("twice")(r, 21);
  EXPECT_EQ(r.to_vector<int64_t>()[0], 42);
  EXPECT_ERROR_CONTAINS(m.function("twice")(r, -1), "twice: n must be non-negative");
  EXPECT_ERROR_CONTAINS(m.function("thrice"), "function 'thrice' not found in table");
  EXPECT_THROW(Module::from_node(nullptr), Error);
}

}  // namespace
}  // namespace kiln::runtime
