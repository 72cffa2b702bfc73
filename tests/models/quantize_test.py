#!/usr/bin/env python3
"""int8 quantization end to end, through the kiln binary, against ONNX Runtime.

    python3 quantize_test.py KILN WORK_DIR ops|resnet18

ops: QuantizeLinear / DequantizeLinear (per tensor and per axis, int8 and uint8, with and without
zero points) imported and run by Kiln equal ORT's (quantized values exactly, dequantized ones to
1e-6); a QDQ convolution (groups, stride 2, per-channel weights, bias, relu or not; power-of-two
scales, shifts out of QConv's range, any float scale) is realized as ConvInteger with ONNX
Runtime's requantization and stays within 1 LSB of ORT; QLinearConv and QLinearMatMul are
realized as ConvInteger and MatMulInteger within 1 LSB; a QuantizeLinear with an int16 zero
point is refused naming the node and input.

resnet18 (slow): the test ResNet-18 (tests/models/make_models.py) quantized by `kiln quantize`
with 4 seeded calibration inputs (float scales, the default); the QDQ model passes onnx.checker
and runs in ORT; Kiln's build of it (all 20 convolutions as ConvInteger) matches ORT on it to 5%
of the largest output with the same top-1, and ORT's float model to 10% with the same top-1;
`kiln compile --quantize int8` builds the same bundle's outputs bit for bit; quantized again with
`--scales pow2`, `kiln compile --target vdla` offloads 19 of its 20 convolutions (the first has 3
input channels) and matches ORT on that model as closely (its bit-exactness with the host's QConv
is vdla_offload_test's); one run on one thread takes under 2 s; a calibration file of the wrong
shape and a missing --calibrate are refused. Prints the measured figures.
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln_cli_check
from kiln_cli_check import check, failures

KILN, WORK = sys.argv[1], sys.argv[2]


def kiln(*args, expect=0):
    return kiln_cli_check.kiln(KILN, *args, expect=expect)


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def kiln_run(path, inputs, name):
    """Compiles `path`, runs it on `inputs` (a list of .npy paths); returns the outputs by name
    and the compiler's stderr."""
    bundle = os.path.join(WORK, name + ".kiln")
    log = kiln("compile", path, "-o", bundle, "--target", "llvm")
    out = os.path.join(WORK, name + ".out")
    args = ["run", bundle, "-o", out]
    for i in inputs:
        args += ["--input", i]
    kiln(*args)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}, log


def save(model, name):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    return path


def model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def qdq_ops():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 4, 5, 6)) * 3).astype(np.float32)
    x.flat[:4] = [0.25, -0.25, 0.75, 2.5]  # exact halves: round half to even
    xp = os.path.join(WORK, "x.npy")
    np.save(xp, x)
    cases = {
        "per_tensor_int8": (np.array(0.125, np.float32), np.array(3, np.int8), None),
        "per_tensor_uint8": (np.array(0.05, np.float32), np.array(128, np.uint8), None),
        "no_zero_point_uint8": (np.array(0.03, np.float32), None, None),
        "per_axis_int8": (np.array([0.1, 0.02, 0.5, 0.25], np.float32),
                          np.array([0, -3, 5, 1], np.int8), 1),
        "per_axis_uint8_axis3": (np.linspace(0.01, 0.1, 6).astype(np.float32),
                                 np.arange(6, dtype=np.uint8) * 20, 3),
    }
    for name, (scale, zp, axis) in cases.items():
        inits = [numpy_helper.from_array(scale, "s")]
        ins = ["x", "s"]
        if zp is not None:
            inits.append(numpy_helper.from_array(zp, "z"))
            ins.append("z")
        attrs = {} if axis is None else {"axis": axis}
        qt = TensorProto.UINT8 if zp is None or zp.dtype == np.uint8 else TensorProto.INT8
        nodes = [helper.make_node("QuantizeLinear", ins, ["q"], name="quant", **attrs),
                 helper.make_node("DequantizeLinear", ["q"] + ins[1:], ["y"], name="dequant", **attrs)]
        m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                  [helper.make_tensor_value_info("q", qt, x.shape),
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], inits)
        onnx.checker.check_model(m)
        path = save(m, name)
        want_q, want_y = ort_run(path, {"x": x})
        got, _ = kiln_run(path, [xp], name)
        check(got["q"].dtype == want_q.dtype and np.array_equal(got["q"], want_q),
              "%s: quantized values equal ORT's" % name)
        check(np.allclose(got["y"], want_y, rtol=0, atol=1e-6), "%s: dequantized values" % name)


