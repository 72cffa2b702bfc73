#!/usr/bin/env python3
"""Statically quantized reference models, made the way most users make them: a float network
exported by torch, quantized by ONNX Runtime's `quantize_static` (QDQ form, per-channel int8
weights, uint8 activations from MinMax calibration over a few seeded random inputs).

    python3 make_quantized.py OUT_DIR [--only NAME ...] [--venv DIR] [--torch-python PY]

Models: resnet50 and mobilenet_v2 (torchvision, random weights and batch-norm statistics as
make_zoo.py sets them) and `small_qdq`, a few convolutions with a residual Add, MaxPool,
GlobalAveragePool and a Gemm, for a fast test (two outputs: the last feature map, 2048 elements,
and the logits). Per model NAME it writes

    NAME.onnx            the float model (torch.onnx.export, opset 13, batch 1)
    NAME.qdq.onnx        its QDQ model (quantize_static)
    NAME.input.npy       an input that took no part in the calibration
    NAME.ort_int8.npy    ONNX Runtime's output of the QDQ model on it (its int8 kernels: all
                         graph optimizations, so the QDQ groups run as QLinearConv and kin)
    NAME.ort_lsb.npy     the output's quantization step (the scale of its last DequantizeLinear)
    NAME.ort_int8.K.npy, NAME.ort_lsb.K.npy   the same for output K >= 1 (small_qdq's second)

Two Pythons: the export runs under Debian's torch (/usr/bin/python3, or --torch-python, or
KILN_TORCH_PYTHON), the quantization in quant_venv.py's virtual environment (--venv, default
build/quant-venv).
The script re-runs itself under each (its hidden --stage flag).
"""
import argparse
import os
import subprocess
import sys

import quant_venv

MODELS = ("small_qdq", "resnet50", "mobilenet_v2")
HERE = os.path.dirname(os.path.abspath(__file__))
CALIBRATION_SAMPLES = 4


def export_stage(out_dir, names):
    """Under Debian's torch: NAME.onnx and NAME.input.npy (make_zoo.py's export: seeded weights,
    random batch-norm statistics) and NAME.calib<i>.npy, the calibration inputs."""
    import numpy as np
    import torch
    import torchvision

    sys.path.insert(0, HERE)
    import make_zoo  # noqa: E402  (beside this script)

    class SmallQdq(torch.nn.Module):
        """Two stages of convolutions with a residual Add, pools and a Gemm: each pattern the
        int8 rewrite handles, small enough for a unit-speed test."""

        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, 2, 1),
                                            torch.nn.BatchNorm2d(16), torch.nn.ReLU())
            self.pool = torch.nn.MaxPool2d(3, 2, 1)
            self.a = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, 1, 1), torch.nn.ReLU(),
                                         torch.nn.Conv2d(16, 16, 3, 1, 1))
            self.dw = torch.nn.Conv2d(16, 16, 3, 2, 1, groups=16)
            self.pw = torch.nn.Conv2d(16, 32, 1)
            self.fc = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = self.pool(self.stem(x))
            x = torch.relu(x + self.a(x))
            f = torch.relu(self.pw(torch.relu(self.dw(x))))
            return f, self.fc(torch.nn.functional.adaptive_avg_pool2d(f, 1).flatten(1))

    specs = {
        "small_qdq": make_zoo.Spec(SmallQdq, 13, make_zoo.image(1, 64)),
        "resnet50": make_zoo.Spec(lambda: torchvision.models.resnet50(weights=None), 13),
        "mobilenet_v2": make_zoo.Spec(lambda: torchvision.models.mobilenet_v2(weights=None), 13),
    }
    for name in names:
        spec = specs[name]
        make_zoo.export(name, spec, out_dir)
        shape = spec.inputs[0][2]
        gen = np.random.default_rng(2828)
        for i in range(CALIBRATION_SAMPLES):
            np.save(os.path.join(out_dir, "%s.calib%d.npy" % (name, i)),
                    gen.standard_normal(shape).astype(np.float32))
        print("exported", name, flush=True)


def quantize_stage(out_dir, names):
    """In the venv: NAME.qdq.onnx by quantize_static, and ORT's int8 output on NAME.input.npy."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q

    class Reader(q.CalibrationDataReader):
        def __init__(self, name, input_name):
            self.feeds = iter([{input_name: np.load(os.path.join(out_dir, "%s.calib%d.npy" %
                                                                 (name, i)))}
                               for i in range(CALIBRATION_SAMPLES)])

        def get_next(self):
            return next(self.feeds, None)

    for name in names:
        fp32 = os.path.join(out_dir, name + ".onnx")
        qdq = os.path.join(out_dir, name + ".qdq.onnx")
        input_name = onnx.load(fp32).graph.input[0].name
        q.quantize_static(fp32, qdq, Reader(name, input_name), quant_format=q.QuantFormat.QDQ,
                          per_channel=True, activation_type=q.QuantType.QUInt8,
                          weight_type=q.QuantType.QInt8,
                          calibrate_method=q.CalibrationMethod.MinMax)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
        x = np.load(os.path.join(out_dir, name + ".input.npy"))
        outs = sess.run(None, {input_name: x})
        model = onnx.load(qdq)
        inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
        for k, (out, info) in enumerate(zip(outs, model.graph.output)):
            suffix = ".npy" if k == 0 else ".%d.npy" % k
            np.save(os.path.join(out_dir, name + ".ort_int8" + suffix), out)
            # The output is DequantizeLinear(y_q, scale): one step of y_q is `scale`.
            last = [n for n in model.graph.node if n.output[0] == info.name][0]
            if last.op_type != "DequantizeLinear":
                raise SystemExit("make_quantized.py: %s: output %s comes from %s, not a "
                                 "DequantizeLinear" % (name, info.name, last.op_type))
            np.save(os.path.join(out_dir, name + ".ort_lsb" + suffix),
                    np.asarray(inits[last.input[1]], np.float32))
        print("quantized", name, "ORT", ort.__version__, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--venv", default=quant_venv.DEFAULT,
                    help="the quantization tools' virtual environment (default build/quant-venv)")
    ap.add_argument("--torch-python", default=os.environ.get("KILN_TORCH_PYTHON",
                                                             "/usr/bin/python3"))
    ap.add_argument("--stage", choices=("export", "quantize"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    if a.stage == "export":
        return export_stage(a.out_dir, a.only)
    if a.stage == "quantize":
        return quantize_stage(a.out_dir, a.only)
    me = os.path.abspath(__file__)
    subprocess.run([a.torch_python, me, a.out_dir, "--stage", "export", "--only", *a.only],
                   check=True)
    py = quant_venv.ensure(a.venv)
    subprocess.run([py, me, a.out_dir, "--stage", "quantize", "--only", *a.only], check=True)


if __name__ == "__main__":
    main()
