// The C++ side of `scripts/bench.sh python`: the time of one call of a bundle from C++, doing
// what kiln.Bundle.run does from Python (bind the input, run, read the output), back to back,
// for bench/python_overhead.py to set beside the same bundle run from Python.
//   bench_runtime_call BUNDLE INPUT.npy [--calls N] [--rounds R]
// prints "us_per_call=<median over the rounds of a round's mean>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "base/cli.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"

namespace {

int bench_main(const kiln::cli::Args& args) {
  using namespace kiln;
  const int calls = cli::positive_number(args.get("--calls", "2000"), "--calls");
  const int rounds = cli::positive_number(args.get("--rounds", "7"), "--rounds");
  if (args.operands.size() != 2) throw cli::UsageError("needs BUNDLE and INPUT.npy");
  runtime::GraphExecutor graph = runtime::GraphExecutor::load(args.operands[0]);
  const runtime::NDArray input = runtime::load_npy(args.operands[1]);
  double sink = 0;  // what the outputs' reads add up to, so that they are not optimized away
  auto call = [&] {
    graph.set_input(0, input);
    graph.run();
    sink += static_cast<const float*>(graph.output(0).data())[0];
  };
  for (int i = 0; i < calls / 10 + 1; ++i) call();  // warm-up
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - t0;
    per_call.push_back(us.count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  std::printf("us_per_call=%.3f\n", per_call[per_call.size() / 2]);
  if (sink == 0.123456) std::printf("\n");
  return 0;
}

const kiln::cli::Program kBench{
    .name = "bench_runtime_call",
    .operands = "BUNDLE INPUT.npy",
    .summary = "time a bundle's call from C++ (set_input, run, output), back to back",
    .flags = {{"--calls", "N", "runs per round (default: 2000)"},
              {"--rounds", "R", "rounds; the median round's mean is printed (default: 7)"}},
};

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, bench_main); }