def qdq_conv(name, s_x, s_w, s_y, group, stride, relu, bias=True):
    """x float -> Q -> DQ -> Conv(DQ(w), DQ(b)) [-> Relu] -> Q -> DQ; returns the model's path."""
    rng = np.random.default_rng(2)
    c, oc, k = 8, 12, 3
    wq = rng.integers(-127, 128, (oc, c // group, k, k)).astype(np.int8)
    s_w = np.full(oc, s_w, np.float32) * (2.0 ** -(np.arange(oc) % 3)).astype(np.float32)
    bq = rng.integers(-3000, 3000, oc).astype(np.int32)
    inits = [numpy_helper.from_array(np.array(s_x, np.float32), "sx"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(s_w, "sw"),
             numpy_helper.from_array(np.zeros(oc, np.int8), "zw"),
             numpy_helper.from_array(bq, "bq"),
             numpy_helper.from_array((s_w * np.float32(s_x)).astype(np.float32), "sb"),
             numpy_helper.from_array(np.array(s_y, np.float32), "sy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], name="dqw", axis=0),
             helper.make_node("DequantizeLinear", ["bq", "sb"], ["bd"], name="dqb", axis=0),
             helper.make_node("Conv", ["xd", "wd"] + (["bd"] if bias else []), ["c"], name="conv",
                              kernel_shape=[k, k], pads=[1, 0, 1, 2], strides=[stride, stride],
                              group=group)]
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "z"], ["yq"], name="qy"),
              helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"], name="dqy")]
    oh, ow = (11 + 2 - k) // stride + 1, (10 + 2 - k) // stride + 1
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 11, 10])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, oh, ow])], inits)
    onnx.checker.check_model(m)
    return save(m, name)


def conv_cases():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1, 8, 11, 10)) * 4).astype(np.float32)
    xp = os.path.join(WORK, "xc.npy")
    np.save(xp, x)
    for name, s_x, s_w, s_y, group, stride, relu in [
            ("qconv_relu", 2 ** -4, 2 ** -7, 2 ** -1, 1, 1, True),
            ("qconv_groups_stride2", 2 ** -4, 2 ** -6, 2 ** 0, 2, 2, False),
            ("qconv_shift0", 2 ** -2, 2 ** -1, 2 ** -3, 1, 1, False),
            ("qconv_negative_shift", 2 ** -4, 2 ** -7, 2 ** -12, 1, 1, False),
            ("qconv_not_pow2", 0.3, 2 ** -7, 2 ** 2, 1, 1, True)]:
        path = qdq_conv(name, s_x, s_w, s_y, group, stride, relu)
        want = ort_run(path, {"x": x})[0]
        got, log = kiln_run(path, [xp], name)
        lsb = np.abs(got["y"] - want).max() / s_y
        frac = np.mean(got["y"] != want)
        print("     %s: max |Kiln - ORT| = %.0f LSB, %.2f%% of elements differ" %
              (name, lsb, 100 * frac))
        check(lsb <= 1.0 + 1e-6, "%s: within 1 LSB of ORT" % name)
        check("1 quantized convolutions as ConvInteger" in log and "stays float" not in log,
              "%s: realized as ConvInteger: %s" % (name, re.findall(r".*(?:ConvInteger|float).*",
                                                                     log)))
    # A bad zero point: int16 is no quantized type.
    m = onnx.load(os.path.join(WORK, "per_tensor_int8.onnx"))
    for t in m.graph.initializer:
        if t.name == "z":
            t.CopyFrom(numpy_helper.from_array(np.array(3, np.int16), "z"))
    path = save(m, "bad_zero_point")
    err = kiln("compile", path, "-o", os.path.join(WORK, "bad.kiln"), expect=1)
    check("node 'quant' (QuantizeLinear)" in err and "y_zero_point 'z'" in err and "int16" in err,
          "an int16 zero point is refused naming the node and input: " + err.strip())


