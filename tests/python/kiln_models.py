"""Small ONNX models for the Python package's tests, made with onnx.helper, and their reference
outputs from ONNX Runtime."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_relu(channels: int = 8, size: int = 16, batch="N") -> onnx.ModelProto:
    """x: float32[batch, 3, size, size] -> Relu(Conv(x, w, b)) (3x3, pad 1): one tunable task."""
    rng = np.random.default_rng(7)
    w = rng.uniform(-1, 1, (channels, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, (channels,)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(
        nodes, "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, size, size])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def two_convs(size: int = 16) -> onnx.ModelProto:
    """x: float32[1, 3, size, size] -> Conv(Relu(Conv(x))): the first convolution's output feeds
    the second, so quantizing makes it an integer convolution."""
    rng = np.random.default_rng(11)
    w1 = rng.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32)
    w2 = rng.uniform(-0.5, 0.5, (4, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(
        nodes, "two_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, size, size])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def two_inputs() -> onnx.ModelProto:
    """a: float32[4, 8], bias: float32[16] (default: an initializer of the same name) ->
    MatMul(a, w) + bias, and an int64 output: ArgMax over the last axis."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (8, 16)).astype(np.float32)
    bias = np.full((16,), 0.5, np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["y"]),
             helper.make_node("ArgMax", ["y"], ["k"], axis=1, keepdims=0)]
    g = helper.make_graph(
        nodes, "two_inputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


TINY_IN, TINY_OUT = 64, 32  # the tiny model: y = x @ w + b, x [1, 64], y [1, 32]


def make_tiny_model(name: str = "tiny", k: int = TINY_IN, n: int = TINY_OUT):
    """An onnx.ModelProto of y = x @ w + b (MatMul + Add, opset 13): one dense task, tuned with
    trials=4 in a few seconds. Its weights are fixed (seeded), so the same arguments give the
    same model."""
    rng = np.random.RandomState(k * 1000 + n)
    w = numpy_helper.from_array(rng.randn(k, n).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.randn(n).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def reference(model: onnx.ModelProto, feeds: dict) -> list:
    """ONNX Runtime's outputs for `feeds`."""
    import onnxruntime as ort

    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)
