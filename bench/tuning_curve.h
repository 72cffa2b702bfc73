// Reading tuning curves (the best throughput after each measurement, in order) and their counts.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::bench {

/// The first 1-based trial at which `curve` reaches `target`; `never` when it does not.
inline int trials_to(const std::vector<double>& curve, double target, int never) {
  for (size_t i = 0; i < curve.size(); ++i)
    if (curve[i] >= target) return static_cast<int>(i) + 1;
  return never;
}

/// The median (of an even count, the mean of the middle two); NaN for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace kiln::bench
