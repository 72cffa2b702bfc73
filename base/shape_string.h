// A shape as messages, listings and the graph's text print it: "[1, 3, 224, 224]", or with
// separator "," the compact "[1,3,224,224]" of graph text and ONNX import messages; "[]" for a
// scalar.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

/// The dimensions in brackets, `separator` between them.
inline std::string shape_string(std::span<const int64_t> dims, std::string_view separator = ", ") {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += separator;
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

}  // namespace kiln
