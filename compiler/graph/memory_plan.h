// Static memory planning with storage reuse (the paper's section 3, "memory reuse"): each fused
// group's output that is not a graph output is an intermediate tensor; tensors whose lifetimes do
// not overlap share memory.
//
//   time (group index)   0    1    2    3    4
//   %a = g0(x)           [====]                      %a, %c share bytes [0, 64k)
//   %b = g1(%a)               [====]                 %b, %d share bytes [64k, 128k)
//   %c = g2(%b)                    [====]
//   %d = g3(%c)                         [====]
//   out = g4(%d)                                     (graph output: not planned)
//
// Liveness: a tensor is live from the group that writes it through the last group that reads it
// (inclusive; a group's inputs and output are live together, nothing is computed in place); a
// tensor no group reads lives during its own group only.
//
// Placement: greedy by size into one pool (pool 0), as TFLite's arena planner does: tensors are
// taken largest first (ties: earliest first), and each goes at the lowest 64-byte-aligned offset
// where it overlaps no already placed tensor whose lifetime intersects its own. On a chain of equal
// tensors this uses two tensors' worth; in general it is within a small factor of the peak of live
// bytes and never more than bytes_without_reuse.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "compiler/graph/fuse.h"
#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Every offset and size is a multiple of this.
inline constexpr int64_t kMemoryAlignment = 64;

struct MemoryPlan {
  /// Size of each storage pool in bytes (one pool, or none when there is no intermediate).
  std::vector<int64_t> pool_bytes;
  /// Each intermediate tensor's (pool index, byte offset).
  std::map<ValueId, std::pair<int, int64_t>> placement;
  /// Sum of the intermediates' aligned sizes: the memory one buffer per tensor needs.
  int64_t bytes_without_reuse = 0;
  /// Sum of pool_bytes.
  int64_t bytes_with_reuse = 0;
};

/// A tensor's size rounded up to kMemoryAlignment.
int64_t aligned_bytes(const Value& value);

/// Plans the intermediates of `groups` (fuse_ops's result for `graph`, in topological order).
MemoryPlan plan_memory(const Graph& graph, const std::vector<FusedGroup>& groups);

/// Checks `plan` against the lifetimes: every intermediate placed at an aligned offset inside its
/// pool, nothing else placed, and no two tensors live at the same time overlapping. Throws
/// kiln::InternalError naming the two tensors otherwise.
void verify_memory_plan(const Graph& graph, const std::vector<FusedGroup>& groups,
                        const MemoryPlan& plan);

}  // namespace kiln::graph
