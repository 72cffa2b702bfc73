#!/usr/bin/env python3
"""A statically quantized model (make_quantized.py's small_qdq: onnxruntime's quantize_static,
QDQ, per-channel int8 weights, uint8 activations) through the kiln binary against ONNX Runtime's
int8 kernels.

    python3 int8_static_test.py KILN MODELS_DIR WORK_DIR

- `kiln compile` realizes all of its 5 convolutions as ConvInteger and its Gemm as MatMulInteger
  (none left float), and its outputs (the last feature map and the logits, 2058 elements) are
  within 1 LSB (each output's quantization step) of ORT's on at least 99.9% of the elements (the residual Add and the pools run float between their QDQ
  pairs; ORT's QLinearAdd and QLinearGlobalAveragePool round differently there);
- the same model with a zero in a weight's scales, and with a per-channel scale one too long, is
  refused naming the node, the scale and the values.
Prints the measured agreement.
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import kiln_cli_check
from kiln_cli_check import check, failures

KILN, MODELS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)


def kiln(*args, expect=0):
    return kiln_cli_check.kiln(KILN, *args, expect=expect)


def main():
    qdq = os.path.join(MODELS, "small_qdq.qdq.onnx")
    x = os.path.join(MODELS, "small_qdq.input.npy")
    model = onnx.load(qdq)
    names = [o.name for o in model.graph.output]

    bundle = os.path.join(WORK, "small_qdq.kiln")
    log = kiln("compile", qdq, "-o", bundle)
    check("5 quantized convolutions as ConvInteger and 1 products as MatMulInteger" in log,
          "all 5 convolutions and the Gemm realized as integer products: %s"
          % re.findall(r"\d+ quantized convolutions as ConvInteger.*", log))
    check("stays float" not in log, "nothing left float: %s" % re.findall(r"stays float.*", log))
    out = os.path.join(WORK, "out")
    kiln("run", bundle, "--input", x, "-o", out)
    steps = []  # |Kiln - ORT| in the output's quantization steps, every output's elements
    for k, name in enumerate(names):
        suffix = ".npy" if k == 0 else ".%d.npy" % k
        ref = np.load(os.path.join(MODELS, "small_qdq.ort_int8" + suffix))
        lsb = float(np.load(os.path.join(MODELS, "small_qdq.ort_lsb" + suffix)))
        y = np.load(os.path.join(out, name + ".npy"))
        check(y.shape == ref.shape, "output %s's shape %s, ORT's %s" % (name, y.shape, ref.shape))
        steps.append((np.abs(y - ref) / lsb).ravel())
    steps = np.concatenate(steps)
    within = float(np.mean(steps <= 1.001))
    print("     within 1 LSB of ORT: %.5f of %d elements (max %.2f LSB, exact %.5f)"
          % (within, steps.size, steps.max(), float(np.mean(steps < 1e-3))))
    check(within >= 0.999, "within 1 LSB of ORT on >= 99.9%% of elements (%.5f)" % within)

    # Bad scales, named: the first convolution's weight scales.
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    dq = next(n for n in model.graph.node if n.output[0] == conv.input[1])
    init = next(i for i in model.graph.initializer if i.name == dq.input[1])
    scales = numpy_helper.to_array(init).copy()

    def refused(values, name, *wanted):
        init.CopyFrom(numpy_helper.from_array(values.astype(np.float32), init.name))
        path = os.path.join(WORK, name + ".onnx")
        onnx.save(model, path)
        err = kiln("compile", path, "-o", os.path.join(WORK, name + ".kiln"), expect=1)
        check(all(w in err for w in wanted), "%s refused naming %s: %s"
              % (name, wanted, err.strip().splitlines()[-1:]))

    zero = scales.copy()
    zero[1] = 0
    refused(zero, "zero_scale", "'%s'" % init.name, "holds 0", "at index 1")
    refused(np.append(scales, 1.0), "long_scale", "'%s'" % init.name,
            "has %d scales" % (scales.size + 1), "%d elements along axis 0" % scales.size)
    if failures:
        raise SystemExit("%d failed: %s" % (len(failures), failures))


if __name__ == "__main__":
    main()
