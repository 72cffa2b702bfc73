#!/usr/bin/env python3
"""Dynamically quantized models, as onnxruntime.quantization.quantize_dynamic writes them, with
their inputs and ONNX Runtime's outputs.

    python3 make_dynamic_quant.py OUT_DIR [--only NAME ...] [--venv DIR] [--list]

For each model: make_zoo.py exports the float network of the wide set (Debian's torch,
KILN_TORCH_PYTHON or /usr/bin/python3) into OUT_DIR/float/, quantize_dynamic rewrites it into
OUT_DIR/NAME.onnx (uint8 activations by DynamicQuantizeLinear, int8 weights per tensor, MatMul
as MatMulInteger -> Cast -> Mul(x_scale * w_scale) [-> Add bias], embeddings' Gather on int8
tables -> DequantizeLinear), its inputs are copied to OUT_DIR/NAME.<input>.npy and ONNX Runtime's
first output (CPU provider, graph optimizations off: the model as written) goes to
OUT_DIR/NAME.expected.npy, as zoo_reference.py does for the zoo (tests/models/model_inputs.h reads
them), and the float model's to OUT_DIR/float/<float name>.expected.npy.

The models: bert_base_dynamic (wide_families.py's BERT-base-like encoder, sequence 128: the
bench), bert_tiny_dynamic (its tiny version, for the test), lstm_classifier_dynamic and
lstm_classifier_small_dynamic (the recurrent classifier), unet_small_dynamic and
audio_cnn_m5_small_dynamic (convolutions as ConvInteger, 2-D and 1-D). quantize_dynamic turns an LSTM into
com.microsoft's DynamicQuantizeLSTM, an operator of ONNX Runtime's own domain; the LSTM
classifiers are quantized without it (op_types_to_quantize leaves LSTM out), so they keep the
standard LSTM in float and quantize their embedding and classifier.

ONNX Runtime's quantization tools need a newer onnx than the 1.13 the node tests pin, plus
ml_dtypes and sympy: they run in quant_venv.py's virtual environment, --venv (default
build/quant-venv under the repository root), made with pip on first use.
Never committed. Weights and inputs come from make_zoo.py's seeds, so the files are the same on
every run.
"""
import argparse
import os
import shutil
import subprocess
import sys

import quant_venv

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (the wide set's float model, the operator types quantize_dynamic may rewrite; None: its
# defaults)
MODELS = {
    "bert_base_dynamic": ("bert_base", None),
    "bert_tiny_dynamic": ("bert_tiny", None),
    # Without LSTM, which would become com.microsoft's DynamicQuantizeLSTM.
    "lstm_classifier_dynamic": ("lstm_classifier", ["MatMul", "Gemm", "Gather"]),
    "lstm_classifier_small_dynamic": ("lstm_classifier_small", ["MatMul", "Gemm", "Gather"]),
    # Convolutions become ConvInteger: a 2-D UNet (its transposed convolutions stay float) and a
    # 1-D audio CNN.
    "unet_small_dynamic": ("unet_small", None),
    "audio_cnn_m5_small_dynamic": ("audio_cnn_m5_small", None),
}


def export_float(out_dir, names):
    """make_zoo.py's float models `names` into out_dir/float/."""
    torch_python = os.environ.get("KILN_TORCH_PYTHON", "/usr/bin/python3")
    float_dir = os.path.join(out_dir, "float")
    cmd = [torch_python, os.path.join(HERE, "make_zoo.py"), float_dir, "--set", "wide"]
    for n in sorted(set(MODELS[n][0] for n in names)):
        cmd += ["--only", n]
    subprocess.run(cmd, check=True)
    return float_dir


def quantize(out_dir, names):
    """Runs in the venv: quantize_dynamic each float model, copy its inputs, write ORT's output."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    float_dir = os.path.join(out_dir, "float")
    for name in names:
        base, op_types = MODELS[name]
        src = os.path.join(float_dir, base + ".onnx")
        dst = os.path.join(out_dir, name + ".onnx")
        kwargs = {"weight_type": QuantType.QInt8, "per_channel": False, "reduce_range": False}
        if op_types is not None:
            kwargs["op_types_to_quantize"] = op_types
        quantize_dynamic(src, dst, **kwargs)
        onnx.checker.check_model(dst)
        model = onnx.load(dst)
        foreign = sorted({"%s (%s)" % (n.op_type, n.domain) for n in model.graph.node
                          if n.domain not in ("", "ai.onnx")})
        if foreign:
            sys.exit("make_dynamic_quant.py: %s holds operators outside the ONNX domain: %s"
                     % (name, ", ".join(foreign)))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(dst, opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in sess.get_inputs():
            x = os.path.join(float_dir, "%s.%s.npy" % (base, i.name))
            shutil.copyfile(x, os.path.join(out_dir, "%s.%s.npy" % (name, i.name)))
            feeds[i.name] = np.load(x)
        out = sess.run(None, feeds)[0]
        np.save(os.path.join(out_dir, name + ".expected.npy"), np.asarray(out, np.float32))
        # The float model's output beside it, for comparing the two (bench/int8_dynamic_bench.cc).
        fsess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
        np.save(os.path.join(float_dir, base + ".expected.npy"),
                np.asarray(fsess.run(None, feeds)[0], np.float32))
        counts = {}
        for n in model.graph.node:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
        print("%s: output %s, max|y| %.3g; %s" % (
            name, list(out.shape), float(np.abs(out).max()),
            ", ".join("%s %d" % kv for kv in sorted(counts.items()))), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", action="append", metavar="NAME")
    ap.add_argument("--venv", default=quant_venv.DEFAULT,
                    help="the virtual environment for onnxruntime's quantization tools")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.list:
        print(" ".join(MODELS))
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    for n in args.only or []:
        if n not in MODELS:
            ap.error("no model '%s' (names: %s)" % (n, " ".join(MODELS)))
    names = args.only or list(MODELS)
    if args.in_venv:
        quantize(args.out_dir, names)
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    py = quant_venv.ensure(args.venv)
    export_float(args.out_dir, names)
    cmd = [py, os.path.abspath(__file__), args.out_dir, "--in-venv"]
    for n in names:
        cmd += ["--only", n]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