def qlinear_cases():
    """The operator form: QLinearConv (per-channel power-of-two weights, int32 bias) and
    QLinearMatMul, read as their QDQ form and realized as ConvInteger and MatMulInteger, within 1
    LSB of ORT's integer kernels."""
    rng = np.random.default_rng(5)
    x = rng.integers(-100, 100, (1, 8, 9, 9), dtype=np.int8)
    xp = os.path.join(WORK, "xq.npy")
    np.save(xp, x)
    w = rng.integers(-127, 127, (16, 8, 3, 3), dtype=np.int8)
    ws = (2.0 ** -rng.integers(6, 9, 16)).astype(np.float32)
    b = rng.integers(-2000, 2000, 16, dtype=np.int32)
    f = lambda v, n: numpy_helper.from_array(np.array(v), n)
    inits = [f(np.float32(2 ** -4), "xs"), f(np.int8(0), "xz"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(np.zeros(16, np.int8), "wz"),
             f(np.float32(2 ** -1), "ys"), f(np.int8(0), "yz"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(rng.integers(-127, 127, (9, 5), dtype=np.int8), "m"),
             f(np.float32(2 ** -5), "ms"), f(np.int8(0), "mz"), f(np.float32(0.37), "zs"),
             f(np.int8(3), "zz")]
    conv = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            name="qconv", pads=[1, 1, 1, 1])
    mm = helper.make_node("QLinearMatMul", ["y", "ys", "yz", "m", "ms", "mz", "zs", "zz"], ["z"], name="qmm")
    path = save(model([conv, mm], [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 8, 9, 9])],
                      [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 16, 9, 9]),
                       helper.make_tensor_value_info("z", TensorProto.INT8, [1, 16, 9, 5])], inits),
                "qlinear")
    want = ort_run(path, {"x": x})
    got, log = kiln_run(path, [xp], "qlinear")
    for name, ref in zip(["y", "z"], want):
        diff = np.abs(got[name].astype(np.int32) - ref.astype(np.int32))
        print("     %s: max |Kiln - ORT| = %d LSB, %.2f%% of elements differ" %
              (name, diff.max(), 100 * np.mean(diff != 0)))
        check(diff.max() <= 1, "QLinear %s within 1 LSB of ORT" % name)
    check("1 quantized convolutions as ConvInteger and 1 products as MatMulInteger" in log,
          "QLinearConv and QLinearMatMul realized as ConvInteger and MatMulInteger")
    # A scale computed at run time: B's scale (x_scale * w_scale) cannot be made at build time.
    m = onnx.load(path)
    m.graph.input.append(helper.make_tensor_value_info("ws2", TensorProto.FLOAT, [16]))
    m.graph.node[0].input[4] = "ws2"
    err = kiln("compile", save(m, "qlinear_input_scale"), "-o", os.path.join(WORK, "bad.kiln"), expect=1)
    check("node 'qconv' (QLinearConv)" in err and "input 4 ('ws2', a scale) must be an initializer" in err,
          "a QLinearConv scale that is not an initializer is refused naming it: " + err.strip())


