#!/usr/bin/env python3
"""Writes ONNX Runtime's output for each zoo model make_zoo.py exported: NAME.expected.npy.

    python3 zoo_reference.py DIR [--only NAME ...]

Runs under the python that has onnx and onnxruntime (scripts/setup.sh's pip packages), apart from
make_zoo.py, whose torch lives in Debian's /usr/bin/python3. Every DIR/NAME.onnx is checked with onnx.checker and run by the CPU execution provider with graph
optimizations disabled (the reference is the model as written, not ORT's rewrite of it), each
graph input fed from DIR/NAME.<input name>.npy (tests/models/model_inputs.h); the first output is
kept.
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def model_inputs(d, name, sess):
    """{input name: array} from d/NAME.<input name>.npy for each of the session's inputs."""
    feeds = {}
    for i in sess.get_inputs():
        path = os.path.join(d, "%s.%s.npy" % (name, i.name))
        if not os.path.exists(path):
            sys.exit("zoo_reference.py: %s: no file %s for input '%s'" % (name, path, i.name))
        feeds[i.name] = np.load(path)
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    names = args.only or sorted(os.path.basename(p)[:-len(".onnx")]
                                for p in glob.glob(os.path.join(args.dir, "*.onnx")))
    if not names:
        print("zoo_reference.py: no NAME.onnx in %s" % args.dir, file=sys.stderr)
        return 1
    for name in names:
        path = os.path.join(args.dir, name + ".onnx")
        onnx.checker.check_model(path)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        out = sess.run(None, model_inputs(args.dir, name, sess))[0]
        np.save(os.path.join(args.dir, name + ".expected.npy"), np.asarray(out, np.float32))
        print("%s: output %s, max|y| %.3g" % (name, list(out.shape), float(np.abs(out).max())),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
