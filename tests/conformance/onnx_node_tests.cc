// Runs the ONNX backend node tests (model.onnx + test_data_set_*/input_*.pb, output_*.pb, shipped
// in the onnx Python package) through Kiln: import, build for the host, run, compare. Prints one
// line per failure and a summary:
//   case=onnx_node passed=<p> failed=<f> unsupported=<u>
// A test is "unsupported" when Kiln refuses the model with a user error (an operator, opset, dtype
// or form it does not take); "failed" when it accepts the model but computes something else (or
// crashes into an internal error). Exit code 1 when any test failed.
//
//   onnx_node_tests [DATA_DIR] [--filter SUBSTRING] [--verbose]
// DATA_DIR defaults to the node tests of the onnx package python3 imports.
// Tolerance: |got - want| <= 1e-5 + 1e-3 * |want| (ONNX's backend tests use rtol 1e-3).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/error.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/graph_executor.h"

namespace fs = std::filesystem;
using kiln::runtime::NDArray;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string default_data_dir() {
  FILE* p =
      popen("python3 -c 'import onnx, os; print(os.path.dirname(onnx.__file__))' 2>/dev/null", "r");
  if (!p) return "";
  char buf[4096] = {0};
  std::string out = fgets(buf, sizeof(buf), p) ? buf : "";
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "" : out + "/backend/test/data/node";
}

NDArray load_tensor(const fs::path& p) {
  onnx::TensorProto t;
  KILN_USER_CHECK(t.ParseFromString(read_file(p))) << "cannot parse " << p.string();
  return kiln::graph::onnx_detail::tensor_to_ndarray(t, p.string());
}

double element(const NDArray& a, int64_t i) {
  return kiln::graph::onnx_detail::element_as_double(a, i);
}

/// Empty when equal within tolerance, else what differs.
std::string compare(const NDArray& got, const NDArray& want) {
  if (got.shape() != want.shape())
    return "shape " + got.shape_string() + " vs " + want.shape_string();
  if (!kiln::runtime::dtype_equal(got.dtype(), want.dtype())) {
    return "dtype " + kiln::runtime::dtype_to_string(got.dtype()) + " vs " +
           kiln::runtime::dtype_to_string(want.dtype());
  }
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    double g = element(got, i), w = element(want, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= 1e-5 + 1e-3 * std::fabs(w))) {
      return "element " + std::to_string(i) + ": " + std::to_string(g) + " vs " + std::to_string(w);
    }
  }
  return "";
}

enum class Outcome { kPassed, kFailed, kUnsupported };

struct Result {
  Outcome outcome;
  std::string detail;
};

/// The operator types of a model, e.g. "Conv" or "Add+Relu" (tests of function expansions).
std::string ops_of(const fs::path& dir) {
  onnx::ModelProto model;
  if (!model.ParseFromString(read_file(dir / "model.onnx"))) return "?";
  std::vector<std::string> ops;
  for (const auto& n : model.graph().node()) ops.push_back(n.op_type());
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  if (ops.size() > 3) return "(" + std::to_string(ops.size()) + " ops)";
  std::string s;
  for (auto& o : ops) s += (s.empty() ? "" : "+") + o;
  return s;
}

/// Imports with the graph inputs in `constant` bound to their test values.
kiln::graph::Graph import_with(const std::string& bytes, const std::string& origin,
                               const std::vector<std::string>& names,
                               const std::vector<NDArray>& values,
                               const std::vector<bool>& constant) {
  kiln::graph::OnnxImportOptions options;
  for (size_t i = 0; i < names.size(); ++i) {
    if (constant[i]) options.constant_inputs.emplace(names[i], values[i].copy());
  }
  return kiln::graph::import_onnx_bytes(bytes, origin, options);
}