def resnet18():
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "make_models.py"),
                    WORK, "--only", "resnet18"], check=True, capture_output=True)
    fp = os.path.join(WORK, "resnet18.onnx")
    rng = np.random.default_rng(4)
    cal = []
    for i in range(4):
        p = os.path.join(WORK, "cal%d.npy" % i)
        np.save(p, rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
        cal += ["--calibrate", p]
    qp = os.path.join(WORK, "resnet18.qdq.onnx")
    log = kiln("quantize", fp, *cal, "-o", qp)
    print("     " + log.strip().replace("\n", "\n     "))
    m = onnx.load(qp)
    onnx.checker.check_model(m)
    check(sum(n.op_type == "QuantizeLinear" for n in m.graph.node) > 0, "QDQ model passes onnx.checker")
    x = np.load(os.path.join(WORK, "resnet18.input.npy"))
    xp = os.path.join(WORK, "resnet18.input.npy")
    q_ort = ort_run(qp, {"input": x})[0]
    f_ort = ort_run(fp, {"input": x})[0]
    got, clog = kiln_run(qp, [xp], "resnet18_qdq")
    k = next(iter(got.values()))
    check("20 quantized convolutions as ConvInteger" in clog and "stays float" not in clog,
          "all 20 convolutions realized as ConvInteger")
    rel_k = np.abs(k - q_ort).max() / np.abs(q_ort).max()
    rel_q = np.abs(q_ort - f_ort).max() / np.abs(f_ort).max()
    rel_kf = np.abs(k - f_ort).max() / np.abs(f_ort).max()
    print("     Kiln (ConvInteger) vs ORT on the QDQ model: max abs %.4f, relative to max|y| %.4f, "
          "top-1 %d vs %d" % (np.abs(k - q_ort).max(), rel_k, k.argmax(), q_ort.argmax()))
    print("     ORT QDQ vs ORT float: relative max error %.4f, top-1 %d vs %d; Kiln int8 vs ORT "
          "float: %.4f" % (rel_q, q_ort.argmax(), f_ort.argmax(), rel_kf))
    check(rel_k <= 0.05 and k.argmax() == q_ort.argmax(), "Kiln matches ORT on the QDQ model")
    check(rel_q <= 0.10 and q_ort.argmax() == f_ort.argmax(), "the QDQ model is close to the float one")
    # compile --quantize int8: the same quantizer, the same outputs.
    b2 = os.path.join(WORK, "resnet18_direct.kiln")
    kiln("compile", fp, "--quantize", "int8", *cal, "-o", b2, "--target", "llvm")
    out2 = os.path.join(WORK, "direct.out")
    kiln("run", b2, "--input", xp, "-o", out2)
    k2 = np.load(os.path.join(out2, os.listdir(out2)[0]))
    check(np.array_equal(k, k2), "compile --quantize int8 equals quantize + compile")
    # The heterogeneous build of the power-of-two model: the convolutions the VDLA supports on
    # its simulator as QConv, the rest on the host CPU (llvm -mcpu=native).
    qp2 = os.path.join(WORK, "resnet18.pow2.onnx")
    kiln("quantize", fp, *cal, "--scales", "pow2", "-o", qp2)
    q2_ort = ort_run(qp2, {"input": x})[0]
    bv = os.path.join(WORK, "resnet18_vdla.kiln")
    vlog = kiln("compile", qp2, "-o", bv, "--target", "vdla")
    off = re.search(r"offloaded (\d+) of (\d+) convolutions", vlog)
    print("     --target vdla: " + (off.group(0) if off else vlog.strip()))
    check(off is not None and off.group(1) == "19" and off.group(2) == "20",
          "19 of the 20 convolutions offloaded (the first has 3 input channels)")
    outv = os.path.join(WORK, "vdla.out")
    vprof = subprocess.run([KILN, "run", bv, "--input", xp, "-o", outv, "--profile", "1"],
                           capture_output=True, text=True)
    check(vprof.returncode == 0, "the VDLA bundle runs: " + vprof.stderr[-300:])
    kv = np.load(os.path.join(outv, os.listdir(outv)[0]))
    rel_v = np.abs(kv - q2_ort).max() / np.abs(q2_ort).max()
    print("     VDLA build vs ORT on the power-of-two QDQ model: relative to max|y| %.4f, top-1 %d "
          "vs %d" % (rel_v, kv.argmax(), q2_ort.argmax()))
    check(rel_v <= 0.05 and kv.argmax() == q2_ort.argmax(),
          "the VDLA build matches ORT on the power-of-two QDQ model")
    total = re.search(r"^ *(\d+) +([0-9.]+) +([0-9.]+) +\d+ +all VDLA nodes", vprof.stdout + vprof.stderr, re.M)
    check(total is not None, "kiln run --profile prints the VDLA nodes' cycles")
    if total:
        print("     VDLA: %s cycles, %s ms at 200 MHz, GEMM utilization %s" % total.groups())
    prof = subprocess.run([KILN, "run", os.path.join(WORK, "resnet18_qdq.kiln"), "--input", xp,
                           "--profile", "5", "--threads", "1"], capture_output=True, text=True)
    ms = float(re.search(r"median ([0-9.]+) ms", prof.stdout + prof.stderr).group(1))
    print("     ResNet-18 int8 (ConvInteger) on one thread: median %.1f ms" % ms)
    check(ms < 2000, "one run on one thread under 2 s")
    # Bad calibration data.
    bad = os.path.join(WORK, "bad_cal.npy")
    np.save(bad, np.zeros((1, 3, 112, 112), np.float32))
    err = kiln("quantize", fp, "--calibrate", bad, "-o", os.path.join(WORK, "x.onnx"), expect=1)
    check(bad in err and "input 'input'" in err and "float32[1,3,224,224]" in err,
          "a calibration file of the wrong shape is refused: " + err.strip())
    err = kiln("quantize", fp, "-o", os.path.join(WORK, "x.onnx"), expect=2)
    check("--calibrate" in err, "a missing --calibrate is refused")


os.makedirs(WORK, exist_ok=True)
if sys.argv[3] == "ops":
    qdq_ops()
    conv_cases()
    qlinear_cases()
else:
    resnet18()
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
