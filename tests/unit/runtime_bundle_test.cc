// Bundles and the graph executor without the compiler: the bundle format's round trip and its
// damaged files (sizes checked before anything is allocated), and GraphExecutor::from_parts over
// an in-memory module, so that the executor's reading of the graph is tested with no library.
// Several cases are crashes fuzz_bundle found (fuzz/corpus/bundle/crash-*).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/module.h"
#include "tests/common/expect_error.h"

namespace kiln::runtime {
namespace {

/// y = x + 1 over float32 tensors of any shape (the shapes are the executor's to check).
int32_t add_one(const KilnArg* args, int32_t num_args, const char** error) {
  if (num_args != 2) {
    *error = "add_one takes 2 tensors";
    return 1;
  }
  const KilnTensor* x = args[0].tensor;
  const KilnTensor* y = args[1].tensor;
  int64_t n = 1;
  for (int32_t d = 0; d < x->ndim; ++d) n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i)
    static_cast<float*>(y->data)[i] = static_cast<float*>(x->data)[i] + 1;
  return 0;
}

/// A module of one function, "add_one", with no library behind it.
class Kernels : public ModuleNode {
 public:
  void* symbol(const std::string& name) override {
    if (name == "add_one") return reinterpret_cast<void*>(&add_one);
    if (name == "__kiln_sig_add_one") return const_cast<char*>("tt");
    return nullptr;
  }
  std::string kind() const override { return "test"; }
};

Module kernels() { return Module::from_node(std::make_shared<Kernels>()); }

/// x -> add_one -> t (in pool 0) -> add_one -> y, with a parameter w that no node reads.
const char* kGraph = R"({"format": "kiln.graph", "version": 1,
  "storage": [{"bytes": 64}],
  "tensors": [
    {"name": "x", "dtype": "float32", "shape": [2, 3], "kind": "input"},
    {"name": "t", "dtype": "float32", "shape": [2, 3], "kind": "intermediate", "storage": 0, "offset": 32},
    {"name": "y", "dtype": "float32", "shape": [2, 3], "kind": "output"},
    {"name": "w", "dtype": "float32", "shape": [3], "kind": "param"}],
  "nodes": [{"name": "a", "func": "add_one", "args": [0, 1]},
            {"name": "b", "func": "add_one", "args": [1, 2]}],
  "inputs": [0], "outputs": [2]})";

std::map<std::string, NDArray> params() {
  std::map<std::string, NDArray> p;
  p.emplace("w", NDArray::from_vector<float>({1, 2, 3}, {3}));
  return p;
}

/// `bytes` with its checksum made to match again after an edit.
std::string resealed(std::string bytes) {
  const uint64_t sum = fnv1a64(bytes.data(), bytes.size() - 16);
  std::memcpy(bytes.data() + bytes.size() - 16, &sum, sizeof sum);
  return bytes;
}

TEST(Bundle, RoundTrip) {
  Bundle b;
  b.graph_json = kGraph;
  b.library = std::string("\0\1\2 library bytes", 18);
  b.params = params();
  const Bundle c = deserialize_bundle(serialize_bundle(b), "m.kiln");
  EXPECT_EQ(c.graph_json, b.graph_json);
  EXPECT_EQ(c.library, b.library);
  ASSERT_EQ(c.params.count("w"), 1u);
  EXPECT_EQ(c.params.at("w").to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Bundle, AParameterShapeIsCheckedAgainstItsBytesBeforeAllocation) {
  Bundle b;
  b.params = params();
  std::string bytes = serialize_bundle(b);
  // The parameter's one dimension (3) becomes 2^40: four terabytes of float32 announced, 12 bytes
  // there. Found by fuzz_bundle: the array was allocated before the sizes were compared.
  const size_t dim = bytes.find("KPRM") + 4 + 4 + 4 + 1 + 1 + 1 + 2 + 4;
  int64_t three;
  std::memcpy(&three, bytes.data() + dim, 8);
  ASSERT_EQ(three, 3);
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(bytes.data() + dim, &huge, 8);
  EXPECT_ERROR_CONTAINS(deserialize_bundle(resealed(bytes), "m.kiln"),
                        "bundle 'm.kiln': parameter 'w' of shape [1099511627776] and dtype float32 "
                        "holds 4398046511104 bytes, the file says 12");
}

TEST(GraphExecutor, RunsOverAModuleInMemory) {
  GraphExecutor g = GraphExecutor::from_parts(kGraph, params(), kernels(), "m.kiln");
  g.set_input("x", NDArray::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}));
  g.run();
  EXPECT_EQ(g.output(0).to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
}

TEST(GraphExecutor, AParameterNamedByTwoTensorsIsRefused) {
  // Found writing fuzz_bundle: the second tensor met the array the first had taken (moved out)
  // and the executor stopped on an internal error.
  std::string graph = kGraph;
  const std::string w = R"({"name": "w", "dtype": "float32", "shape": [3], "kind": "param"})";
  graph.replace(graph.find(w), w.size(), w + ", " + w);
  EXPECT_ERROR_CONTAINS(GraphExecutor::from_parts(graph, params(), kernels(), "m.kiln"),
                        "tensor 4: parameter 'w' is already the array of another tensor");
}

TEST(GraphExecutor, AnOffsetNearTwoToTheSixtyThreeIsOutsideItsPool) {
  // Found writing fuzz_bundle: offset + size overflowed, wrapped negative and passed the check,
  // so the tensor pointed far outside its pool.
  std::string graph = kGraph;
  graph.replace(graph.find("\"offset\": 32"), 12, "\"offset\": 9223372036854775800");
  EXPECT_ERROR_CONTAINS(
      GraphExecutor::from_parts(graph, params(), kernels(), "m.kiln"),
      "24 bytes at offset 9223372036854775800 do not fit in an array of 64 bytes");
}

}  // namespace
}  // namespace kiln::runtime
