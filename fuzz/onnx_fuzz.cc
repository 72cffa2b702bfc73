// Fuzz target: ONNX models (compiler/graph/onnx_frontend.h) through the graph build up to task
// extraction, as `kiln compile`, `kiln tune` and a farm job's driver read them: import, the graph
// passes (constants folded through the JIT, batch norms, weight packing, layout), fusion, and every
// fused group lowered to its scheduled tensor program. Code generation (compiler::lower and LLVM)
// is left out: it would make each run a hundred times slower, and it sees only what lowering made.
// A model is refused with kiln::Error or gets its tasks; anything else is a bug.
// Inputs over kMaxModelBytes, and models with a value of more than kMaxElements elements (the
// passes would compute big constants at build time), are skipped: their cost is not a defect.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"

namespace {

constexpr size_t kMaxModelBytes = size_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 22;

bool small_enough(const kiln::graph::Graph& g) {
  for (size_t v = 0; v < g.num_values(); ++v) {
    const kiln::graph::Value& value = g.value(static_cast<kiln::graph::ValueId>(v));
    if (!value.typed) continue;
    int64_t n = 1;
    for (int64_t d : value.shape) {
      if (d > 0 && n > kMaxElements / d) return false;
      n *= d;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxModelBytes) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const kiln::graph::Graph g = kiln::graph::import_onnx_bytes(bytes, "fuzz.onnx");
    if (!small_enough(g)) return 0;
    kiln::graph::extract_tasks(g, "llvm -mcpu=x86-64-v4");
  } catch (const kiln::Error&) {
  }
  return 0;
}
