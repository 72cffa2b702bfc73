// Reading a tuning curve (the best throughput after each measurement, in order).
#pragma once

#include <vector>

namespace kiln::bench {

/// The first 1-based trial at which `curve` reaches `target`; `never` when it does not.
inline int trials_to(const std::vector<double>& curve, double target, int never) {
  for (size_t i = 0; i < curve.size(); ++i)
    if (curve[i] >= target) return static_cast<int>(i) + 1;
  return never;
}

}  // namespace kiln::bench
