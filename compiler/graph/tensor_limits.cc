// tensor_size_problem: the element count in 64-bit arithmetic, each product checked.
#include "compiler/graph/tensor_limits.h"

#include <cstdio>

#include "base/error.h"
#include "base/shape_string.h"

namespace kiln::graph {
namespace {

/// "4.0 TiB", "12.5 GiB", "3.0 MiB", "12 bytes".
std::string format_bytes(double bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(static_cast<int64_t>(bytes)) + " bytes";
  int u = -1;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", bytes, units[u]);
  return text;
}

}  // namespace

std::string tensor_size_problem(const std::vector<int64_t>& shape, KilnDType dtype) {
  const std::string limit = "more than the " + std::to_string(kMaxTensorElements) +
                            " (2^31 - 1) a tensor may hold (kernels index with 32-bit integers)";
  int64_t count = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return "has shape " + shape_string(shape, ",") + ": a negative dimension";
    overflow = overflow || __builtin_mul_overflow(count, d, &count);
  }
  // A zero dimension makes the tensor empty whatever the others multiply to.
  for (int64_t d : shape) {
    if (d == 0) return "";
  }
  if (overflow) {
    return "has shape " + shape_string(shape, ",") + ": more than 2^63 elements, " + limit;
  }
  if (count <= kMaxTensorElements) return "";
  const double bytes =
      static_cast<double>(count) * static_cast<double>(runtime::dtype_bytes(dtype));
  return "has shape " + shape_string(shape, ",") + ": " + std::to_string(count) + " elements (" +
         format_bytes(bytes) + " of " + runtime::dtype_to_string(dtype) + "), " + limit;
}

void check_tensor_sizes(const Graph& g) {
  auto check = [&](ValueId v, const std::string& what) {
    const Value& val = g.value(v);
    if (!val.typed) return;
    const std::string why = tensor_size_problem(val.shape, val.dtype);
    KILN_USER_CHECK(why.empty()) << "graph build: " << what << " '" << val.name << "' " << why;
  };
  for (ValueId v : g.inputs()) check(v, "graph input");
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.inputs) {
      if (v != kNoValue && g.value(v).is_constant())
        check(v, "node '" + n.name + "' reads constant");
    }
    for (ValueId v : n.outputs) {
      if (v != kNoValue) check(v, "node '" + n.name + "' (" + n.op + "): output");
    }
  }
}

}  // namespace kiln::graph