Result run_test(const fs::path& dir) {
  const std::string bytes = read_file(dir / "model.onnx");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return {Outcome::kUnsupported, "unparsable model"};
  std::vector<std::string> input_names, output_names;
  std::vector<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.push_back(t.name());
  for (const auto& i : model.graph().input()) {
    if (std::find(initializers.begin(), initializers.end(), i.name()) == initializers.end()) {
      input_names.push_back(i.name());
    }
  }
  for (const auto& o : model.graph().output()) output_names.push_back(o.name());

  std::vector<fs::path> sets;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::kUnsupported, "no test data"};

  for (const fs::path& set : sets) {
    std::vector<NDArray> inputs, outputs;
    try {
      for (size_t i = 0; i < input_names.size(); ++i)
        inputs.push_back(load_tensor(set / ("input_" + std::to_string(i) + ".pb")));
      for (size_t i = 0; i < output_names.size(); ++i)
        outputs.push_back(load_tensor(set / ("output_" + std::to_string(i) + ".pb")));
    } catch (const kiln::Error& e) {
      return {Outcome::kUnsupported, std::string("test data: ") + e.what()};
    }
    // Parameters fed as inputs (Clip's bounds, Pad's pads, Reshape's shape): first none bound as
    // constants, then the integer inputs, then every input but the first.
    std::vector<std::vector<bool>> attempts;
    attempts.push_back(std::vector<bool>(input_names.size(), false));
    std::vector<bool> ints(input_names.size(), false);
    for (size_t i = 0; i < inputs.size(); ++i) ints[i] = inputs[i].dtype().code != kKilnFloat;
    attempts.push_back(ints);
    std::vector<bool> rest(input_names.size(), true);
    if (!rest.empty()) rest[0] = false;
    attempts.push_back(rest);
    std::string why;
    bool built = false;
    kiln::runtime::Bundle bundle;
    std::vector<bool> constant;
    for (const auto& attempt : attempts) {
      try {
        kiln::graph::Graph g =
            import_with(bytes, dir.filename().string(), input_names, inputs, attempt);
        bundle = kiln::graph::build_graph(g, "llvm");
        constant = attempt;
        built = true;
        break;
      } catch (const kiln::Error& e) {
        why = e.what();
      }
    }
    if (!built) return {Outcome::kUnsupported, why};
    try {
      auto exec =
          kiln::runtime::GraphExecutor::from_bundle(std::move(bundle), dir.filename().string());
      for (size_t i = 0; i < input_names.size(); ++i) {
        if (!constant[i]) exec.set_input(input_names[i], inputs[i]);
      }
      exec.run();
      for (size_t o = 0; o < exec.num_outputs(); ++o) {
        auto it = std::find(output_names.begin(), output_names.end(), exec.output_name(o));
        if (it == output_names.end())
          return {Outcome::kFailed, "unexpected output " + exec.output_name(o)};
        std::string diff = compare(exec.output(o), outputs[it - output_names.begin()]);
        if (!diff.empty()) return {Outcome::kFailed, exec.output_name(o) + ": " + diff};
      }
    } catch (const std::exception& e) {
      return {Outcome::kFailed, std::string("run: ") + e.what()};
    }
  }
  return {Outcome::kPassed, ""};
}

const kiln::cli::Program kProgram{
    .name = "onnx_node_tests",
    .operands = "[DATA_DIR]",
    .summary =
        "Runs the ONNX backend node tests through Kiln (DATA_DIR: default, those of the "
        "onnx package python3 imports).",
    .flags = {{"--filter", "SUBSTRING", "only the tests whose name holds it (default: all)"},
              {"--verbose", "", "also a line per passed test, and why each unsupported one is"}},
};

int run_tests(const kiln::cli::Args& args) {
  std::string data_dir = args.operands.empty() ? "" : args.only_operand("DATA_DIR");
  const std::string filter = args.get("--filter");
  const bool verbose = args.has("--verbose");
  if (data_dir.empty()) data_dir = default_data_dir();
  if (data_dir.empty() || !fs::is_directory(data_dir)) {
    std::cerr << "onnx_node_tests: no ONNX node test data found (pip install onnx==1.13.1, or pass "
                 "DATA_DIR)\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (auto& e : fs::directory_iterator(data_dir)) {
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos)
      tests.push_back(e.path());
  }
  std::sort(tests.begin(), tests.end());
  int passed = 0, failed = 0, unsupported = 0;
  std::map<std::string, std::array<int, 3>> table;  // per operator: passed, failed, unsupported
  for (const auto& t : tests) {
    Result r;
    try {
      r = run_test(t);
    } catch (const std::exception& e) {
      r = {Outcome::kFailed, std::string("unexpected: ") + e.what()};
    }
    const std::string name = t.filename().string();
    table[ops_of(t)][static_cast<int>(r.outcome)] += 1;
    if (r.outcome == Outcome::kPassed) {
      ++passed;
      if (verbose) std::printf("pass        %s\n", name.c_str());
    } else if (r.outcome == Outcome::kFailed) {
      ++failed;
      std::printf("FAIL        %s: %s\n", name.c_str(), r.detail.c_str());
    } else {
      ++unsupported;
      if (verbose)
        std::printf("unsupported %s: %s\n", name.c_str(), r.detail.substr(0, 160).c_str());
    }
    std::fflush(stdout);
  }
  // The operators Kiln takes at least one test of, then the totals.
  std::printf("%-28s %7s %7s %12s\n", "operator", "passed", "failed", "unsupported");
  for (const auto& [op, n] : table) {
    if (n[0] + n[1] > 0) std::printf("%-28s %7d %7d %12d\n", op.c_str(), n[0], n[1], n[2]);
  }
  int untouched = 0;
  for (const auto& [op, n] : table) untouched += n[0] + n[1] == 0 ? 1 : 0;
  std::printf("(%d more operator sets have only unsupported tests; --verbose lists why)\n",
              untouched);
  std::printf("case=onnx_node passed=%d failed=%d unsupported=%d\n", passed, failed, unsupported);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kProgram, argc, argv, run_tests); }
