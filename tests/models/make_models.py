#!/usr/bin/env python3
"""Writes the whole-model test set: NAME.onnx, NAME.input.npy and NAME.expected.npy per model.

    python3 make_models.py OUT_DIR [--only NAME]

The models follow the paper's evaluation (ResNet-18, MobileNetV2, the Nature DQN, a DCGAN generator,
an LSTM language model), plus convt_odd (transposed convolutions of odd shapes), written with
onnx.helper the way PyTorch's exporter emits them (opset 13, float32). Weights are random with fixed seeds and He-like scales, and batch norms get random
positive variances, so activations stay O(1) through the depth and the comparison is meaningful.
The expected output is ONNX Runtime's (CPUExecutionProvider, graph optimizations disabled).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class Builder:
    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return "%s_%d" % (prefix, self.count)

    def const(self, prefix, array):
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op, inputs, prefix=None, **attrs):
        out = self.fresh(prefix or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out

    def weight(self, shape, fan_in, gain=2.0):
        return (self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)).astype(np.float32)

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=False, gain=2.0):
        fan_in = (cin // group) * k * k
        w = self.const("conv_w", self.weight((cout, cin // group, k, k), fan_in, gain))
        inputs = [x, w]
        if bias:
            inputs.append(self.const("conv_b", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return self.node("Conv", inputs, "conv", kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group, dilations=[1, 1])

    def bn(self, x, c):
        r = self.rng
        scale = self.const("bn_scale", r.uniform(0.5, 1.5, c).astype(np.float32))
        bias = self.const("bn_bias", (r.standard_normal(c) * 0.1).astype(np.float32))
        mean = self.const("bn_mean", (r.standard_normal(c) * 0.1).astype(np.float32))
        var = self.const("bn_var", r.uniform(0.5, 1.5, c).astype(np.float32))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], "bn", epsilon=1e-5,
                         momentum=0.9)

    def relu(self, x):
        return self.node("Relu", [x], "relu")

    def relu6(self, x):
        if not hasattr(self, "_clip_bounds"):
            self._clip_bounds = (self.const("clip_min", np.array(0.0, np.float32)),
                                 self.const("clip_max", np.array(6.0, np.float32)))
        return self.node("Clip", [x, *self._clip_bounds], "clip")

    def gemm(self, x, nin, nout, gain=1.0):
        w = self.const("fc_w", self.weight((nout, nin), nin, gain))
        b = self.const("fc_b", (self.rng.standard_normal(nout) * 0.1).astype(np.float32))
        return self.node("Gemm", [x, w, b], "gemm", alpha=1.0, beta=1.0, transB=1)

    def model(self, inp, in_shape, out, out_shape, in_type=TensorProto.FLOAT):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(inp, in_type, in_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-tests")
        m.ir_version = 7
        onnx.checker.check_model(m)
        return m


def resnet18():
    b = Builder("resnet18", 18)
    x = "input"
    y = b.relu(b.bn(b.conv(x, 3, 64, 7, 2, 3), 64))
    y = b.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            h = b.relu(b.bn(b.conv(y, cin, cout, 3, stride, 1), cout))
            # The second conv of a residual branch and the downsample get half the He scale (like
            # zero-init-residual, less extreme) so the sums stay O(1) through eight blocks.
            h = b.bn(b.conv(h, cout, cout, 3, 1, 1, gain=0.5), cout)
            sc = y
            if stride != 1 or cin != cout:
                sc = b.bn(b.conv(y, cin, cout, 1, stride, 0, gain=0.5), cout)
            y = b.relu(b.node("Add", [h, sc], "add"))
            cin = cout
    y = b.node("GlobalAveragePool", [y], "gap")
    y = b.node("Flatten", [y], "flatten", axis=1)
    y = b.gemm(y, 512, 1000)
    return b.model(x, [1, 3, 224, 224], y, [1, 1000]), [1, 3, 224, 224]


def mobilenetv2():
    b = Builder("mobilenetv2", 2)
    x = "input"
    y = b.relu6(b.bn(b.conv(x, 3, 32, 3, 2, 1), 32))
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            h = y
            if t != 1:
                h = b.relu6(b.bn(b.conv(h, cin, hidden, 1), hidden))
            h = b.relu6(b.bn(b.conv(h, hidden, hidden, 3, stride, 1, group=hidden), hidden))
            h = b.bn(b.conv(h, hidden, c, 1, gain=1.0), c)
            if stride == 1 and cin == c:
                h = b.node("Add", [y, h], "add")
            y = h
            cin = c
    y = b.relu6(b.bn(b.conv(y, cin, 1280, 1), 1280))
    y = b.node("GlobalAveragePool", [y], "gap")
    y = b.node("Flatten", [y], "flatten", axis=1)
    y = b.gemm(y, 1280, 1000)
    return b.model(x, [1, 3, 224, 224], y, [1, 1000]), [1, 3, 224, 224]


def dqn():
    b = Builder("dqn", 4)
    x = "input"
    y = b.relu(b.conv(x, 4, 32, 8, 4, 0, bias=True))
    y = b.relu(b.conv(y, 32, 64, 4, 2, 0, bias=True))
    y = b.relu(b.conv(y, 64, 64, 3, 1, 0, bias=True))
    y = b.node("Flatten", [y], "flatten", axis=1)
    y = b.relu(b.gemm(y, 3136, 512, gain=2.0))
    y = b.gemm(y, 512, 18)
    return b.model(x, [1, 4, 84, 84], y, [1, 18]), [1, 4, 84, 84]


def dcgan():
    b = Builder("dcgan", 64)
    x = "input"
    shape = b.const("shape", np.array([1, 100, 1, 1], np.int64))
    y = b.node("Reshape", [x, shape], "reshape")
    cin = 100
    for i, cout in enumerate([512, 256, 128, 64, 3]):
        stride, pad = (1, 0) if i == 0 else (2, 1)
        # ConvTranspose weight is [in, out, kh, kw]; each output sees about in*k*k/stride^2 inputs.
        fan_in = cin * 16 // (stride * stride)
        w = b.const("convt_w", b.weight((cin, cout, 4, 4), fan_in))
        y = b.node("ConvTranspose", [y, w], "convt", kernel_shape=[4, 4], strides=[stride, stride],
                   pads=[pad] * 4, dilations=[1, 1], group=1)
        if cout == 3:
            y = b.node("Tanh", [y], "tanh")
        else:
            y = b.relu(b.bn(y, cout))
        cin = cout
    return b.model(x, [1, 100], y, [1, 3, 64, 64]), [1, 100]


def convt_odd():
    """Transposed convolutions of the shapes a DCGAN lacks, each with a batch norm (folded into its
    weight) and an activation: stride 3 with output_padding and uneven pads, two groups with
    dilation 2 and a bias, a 1-D stride-2 layer, a stride-1 3x3 with a channel count no panel of 16
    divides (4 * 9 GEMM columns per group)."""
    b = Builder("convt_odd", 77)

    def convt(y, cin, cout, k, group=1, bias=False, **attrs):
        fan_in = cin * int(np.prod(k)) // group
        w = b.const("convt_w", b.weight((cin, cout // group, *k), fan_in))
        inputs = [y, w]
        if bias:
            inputs.append(b.const("convt_b", (b.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return b.node("ConvTranspose", inputs, "convt", kernel_shape=list(k), group=group, **attrs)

    x = "input"  # [1, 6, 5, 7]
    y = b.relu(b.bn(convt(x, 6, 16, (4, 5), strides=[3, 3], pads=[2, 1, 1, 2],
                          output_padding=[1, 2]), 16))  # -> [1, 16, 14, 22]
    y = b.relu(b.bn(convt(y, 16, 12, (3, 3), group=2, bias=True, strides=[2, 2], pads=[1, 1, 1, 1],
                          dilations=[2, 2], output_padding=[1, 0]), 12))  # -> [1, 12, 30, 45]
    y = b.node("Tanh", [b.bn(convt(y, 12, 4, (3, 3), pads=[1, 1, 1, 1]), 4)], "tanh")  # same size
    shape = b.const("shape", np.array([1, 4, 30 * 45], np.int64))
    y = b.node("Reshape", [y, shape], "reshape")
    y = b.relu(b.bn(convt(y, 4, 8, (4,), strides=[2], pads=[1, 2]), 8))  # -> [1, 8, 2699]
    return b.model(x, [1, 6, 5, 7], y, [1, 8, 2699]), [1, 6, 5, 7]


def lstm():
    b = Builder("lstm", 35)
    seq, vocab, hid = 35, 10000, 650
    x = "input"
    emb = b.const("embedding", (b.rng.standard_normal((vocab, hid)) * 0.5).astype(np.float32))
    y = b.node("Gather", [emb, x], "embed", axis=0)  # [35, 1, 650]
    scale = 1.0 / np.sqrt(hid)
    for layer in range(2):
        w = b.const("lstm_W", b.rng.uniform(-scale, scale, (1, 4 * hid, hid)).astype(np.float32))
        r = b.const("lstm_R", b.rng.uniform(-scale, scale, (1, 4 * hid, hid)).astype(np.float32))
        bias = b.const("lstm_B", b.rng.uniform(-scale, scale, (1, 8 * hid)).astype(np.float32))
        y = b.node("LSTM", [y, w, r, bias], "lstm", hidden_size=hid, direction="forward")
        axes = b.const("axes", np.array([1], np.int64))
        y = b.node("Squeeze", [y, axes], "squeeze")  # [35, 1, 1, 650] -> [35, 1, 650]
    dec_w = b.const("decoder_w", b.weight((hid, vocab), hid, 1.0))
    dec_b = b.const("decoder_b", (b.rng.standard_normal(vocab) * 0.1).astype(np.float32))
    y = b.node("MatMul", [y, dec_w], "decoder")
    y = b.node("Add", [y, dec_b], "logits")
    return b.model(x, [seq, 1], y, [seq, 1, vocab], TensorProto.INT64), None


MODELS = {"resnet18": resnet18, "mobilenetv2": mobilenetv2, "dqn": dqn, "dcgan": dcgan, "lstm": lstm,
          "convt_odd": convt_odd}
# Each model's input seed is its place here: new models go at the end, so the others keep theirs.
INPUT_SEED_ORDER = ["dcgan", "dqn", "lstm", "mobilenetv2", "resnet18", "convt_odd"]


def make_input(name, shape):
    rng = np.random.default_rng(1000 + INPUT_SEED_ORDER.index(name))
    if name == "lstm":
        return rng.integers(0, 10000, size=(35, 1), dtype=np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", action="append", choices=sorted(MODELS))
    ap.add_argument("--no-expected", action="store_true", help="skip running ONNX Runtime")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only or list(MODELS):
        model, shape = MODELS[name]()
        path = os.path.join(args.out_dir, name + ".onnx")
        onnx.save(model, path)
        x = make_input(name, shape)
        np.save(os.path.join(args.out_dir, name + ".input.npy"), x)
        if args.no_expected:
            continue
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, {sess.get_inputs()[0].name: x})
        np.save(os.path.join(args.out_dir, name + ".expected.npy"), np.asarray(out, np.float32))
        print("%s: output %s, max|y| %.3g, std %.3g" % (name, list(out.shape), np.abs(out).max(),
                                                        out.std()), file=sys.stderr)


if __name__ == "__main__":
    main()
