// The workspace allocator (workspace.h).
#include "deploy/runtime/workspace.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace kiln::runtime {
namespace {

constexpr uint64_t kAlignment = 64;

struct Block {
  void* ptr;
  uint64_t bytes;
};

/// One thread's blocks: those handed out and those kept for the next request.
struct Workspace {
  std::vector<Block> live, kept;
  uint64_t kept_bytes = 0;

  ~Workspace() {
    for (const Block& b : kept) std::free(b.ptr);
  }

  void* alloc(uint64_t bytes) {
    bytes = std::max<uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    auto best = kept.end();
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->bytes >= bytes && (best == kept.end() || it->bytes < best->bytes)) best = it;
    }
    Block b{nullptr, bytes};
    if (best != kept.end()) {
      b = *best;
      kept_bytes -= best->bytes;
      kept.erase(best);
    } else {
      b.ptr = std::aligned_alloc(kAlignment, bytes);
      if (b.ptr == nullptr) return nullptr;
    }
    live.push_back(b);
    return b.ptr;
  }

  void release(void* ptr) {
    if (ptr == nullptr) return;
    auto it =
        std::find_if(live.rbegin(), live.rend(), [&](const Block& b) { return b.ptr == ptr; });
    if (it == live.rend()) {  // not ours (cannot happen with generated code): the system's
      std::free(ptr);
      return;
    }
    kept.push_back(*it);
    kept_bytes += it->bytes;
    live.erase(std::next(it).base());
    // Over the limit: the largest kept blocks go back to the system first.
    while (kept_bytes > kMaxKeptWorkspaceBytes && !kept.empty()) {
      auto largest = std::max_element(kept.begin(), kept.end(), [](const Block& a, const Block& b) {
        return a.bytes < b.bytes;
      });
      kept_bytes -= largest->bytes;
      std::free(largest->ptr);
      kept.erase(largest);
    }
  }
};

Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

}  // namespace

uint64_t kept_workspace_bytes() { return workspace().kept_bytes; }

}  // namespace kiln::runtime

extern "C" void* kiln_workspace_alloc(uint64_t bytes) {
  return kiln::runtime::workspace().alloc(bytes);
}

extern "C" void kiln_workspace_free(void* block) { kiln::runtime::workspace().release(block); }
