// plan_memory: liveness over the fused groups and greedy-by-size placement.
#include "compiler/graph/memory_plan.h"

#include <algorithm>
#include <set>

#include "base/error.h"

namespace kiln::graph {
namespace {

/// One intermediate: its lifetime [first, last] in group indices and its aligned size.
struct Tensor {
  ValueId value;
  size_t first, last;
  int64_t bytes;
};

/// The intermediates of `groups` in order of production, with their lifetimes.
std::vector<Tensor> intermediates(const Graph& graph, const std::vector<FusedGroup>& groups) {
  std::vector<Tensor> tensors;
  std::map<ValueId, size_t> index;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (ValueId in : groups[k].inputs) {
      auto it = index.find(in);
      if (it != index.end()) tensors[it->second].last = std::max(tensors[it->second].last, k);
    }
    for (ValueId out : groups[k].outputs) {
      if (graph.is_output(out)) continue;
      KILN_ICHECK(!index.count(out)) << "plan_memory: value %" << out << " produced twice";
      index[out] = tensors.size();
      tensors.push_back({out, k, k, aligned_bytes(graph.value(out))});
    }
  }
  return tensors;
}

bool lifetimes_intersect(const Tensor& a, const Tensor& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

int64_t aligned_bytes(const Value& value) {
  const int64_t bytes = value.num_elements() * runtime::dtype_bytes(value.dtype);
  return (bytes + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
}

MemoryPlan plan_memory(const Graph& graph, const std::vector<FusedGroup>& groups) {
  std::vector<Tensor> tensors = intermediates(graph, groups);
  MemoryPlan plan;
  if (tensors.empty()) return plan;
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });
  std::vector<int64_t> offset(tensors.size(), -1);
  std::vector<size_t> placed;
  int64_t pool = 0;
  for (size_t t : order) {
    const Tensor& cur = tensors[t];
    // Byte ranges of placed tensors alive with this one, by offset; take the first gap that fits.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t o : placed) {
      if (lifetimes_intersect(cur, tensors[o]) && tensors[o].bytes > 0) {
        busy.push_back({offset[o], offset[o] + tensors[o].bytes});
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (begin - at >= cur.bytes) break;
      at = std::max(at, end);
    }
    offset[t] = at;
    placed.push_back(t);
    pool = std::max(pool, at + cur.bytes);
    plan.bytes_without_reuse += cur.bytes;
  }
  plan.pool_bytes = {pool};
  plan.bytes_with_reuse = pool;
  for (size_t t = 0; t < tensors.size(); ++t) plan.placement[tensors[t].value] = {0, offset[t]};
  return plan;
}

void verify_memory_plan(const Graph& graph, const std::vector<FusedGroup>& groups,
                        const MemoryPlan& plan) {
  const std::vector<Tensor> tensors = intermediates(graph, groups);
  KILN_ICHECK(plan.placement.size() == tensors.size())
      << "memory plan: " << plan.placement.size() << " tensors placed, " << tensors.size()
      << " intermediates";
  int64_t total = 0;
  for (int64_t b : plan.pool_bytes) total += b;
  KILN_ICHECK(total == plan.bytes_with_reuse)
      << "memory plan: bytes_with_reuse " << plan.bytes_with_reuse << " != sum of pools " << total;
  std::vector<std::pair<int, int64_t>> where;
  for (const Tensor& t : tensors) {
    auto it = plan.placement.find(t.value);
    KILN_ICHECK(it != plan.placement.end())
        << "memory plan: intermediate '" << graph.value(t.value).name << "' is not placed";
    const auto [pool, offset] = it->second;
    KILN_ICHECK(pool >= 0 && static_cast<size_t>(pool) < plan.pool_bytes.size())
        << "memory plan: '" << graph.value(t.value).name << "' in pool " << pool;
    KILN_ICHECK(offset >= 0 && offset % kMemoryAlignment == 0 &&
                offset + t.bytes <= plan.pool_bytes[static_cast<size_t>(pool)])
        << "memory plan: '" << graph.value(t.value).name << "' at offset " << offset << " ("
        << t.bytes << " bytes) in pool " << pool << " of "
        << plan.pool_bytes[static_cast<size_t>(pool)] << " bytes";
    where.push_back(it->second);
  }
  for (size_t a = 0; a < tensors.size(); ++a) {
    for (size_t b = a + 1; b < tensors.size(); ++b) {
      if (!lifetimes_intersect(tensors[a], tensors[b]) || where[a].first != where[b].first) {
        continue;
      }
      const int64_t a0 = where[a].second, a1 = a0 + tensors[a].bytes;
      const int64_t b0 = where[b].second, b1 = b0 + tensors[b].bytes;
      KILN_ICHECK(a1 <= b0 || b1 <= a0 || tensors[a].bytes == 0 || tensors[b].bytes == 0)
          << "memory plan: '" << graph.value(tensors[a].value).name << "' [" << a0 << ", " << a1
          << ") and '" << graph.value(tensors[b].value).name << "' [" << b0 << ", " << b1
          << ") overlap while both are live (groups " << tensors[a].first << ".." << tensors[a].last
          << " and " << tensors[b].first << ".." << tensors[b].last << ")";
    }
  }
}

}  // namespace kiln::graph
