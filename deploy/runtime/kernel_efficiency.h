// How close each kernel of a profiled run comes to what the machine can do: the roofline model
// applied to GraphExecutor::profile's entries. A kernel's work (flops and minimum bytes, from the
// bundle's graph) and its median time give its GFLOP/s and GB/s; its arithmetic intensity (flops
// per byte) against the machine's balance point (machine_peak.h) says which roof bounds it
// (compute: the cores' measured FMA rate; memory: the measured bandwidth); its time at that roof
// is max(flops / peak, bytes / bandwidth), and what it loses is its time minus that.
//
//   std::vector<GraphExecutor::NodeTime> times = graph.profile(20);
//   auto rows = kernel_efficiency(times, machine_peak());
//   std::sort(rows.begin(), rows.end(), loses_more);  // the least efficient by what they cost
//
// A kernel whose data stays in cache can beat the memory roof (efficiency above 1, negative lost
// time): the roof is DRAM's bandwidth, the honest floor for a kernel that streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/machine_peak.h"

namespace kiln::runtime {

enum class Bound { kUnknown, kCompute, kMemory };

/// "compute", "memory", or "-" when the bundle does not say the kernel's work.
const char* bound_name(Bound b);

/// One kernel of a profile, measured against the machine.
struct KernelEfficiency {
  std::string func;  ///< the compiled function
  std::string node;  ///< the graph node (a fused kernel's master)
  std::string ops;   ///< the fused operators, "Conv+Add+Relu" (empty in older bundles)
  std::vector<std::vector<int64_t>> shapes;  ///< its tensors' shapes, inputs then outputs
  double ms = 0;                             ///< median time of one call
  double share = 0;                          ///< of the sum of all kernels' times (0..1)
  std::optional<double> flops, bytes;        ///< per call (none: the bundle does not say)
  std::optional<double> gflops;              ///< flops / time, in 1e9 per second
  std::optional<double> gbytes_per_s;        ///< bytes / time, in 1e9 per second
  std::optional<double> peak_fraction;       ///< of the machine's FLOP/s
  std::optional<double> bandwidth_fraction;  ///< of the machine's bandwidth
  Bound bound = Bound::kUnknown;             ///< by intensity against the balance point
  std::optional<double> roof_ms;             ///< its time at the roof that bounds it
  std::optional<double> efficiency;          ///< roof_ms / ms: the fraction of its roof it reaches
  std::optional<double> lost_ms;             ///< ms - roof_ms
};

/// Each entry of `times` against `peak`, in the same order. Needs both flops and bytes for the
/// bound, roof, efficiency and lost time; GFLOP/s and GB/s each need their own figure.
std::vector<KernelEfficiency> kernel_efficiency(const std::vector<GraphExecutor::NodeTime>& times,
                                                const MachinePeak& peak);

/// Orders kernels by the time they lose above their roofs, most first; those whose work is unknown
/// last (in their order: sort with std::stable_sort to keep it).
bool loses_more(const KernelEfficiency& a, const KernelEfficiency& b);

/// A kernel's tensors' shapes in argument order, space-separated: "[1, 64, 56, 56] [64] ...".
std::string shapes_text(const KernelEfficiency& k);

}  // namespace kiln::runtime
