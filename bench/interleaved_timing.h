// Timing kernels against a reference on a shared machine, for the benchmarks that compare Kiln
// with oneDNN: functions timed in turns, so that load from other processes falls on all alike, and
// the load average to print beside the figures.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

namespace kiln::bench {

/// Seconds per call of one function timed by interleaved_times.
struct Timing {
  double median = NAN;      ///< over all the timed calls
  double best_round = NAN;  ///< the lowest of the rounds' medians
};

/// Seconds per call of each of `fs`, timed in turns: `rounds` rounds, in each of which every
/// function runs (after two warm-ups before the first round) single timed calls for at least
/// min_time / rounds seconds and 2 calls. In all each gets at least min_time seconds and 10 calls.
/// Taking turns means that both sides see the same load when the machine is shared; the best
/// round's median is the figure least disturbed by other processes.
inline std::vector<Timing> interleaved_times(const std::vector<std::function<void()>>& fs,
                                             double min_time, int rounds = 5) {
  std::vector<std::vector<double>> all(fs.size());
  std::vector<Timing> out(fs.size());
  for (const auto& f : fs) {
    f();
    f();
  }
  for (int r = 0; r < rounds ||
                  std::any_of(all.begin(), all.end(), [](const auto& t) { return t.size() < 10; });
       ++r) {
    for (size_t i = 0; i < fs.size(); ++i) {
      std::vector<double> round;
      auto start = std::chrono::steady_clock::now();
      while (round.size() < 2 ||
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
                 min_time / rounds) {
        auto t0 = std::chrono::steady_clock::now();
        fs[i]();
        round.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      all[i].insert(all[i].end(), round.begin(), round.end());
      std::sort(round.begin(), round.end());
      const double m = round[round.size() / 2];
      if (!(out[i].best_round <= m)) out[i].best_round = m;
    }
  }
  for (size_t i = 0; i < fs.size(); ++i) {
    std::sort(all[i].begin(), all[i].end());
    out[i].median = all[i][all[i].size() / 2];
  }
  return out;
}

/// The 1-minute load average (other work on the machine disturbs two-thread timings).
inline double load_average() {
  double l = NAN;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = NAN;
    std::fclose(f);
  }
  return l;
}

}  // namespace kiln::bench
