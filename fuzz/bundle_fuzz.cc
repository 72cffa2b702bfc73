// Fuzz target: bundle files (deploy/runtime/bundle.h) and the executor's graph inside them
// (GraphExecutor::from_parts), as `kiln run` reads them. Each input is read twice: as it is, and
// with its checksum made right, so that mutations reach the sections, the parameters and the
// graph JSON behind it. A bundle read is then made into an executor over an in-memory module
// (nothing fuzzed is ever dlopen'ed) whose functions write every byte of every tensor they are
// given, and run once: a tensor placed outside its pool is an AddressSanitizer report. A GPU
// bundle's device section is read and checked with the rest (DeviceProgram::from_json and the
// checks across programs) but never loaded on a device: its graph runs over the same module.
// Graphs asking for more than kMaxGraphBytes of tensors are skipped (the executor would allocate
// them; their size is the user's to choose, not a defect).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/json.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/module.h"

namespace {

using kiln::Json;

constexpr int64_t kMaxGraphBytes = int64_t{64} << 20;

/// A kernel of any arity: writes all of each tensor argument (its shape and dtype say how much).
int32_t touch_all(const KilnArg* args, int32_t num_args, const char** /*error*/) {
  for (int32_t i = 0; i < num_args; ++i) {
    const KilnTensor* t = args[i].tensor;
    int64_t bytes = kiln::runtime::dtype_bytes(t->dtype);
    for (int32_t d = 0; d < t->ndim; ++d) bytes *= t->shape[d];
    if (bytes > 0) std::memset(t->data, 0x5a, static_cast<size_t>(bytes));
  }
  return 0;
}

/// Functions "k1" ... "k8": touch_all with that many tensor arguments.
class TouchModule : public kiln::runtime::ModuleNode {
 public:
  void* symbol(const std::string& name) override {
    if (name.size() == 2 && name[0] == 'k' && name[1] >= '1' && name[1] <= '8') {
      return reinterpret_cast<void*>(&touch_all);
    }
    const std::string sig = "__kiln_sig_k";
    if (name.size() == sig.size() + 1 && name.compare(0, sig.size(), sig) == 0) {
      const char n = name.back();
      if (n >= '1' && n <= '8') return const_cast<char*>(kSignatures[n - '1']);
    }
    return nullptr;
  }
  std::string kind() const override { return "fuzz"; }

 private:
  static constexpr const char* kSignatures[8] = {"t",     "tt",     "ttt",     "tttt",
                                                 "ttttt", "tttttt", "ttttttt", "tttttttt"};
};

/// Whether the tensors and pools `graph_json` declares hold at most kMaxGraphBytes in all;
/// true when it is not even JSON of that form (the executor will say what is wrong).
bool small_enough(const std::string& graph_json) {
  Json g;
  try {
    g = Json::parse(graph_json, "graph");
  } catch (const kiln::Error&) {
    return true;
  }
  if (!g.is_object()) return true;
  int64_t total = 0;
  auto add = [&](int64_t bytes) {
    if (bytes < 0) return;
    total = bytes > kMaxGraphBytes - total ? kMaxGraphBytes + 1 : total + bytes;
  };
  try {
    if (g.has("storage")) {
      for (const Json& s : g.at("storage", "").as_array("")) {
        if (s.has("bytes")) add(s.at("bytes", "").as_int(""));
      }
    }
    if (g.has("tensors")) {
      for (const Json& t : g.at("tensors", "").as_array("")) {
        if (!t.has("shape")) continue;
        int64_t bytes = 8;  // the widest element
        for (const Json& d : t.at("shape", "").as_array("")) {
          const int64_t v = d.as_int("");
          if (v <= 0) {
            bytes = 0;
            break;
          }
          bytes = v > kMaxGraphBytes / bytes ? kMaxGraphBytes + 1 : bytes * v;
        }
        add(bytes);
      }
    }
  } catch (const kiln::Error&) {
    return true;
  }
  return total <= kMaxGraphBytes;
}

void run_bundle(const std::string& bytes) {
  kiln::runtime::Bundle b;
  try {
    b = kiln::runtime::deserialize_bundle(bytes, "fuzz.kiln");
  } catch (const kiln::Error&) {
    return;
  }
  if (!small_enough(b.graph_json)) return;
  try {
    auto exec = kiln::runtime::GraphExecutor::from_parts(
        b.graph_json, std::move(b.params),
        kiln::runtime::Module::from_node(std::make_shared<TouchModule>()), "fuzz.kiln");
    exec.run();
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  run_bundle(bytes);
  // The same with the checksum (the 8 bytes before the end marker) made to match.
  if (bytes.size() >= 32) {
    const uint64_t sum = kiln::fnv1a64(bytes.data(), bytes.size() - 16);
    std::memcpy(bytes.data() + bytes.size() - 16, &sum, sizeof sum);
    run_bundle(bytes);
  }
  return 0;
}
