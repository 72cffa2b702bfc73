"""`scripts/bench.sh python`: what calling a bundle from Python costs over calling it from C++.

The DQN (a tiny model, so the call's own cost shows) is compiled once; then kiln.Bundle.run from
Python and bench_runtime_call (the same work from C++: set_input, run, read the output) time the
same bundle on the same input, in alternating turns, each the median of its rounds. Two processes
running the same code differ by up to ~10% here (where their memory lands, how the pool's threads
are placed), more than the overhead itself; so the overhead is measured in one process: rounds of
Bundle.run (bind the input, run, return new arrays) against rounds of the bare GraphExecutor::run
(the input bound once), interleaved, the median of their differences. Prints
  case=python_overhead_dqn us_per_call=<python> cxx_us=<c++ process> overhead_us=<in process>
    overhead_pct=<of the run> goal_us=<max(5, 2% of c++)>
Usage: python_overhead.py BUILD_DIR (the release build, with kiln_python and bench_runtime_call)
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
sys.path.insert(0, os.path.join(build, "python"))
import numpy as np  # noqa: E402

import kiln  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS, ROUNDS, TURNS = 2000, 9, 5

with tempfile.TemporaryDirectory(prefix="kiln-bench-python-") as tmp:
    subprocess.run([sys.executable, os.path.join(root, "tests/models/make_models.py"), tmp,
                    "--only", "dqn", "--no-expected"], check=True, stdout=subprocess.DEVNULL)
    bundle_path = kiln.compile(os.path.join(tmp, "dqn.onnx"), progress=False).save(
        os.path.join(tmp, "dqn.kiln"))
    x = np.load(os.path.join(tmp, "dqn.input.npy"))
    b = kiln.Bundle(bundle_path)

    def python_round() -> float:
        t0 = time.perf_counter()
        for _ in range(CALLS):
            b.run(x)
        return (time.perf_counter() - t0) / CALLS * 1e6

    bare = b._exec  # the GraphExecutor behind the Bundle

    def bare_round() -> float:
        bare.set_input(0, x)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            bare.run()
        return (time.perf_counter() - t0) / CALLS * 1e6

    for _ in range(CALLS // 10):
        b.run(x)  # warm-up
    py, cxx, diffs = [], [], []
    for _ in range(TURNS):
        pairs = [(python_round(), bare_round()) for _ in range(ROUNDS)]
        py.append(statistics.median(p for p, _ in pairs))
        diffs += [p - r for p, r in pairs]
        out = subprocess.run([os.path.join(build, "bench", "bench_runtime_call"), bundle_path,
                              os.path.join(tmp, "dqn.input.npy"), "--calls", str(CALLS),
                              "--rounds", str(ROUNDS)], check=True, capture_output=True,
                             text=True).stdout
        cxx.append(float(out.strip().split("=")[1]))

py_us, cxx_us = statistics.median(py), statistics.median(cxx)
overhead = statistics.median(diffs)
print(f"case=python_overhead_dqn us_per_call={py_us:.2f} cxx_us={cxx_us:.2f} "
      f"overhead_us={overhead:.2f} overhead_pct={100 * overhead / (py_us - overhead):.1f} "
      f"goal_us={max(5.0, 0.02 * cxx_us):.2f}")
