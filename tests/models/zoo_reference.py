#!/usr/bin/env python3
"""Writes ONNX Runtime's output for each zoo model make_zoo.py exported: NAME.expected.npy.

    python3 zoo_reference.py DIR [--only NAME ...]

Runs under the python that has onnx and onnxruntime (scripts/setup.sh's pip packages), apart from
make_zoo.py, whose torch lives in Debian's /usr/bin/python3. Every DIR/NAME.onnx with a
NAME.input.npy is checked with onnx.checker and run by the CPU execution provider with graph
optimizations disabled (the reference is the model as written, not ORT's rewrite of it).
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    names = args.only or sorted(os.path.basename(p)[:-len(".input.npy")]
                                for p in glob.glob(os.path.join(args.dir, "*.input.npy")))
    if not names:
        print("zoo_reference.py: no NAME.input.npy in %s" % args.dir, file=sys.stderr)
        return 1
    for name in names:
        path = os.path.join(args.dir, name + ".onnx")
        onnx.checker.check_model(path)
        x = np.load(os.path.join(args.dir, name + ".input.npy"))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, {sess.get_inputs()[0].name: x})
        np.save(os.path.join(args.dir, name + ".expected.npy"), np.asarray(out, np.float32))
        print("%s: output %s, max|y| %.3g" % (name, list(out.shape), float(np.abs(out).max())),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
