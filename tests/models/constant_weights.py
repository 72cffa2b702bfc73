#!/usr/bin/env python3
"""A copy of an ONNX model whose floating-point weights are all one small constant.

    constant_weights.py IN.onnx OUT.onnx

For timing runs only (the fusion ablation on a GPU machine): the kernels' times do not depend on
the weights' values, and a bundle of constant weights compresses to almost nothing, so that every
model's fused and unfused bundles fit what can be carried to that machine. Integer initializers
(shapes, indices) are kept as they are.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    model = onnx.load(sys.argv[1])
    for i, init in enumerate(model.graph.initializer):
        w = numpy_helper.to_array(init)
        if np.issubdtype(w.dtype, np.floating):
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(np.full(w.shape, 0.01, dtype=w.dtype), init.name))
    onnx.save(model, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
