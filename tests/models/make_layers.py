#!/usr/bin/env python3
"""Writes single-layer models, one per layer shape the wide zoo found slow: NAME.onnx,
NAME.input.npy and NAME.expected.npy per layer (the layout of make_models.py, so that
bench/models_ref.py times them).

    python3 make_layers.py OUT_DIR [--only NAME ...] [--no-expected]
    python3 make_layers.py --list

The layers, at batch 1 and the sizes the networks have them (opset 13, float32, random weights):
  dil_*      3x3 convolutions with dilation: DeepLabV3's atrous pyramid (rates 12, 24, 36 on a
             16x16 map of 2048 channels, where most taps land in the padding) and its dilated
             backbone (rates 2 and 4 on a 32x32 map), next to the same conv undilated (dil_r1_*).
  conv1d_*   1-D convolutions [N, C, T] of audio models: a Whisper-like front end (80 -> 384
             channels over 3000 frames, then a stride-2 one), an M5-like first layer (1 channel,
             a kernel of 80, stride 4), a residual block's k=3, a pointwise k=1 and a depthwise k=31
             (a conformer's).
  matmul_*   MatMul against a constant 2-D weight (a bias-free nn.Linear): a language model's
             head [1, T, 192] x [192, 5000] (3-D), the same 2-D, a single token, and a batch-8
             feed-forward [8, 50, 768] x [768, 3072].
The expected output is ONNX Runtime's (CPUExecutionProvider, graph optimizations disabled).
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def model(name, x_shape, w, make_node, bias=None):
    """A one-node graph: input 'input' of x_shape, the weight (and bias) as initializers."""
    inits = [numpy_helper.from_array(w, "weight")]
    inputs = ["input", "weight"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "bias"))
        inputs.append("bias")
    node = make_node(inputs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="kiln-make-layers")
    m.ir_version = 7
    return m


def conv(name, cin, cout, size, k, stride=1, dil=1, pad=None, group=1, bias=True, seed=0):
    """Conv over an input [1, cin, *size] (1-D or 2-D) with a k (x k) kernel."""
    rng = np.random.default_rng(seed)
    dims = len(size)
    if pad is None:
        pad = dil * (k - 1) // 2
    w_shape = (cout, cin // group) + (k,) * dims
    fan_in = (cin // group) * k**dims
    w = (rng.standard_normal(w_shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32) if bias else None
    return model(name, [1, cin] + list(size), w,
                 lambda ins: helper.make_node("Conv", ins, ["output"], kernel_shape=[k] * dims,
                                              strides=[stride] * dims, dilations=[dil] * dims,
                                              pads=[pad] * (2 * dims), group=group), b)


def matmul(name, x_shape, k, n, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) * np.sqrt(1.0 / k)).astype(np.float32)
    return model(name, list(x_shape), w,
                 lambda ins: helper.make_node("MatMul", ins, ["output"]))


LAYERS = {
    # DeepLabV3's atrous pyramid: 2048 -> 256 channels on a 16x16 map, no bias (a batch norm
    # follows, folded into the weights).
    "dil_r12_16": lambda: conv("dil_r12_16", 2048, 256, (16, 16), 3, dil=12, bias=False),
    "dil_r24_16": lambda: conv("dil_r24_16", 2048, 256, (16, 16), 3, dil=24, bias=False),
    "dil_r36_16": lambda: conv("dil_r36_16", 2048, 256, (16, 16), 3, dil=36, bias=False),
    "dil_r1_16": lambda: conv("dil_r1_16", 2048, 256, (16, 16), 3, bias=False),
    # The dilated backbone (ResNet layers 3 and 4 at output stride 8 of a 256x256 image).
    "dil_r2_32": lambda: conv("dil_r2_32", 256, 256, (32, 32), 3, dil=2),
    "dil_r4_32": lambda: conv("dil_r4_32", 512, 512, (32, 32), 3, dil=4),
    "dil_r1_32": lambda: conv("dil_r1_32", 256, 256, (32, 32), 3),
    # 1-D convolutions.
    "conv1d_front": lambda: conv("conv1d_front", 80, 384, (3000,), 3),
    "conv1d_front_s2": lambda: conv("conv1d_front_s2", 384, 384, (3000,), 3, stride=2),
    "conv1d_m5": lambda: conv("conv1d_m5", 1, 128, (8000,), 80, stride=4, pad=0),
    "conv1d_k3": lambda: conv("conv1d_k3", 128, 128, (1000,), 3),
    "conv1d_k1": lambda: conv("conv1d_k1", 256, 512, (500,), 1),
    "conv1d_dw31": lambda: conv("conv1d_dw31", 256, 256, (500,), 31, group=256),
    # MatMul against a constant weight.
    "matmul_head3d": lambda: matmul("matmul_head3d", (1, 64, 192), 192, 5000),
    "matmul_head2d": lambda: matmul("matmul_head2d", (64, 192), 192, 5000),
    "matmul_token": lambda: matmul("matmul_token", (1, 1, 192), 192, 5000),
    "matmul_ffn_b8": lambda: matmul("matmul_ffn_b8", (8, 50, 768), 768, 3072),
}


def flops(m):
    """Multiply-adds x 2 of the layer's one node (for GFLOP/s)."""
    g = m.graph
    w = numpy_helper.to_array(g.initializer[0])
    x = [d.dim_value for d in g.input[0].type.tensor_type.shape.dim]
    node = g.node[0]
    if node.op_type == "MatMul":
        return 2 * int(np.prod(x)) * w.shape[1]
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    out = 1
    for i, size in enumerate(x[2:]):
        extent = a["dilations"][i] * (w.shape[2 + i] - 1) + 1
        out *= (size + a["pads"][i] + a["pads"][i + len(x) - 2] - extent) // a["strides"][i] + 1
    return 2 * out * int(np.prod(w.shape))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", action="append", choices=sorted(LAYERS))
    ap.add_argument("--list", action="store_true",
                    help="print each layer's name and its flops (2 x multiply-adds)")
    ap.add_argument("--no-expected", action="store_true", help="skip running ONNX Runtime")
    args = ap.parse_args()
    if args.list:
        for name, make in LAYERS.items():
            print(name, flops(make()))
        return
    if not args.out_dir:
        ap.error("give OUT_DIR (or --list)")
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only or list(LAYERS):
        m = LAYERS[name]()
        path = os.path.join(args.out_dir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.save(os.path.join(args.out_dir, name + ".input.npy"), x)
        if args.no_expected:
            continue
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, {"input": x})
        np.save(os.path.join(args.out_dir, name + ".expected.npy"), np.asarray(out, np.float32))


if __name__ == "__main__":
    sys.exit(main())
