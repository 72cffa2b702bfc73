#!/usr/bin/env python3
"""ONNX Runtime's batch-1 latency of the whole-model benchmarks, for bench_models to compare with.

    python3 models_ref.py DIR --threads 1 2 [--min-time 1.0] [--only NAME ...]
                          [--model-suffix .qdq]

For each DIR/NAME.onnx (with DIR/NAME.<input>.npy for each graph input, as
tests/models/make_models.py and make_zoo.py write them; with --model-suffix S the model is
DIR/NAME<S>.onnx, the quantized one make_quantized.py writes beside NAME's inputs) and each thread count, one line
`NAME THREADS MS` on stdout: the median latency of one run, measured like Kiln's (two warm-up
runs, then single runs until at least --min-time seconds and 10 runs).
Sessions use the CPU execution provider, intra_op_num_threads=THREADS, inter_op_num_threads=1,
sequential execution and the default graph optimizations (ORT_ENABLE_ALL).
"""
import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

NAMES = ["resnet18", "mobilenetv2", "dqn", "dcgan", "lstm"]


def median_ms(fn, min_time):
    fn()
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--only", nargs="+", default=NAMES)
    ap.add_argument("--model-suffix", default="")
    args = ap.parse_args()
    for name in args.only:
        path = os.path.join(args.dir, name + args.model_suffix + ".onnx")
        for t in args.threads:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = t
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3  # no warnings on stdout's neighbour
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            feeds = {i.name: np.load(os.path.join(args.dir, "%s.%s.npy" % (name, i.name)))
                     for i in sess.get_inputs()}
            ms = median_ms(lambda: sess.run(None, feeds), args.min_time)
            print("%s %d %.6f" % (name, t, ms), flush=True)
            del sess


if __name__ == "__main__":
    sys.exit(main())
