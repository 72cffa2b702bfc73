// Kernels against the roofline (kernel_efficiency.h).
#include "deploy/runtime/kernel_efficiency.h"

#include <algorithm>

#include "base/shape_string.h"

namespace kiln::runtime {

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::kCompute:
      return "compute";
    case Bound::kMemory:
      return "memory";
    case Bound::kUnknown:
      break;
  }
  return "-";
}

std::vector<KernelEfficiency> kernel_efficiency(const std::vector<GraphExecutor::NodeTime>& times,
                                                const MachinePeak& peak) {
  double total = 0;
  for (const auto& t : times) total += t.median_ms;
  std::vector<KernelEfficiency> out;
  for (const auto& t : times) {
    KernelEfficiency k;
    k.func = t.func;
    k.node = t.name;
    k.ops = t.work.ops;
    k.shapes = t.work.shapes;
    k.ms = t.median_ms;
    k.share = total > 0 ? t.median_ms / total : 0;
    k.flops = t.work.flops;
    k.bytes = t.work.bytes;
    const double seconds = t.median_ms / 1e3;
    if (seconds > 0 && k.flops) {
      k.gflops = *k.flops / seconds / 1e9;
      k.peak_fraction = *k.flops / seconds / peak.flops;
    }
    if (seconds > 0 && k.bytes) {
      k.gbytes_per_s = *k.bytes / seconds / 1e9;
      k.bandwidth_fraction = *k.bytes / seconds / peak.bytes_per_s;
    }
    if (k.flops && k.bytes) {
      const double compute_ms = *k.flops / peak.flops * 1e3;
      const double memory_ms = *k.bytes / peak.bytes_per_s * 1e3;
      // flops / bytes >= balance exactly when the compute roof is the slower one.
      k.bound = compute_ms >= memory_ms ? Bound::kCompute : Bound::kMemory;
      k.roof_ms = std::max(compute_ms, memory_ms);
      k.lost_ms = k.ms - *k.roof_ms;
      if (k.ms > 0) k.efficiency = *k.roof_ms / k.ms;
    }
    out.push_back(std::move(k));
  }
  return out;
}

bool loses_more(const KernelEfficiency& a, const KernelEfficiency& b) {
  if (!a.lost_ms || !b.lost_ms) return a.lost_ms.has_value() && !b.lost_ms.has_value();
  return *a.lost_ms > *b.lost_ms;
}

std::string shapes_text(const KernelEfficiency& k) {
  std::string s;
  for (const auto& shape : k.shapes) s += (s.empty() ? "" : " ") + shape_string(shape);
  return s;
}

}  // namespace kiln::runtime
