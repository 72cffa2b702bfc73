// A test model's inputs as make_zoo.py and make_models.py write them: DIR/NAME.<input>.npy for each
// graph input, named by the input (NAME.input.npy for a model whose one input is "input";
// NAME.input_ids.npy and NAME.attention_mask.npy for a text encoder), beside DIR/NAME.onnx and
// DIR/NAME.expected.npy (ONNX Runtime's first output). The .npy shapes are the shapes a model
// with symbolic dimensions is compiled for (what `kiln compile --input-shape` would say), so the
// zoo test and the benches bind every input from them rather than from a fixed shape. Shared by
// tests/models/zoo_test.cc and bench/model_timing.h; zoo_reference.py and bench/models_ref.py find
// the files the same way.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"

namespace kiln::model_inputs {

/// Every DIR/NAME.<input>.npy (<input> without a dot, not "expected"), by input name; kiln::Error
/// naming the folder and the model when there is none.
inline std::map<std::string, runtime::NDArray> load(const std::string& dir,
                                                    const std::string& name) {
  std::map<std::string, runtime::NDArray> inputs;
  const std::string prefix = name + ".", suffix = ".npy";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string f = entry.path().filename().string();
    if (f.size() <= prefix.size() + suffix.size() || f.compare(0, prefix.size(), prefix) != 0 ||
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string input = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    if (input == "expected" || input.find('.') != std::string::npos) continue;
    inputs.emplace(input, runtime::load_npy(entry.path().string()));
  }
  KILN_USER_CHECK(!inputs.empty())
      << "no input file " << dir << "/" << name << ".<input>.npy for model '" << name << "'";
  return inputs;
}

/// Import options that compile the model for the shapes of `inputs` (every input bound).
inline graph::OnnxImportOptions bind_shapes(const std::map<std::string, runtime::NDArray>& inputs) {
  graph::OnnxImportOptions options;
  for (const auto& [input, value] : inputs) options.input_shapes[input] = value.shape();
  return options;
}

}  // namespace kiln::model_inputs
