// Whether a bundle the farm tuned for tests/common/small_cnn.h's model computes what a local
// `compile_onnx` of the same model computes (rtol 1e-4, atol 1e-5 on the output).
#pragma once

#include <fstream>
#include <string>

#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/small_cnn.h"
#include "tests/common/temp_dir.h"

namespace kiln::testing {

inline ::testing::AssertionResult small_cnn_bundle_matches_local(const TempDir& dir,
                                                                 const std::string& bundle_path,
                                                                 uint32_t input_seed) {
  std::ofstream(dir.file("cnn.onnx"), std::ios::binary) << small_cnn_model();
  graph::compile_onnx(dir.file("cnn.onnx"), "llvm", dir.file("local.kiln"));
  runtime::GraphExecutor fetched = runtime::GraphExecutor::load(bundle_path);
  runtime::GraphExecutor local = runtime::GraphExecutor::load(dir.file("local.kiln"));
  runtime::NDArray x = random_array({1, 8, 12, 12}, input_seed);
  fetched.set_input("x", x);
  local.set_input("x", x);
  fetched.run();
  local.run();
  return all_close(fetched.output(0), local.output(0).to_vector<float>(), 1e-4, 1e-5);
}

}  // namespace kiln::testing
