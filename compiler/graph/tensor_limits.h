// How large one tensor of a graph may be, and the one check of it. Kernels index tensors with
// 32-bit integers (the loop IR's int32 indices and extents), so a tensor holds at most 2^31 - 1
// elements: 8 GiB of float32, more than any layer of a real network holds. Element counts are
// computed in 64 bits with overflow checks before anything is allocated, so a shape such as
// [2^40, 2^40] is refused rather than wrapped into a small or negative size.
//
//   if (std::string why = tensor_size_problem(shape, dtype); !why.empty())
//     fail("output 'y' " + why);  // "has shape [1048576,1048576]: 1099511627776 elements ..."
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {

/// The most elements one tensor may hold: 2^31 - 1.
inline constexpr int64_t kMaxTensorElements = 2147483647;

/// Empty when a tensor of `shape` and `dtype` may exist; otherwise why not, as the end of a
/// sentence naming the tensor: "has shape [1099511627776]: 1099511627776 elements (4.0 TiB of
/// float32), more than the 2147483647 (2^31 - 1) a tensor may hold (kernels index with 32-bit
/// integers)".
std::string tensor_size_problem(const std::vector<int64_t>& shape, KilnDType dtype);

/// kiln::Error naming the first value of `g` (with the node that computes it, or as a graph input
/// or constant) that tensor_size_problem refuses: the build's check of a graph built by hand; the
/// ONNX importer checks each value as it types it.
void check_tensor_sizes(const Graph& g);

}  // namespace kiln::graph
