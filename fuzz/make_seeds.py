#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (files named seed-*).

Small valid inputs of each kind, and a few interesting invalid ones; the fuzzers grow their own
corpora from these in a work folder (scripts/fuzz.sh), never here. The reproducers of fixed
crashes (crash-*) are kept by hand beside the seeds; this script never touches them. Needs numpy
and onnx (scripts/setup.sh installs both). The grpc target's seeds are kiln's protobuf messages,
which Python cannot import here: the target writes them itself (KILN_FUZZ_WRITE_SEEDS), from a
build of it in build/dev or build/fuzz.

    python3 fuzz/make_seeds.py
"""
import io
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
RNG = np.random.default_rng(7)


def clear_seeds(target):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith("seed-"):
            os.remove(os.path.join(folder, name))
    return folder


def write(folder, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(data)


# ---- npy ---------------------------------------------------------------------------------------

def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def npy_by_hand(descr, shape, version):
    """The .npy header numpy would write for `descr` and `shape` (Python literals), no data."""
    header = "{'descr': %s, 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    length_bytes = 2 if version == 1 else 4
    header += " " * (63 - (8 + length_bytes + len(header)) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode()


def npy_seeds():
    d = clear_seeds("npy")
    write(d, "f4-2x3.npy", npy_bytes(np.arange(6, dtype=np.float32).reshape(2, 3)))
    write(d, "f2-scalar.npy", npy_bytes(np.array(1.5, dtype=np.float16)))
    write(d, "f8-1x1x3.npy", npy_bytes(np.array([[[1.0, -2.0, 3.5]]])))
    write(d, "i1-4.npy", npy_bytes(np.array([-128, -1, 0, 127], dtype=np.int8)))
    write(d, "i2-2x2.npy", npy_bytes(np.array([[1, -2], [300, -400]], dtype=np.int16)))
    write(d, "i4-3.npy", npy_bytes(np.array([7, 8, 9], dtype=np.int32)))
    write(d, "i8-0x4.npy", npy_bytes(np.zeros((0, 4), dtype=np.int64)))
    write(d, "u1-5.npy", npy_bytes(np.arange(5, dtype=np.uint8)))
    write(d, "u2-2.npy", npy_bytes(np.array([1, 65535], dtype=np.uint16)))
    write(d, "u4-1.npy", npy_bytes(np.array([4000000000], dtype=np.uint32)))
    write(d, "u8-2.npy", npy_bytes(np.array([1, 2**64 - 1], dtype=np.uint64)))
    write(d, "b1-2x2.npy", npy_bytes(np.array([[True, False], [False, True]])))
    write(d, "v2-i4-2.npy", npy_by_hand("'<i4'", "(2,)", 2) + struct.pack("<2i", -5, 123456))
    good = npy_bytes(np.ones((2, 3), dtype=np.float32))
    write(d, "bad-fortran.npy", npy_bytes(np.asfortranarray(np.ones((2, 3), dtype=np.float32))))
    write(d, "bad-big-endian.npy", npy_bytes(np.ones(3, dtype=">f4")))
    write(d, "bad-truncated-data.npy", good[:-5])
    write(d, "bad-truncated-header.npy", good[:30])
    write(d, "bad-magic.npy", b"\x93NUMPX" + good[6:])
    write(d, "bad-version.npy", good[:6] + b"\x09\x00" + good[8:])
    write(d, "bad-complex.npy", npy_bytes(np.ones(2, dtype=np.complex64)))
    write(d, "bad-huge-shape.npy", npy_by_hand("'<f4'", "(99999999999, 99999999)", 1) + b"\0" * 8)


# ---- bundle ------------------------------------------------------------------------------------

def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


DTYPES = {"float32": (2, 32), "int64": (0, 64), "uint8": (1, 8), "float16": (2, 16)}


def params_section(params):
    out = b"KPRM" + struct.pack("<I", len(params))
    for name, (dtype, shape, data) in sorted(params.items()):
        code, bits = DTYPES[dtype]
        out += struct.pack("<I", len(name)) + name.encode()
        out += struct.pack("<BBHI", code, bits, 1, len(shape))
        out += b"".join(struct.pack("<q", d) for d in shape)
        out += struct.pack("<Q", len(data)) + data
    return out


def bundle_bytes(graph, library, params, sections=None, programs=None):
    """Version 1, or version 2 with a device section holding `programs` (a GPU bundle)."""
    parts = sections or [(1, json.dumps(graph).encode()), (2, library), (3, params_section(params))]
    if programs is not None:
        parts = parts + [(4, json.dumps({"programs": programs}).encode())]
    version = 2 if any(kind == 4 for kind, _ in parts) else 1
    body = b"KILNBNDL" + struct.pack("<II", version, len(parts))
    for kind, data in parts:
        body += struct.pack("<IIQ", kind, 0, len(data)) + data
    return body + struct.pack("<Q", fnv1a64(body)) + b"KILNEND!"


def bundle_seeds():
    d = clear_seeds("bundle")
    # The fuzz target's module has functions k1 ... k8 taking that many tensors.
    graph = {
        "format": "kiln.graph", "version": 1,
        "storage": [{"bytes": 96}],
        "tensors": [
            {"name": "x", "dtype": "float32", "shape": [2, 3], "kind": "input"},
            {"name": "w", "dtype": "float32", "shape": [2, 3], "kind": "param"},
            {"name": "t", "dtype": "float32", "shape": [2, 3], "kind": "intermediate",
             "storage": 0, "offset": 64},
            {"name": "y", "dtype": "float32", "shape": [2, 3], "kind": "output"},
        ],
        "nodes": [{"name": "add", "func": "k3", "args": [0, 1, 2]},
                  {"name": "relu", "func": "k2", "args": [2, 3]}],
        "inputs": [0], "outputs": [3],
    }
    w = np.arange(6, dtype=np.float32).tobytes()
    params = {"w": ("float32", [2, 3], w)}
    lib = b"\x7fELF not a real library"
    write(d, "two-nodes.kiln", bundle_bytes(graph, lib, params))
    g2 = dict(graph, storage=[], tensors=graph["tensors"][:2] + [
        {"name": "y", "dtype": "int64", "shape": [], "kind": "output"}],
        nodes=[{"name": "n", "func": "k3", "args": [0, 1, 2]}], outputs=[2])
    write(d, "scalar-output.kiln", bundle_bytes(g2, lib, params))
    p3 = {"a": ("uint8", [0], b""), "b": ("float16", [2], b"\x00\x3c\x00\x40"),
          "c": ("int64", [], struct.pack("<q", -3))}
    g3 = {"format": "kiln.graph", "version": 1, "storage": [{"bytes": 1}],
          "tensors": [{"name": n, "dtype": t, "shape": s, "kind": "param"}
                      for n, (t, s, _) in sorted(p3.items())],
          "nodes": [], "inputs": [], "outputs": [0]}
    write(d, "params-only.kiln", bundle_bytes(g3, b"", p3))
    good = bundle_bytes(graph, lib, params)
    write(d, "bad-checksum.kiln", good[:-16] + b"\0" * 8 + good[-8:])
    write(d, "bad-truncated.kiln", good[:40])
    write(d, "bad-unknown-section.kiln", bundle_bytes(None, None, None, [(7, b"x")]))
    write(d, "bad-graph-version.kiln", bundle_bytes(dict(graph, version=2), lib, params))
    write(d, "bad-offset.kiln", bundle_bytes(dict(graph, tensors=graph["tensors"][:2] + [
        dict(graph["tensors"][2], offset=80)] + graph["tensors"][3:]), lib, params))
    # GPU bundles (version 2): the same graph with device programs for its functions.
    def program(name, tensors, fmt="cl"):
        return {"name": name, "target": "opencl", "format": fmt,
                "code": "__kernel void %s(__global float* a) {}" % name,
                "params": [{"name": "t%d" % i, "dtype": "float32", "shape": [2, 3]}
                           for i in range(tensors)],
                "workspace_bytes": [64],
                "kernels": [{"name": name, "grid": [2, 1, 1], "block": [3, 1, 1],
                             "dyn_shared_bytes": 0, "args": list(range(tensors)) + [-1]}]}
    programs = [program("k3", 3), program("k2", 2)]
    write(d, "gpu-two-nodes.kiln", bundle_bytes(graph, b"", params, programs=programs))
    write(d, "bad-gpu-with-library.kiln", bundle_bytes(graph, lib, params, programs=programs))
    write(d, "bad-gpu-two-formats.kiln",
          bundle_bytes(graph, b"", params, programs=[program("k3", 3), program("k2", 2, "ptx")]))


# ---- record ------------------------------------------------------------------------------------

def record_seeds():
    d = clear_seeds("record")
    base = {"version": 1, "target": "llvm -mcpu=znver4", "device": "AMD EPYC 9654 (2 cores)",
            "task": "conv2d_nchw:1x64x56x56:0123456789abcdef", "config_index": 1234,
            "config": "tile_f=[1, 4, 8, 2], unroll=16", "costs": [0.00123, 0.00125, 0.00124],
            "error": "none", "error_msg": "", "gflops": 187.5, "timestamp_ms": 1700000000000,
            "search_seed": 42}
    write(d, "ok.json", json.dumps(base))
    write(d, "error.json", json.dumps(dict(base, costs=[], error="run_timeout", gflops=0,
                                           error_msg="the run took longer than 10000 ms")))
    write(d, "contended.json", json.dumps(dict(base, contended=True)))
    write(d, "u64-strings.json", json.dumps(dict(base, config_index="18446744073709551615",
                                                 search_seed="9223372036854775808")))
    write(d, "escapes.json", json.dumps(dict(base, error_msg="line\n\"quoted\" \\ \u00e9 \u2603")))
    for kind in ["compile_error", "compile_timeout", "runtime_error", "crash", "wrong_answer"]:
        write(d, "kind-" + kind + ".json", json.dumps(dict(base, error=kind, costs=[])))
    write(d, "bad-version.json", json.dumps(dict(base, version=99)))
    write(d, "bad-kind.json", json.dumps(dict(base, error="meltdown")))
    write(d, "bad-costs.json", json.dumps(dict(base, costs="fast")))
    write(d, "bad-negative-index.json", json.dumps(dict(base, config_index=-1)))
    write(d, "bad-truncated.json", json.dumps(base)[:57])
    write(d, "bad-array.json", "[1, 2, 3]")
    write(d, "bad-unicode-escape.json", '{"version": 1, "target": "\\u12G4"}')


# ---- pack --------------------------------------------------------------------------------------

def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def pack_line(record):
    """A pack's record line: the record's canonical JSON (sorted keys, no spaces; values chosen so
    that Python writes them as Kiln does) with its FNV-1a appended."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return text[:-1] + ',"fnv1a":"%016x"}' % fnv1a64(text.encode())


def source_line(source):
    """A pack's task source line: {"source":{...},"fnv1a":...}, the checksum of the source object's
    canonical JSON. ensure_ascii=False: Kiln writes UTF-8 as it is."""
    text = json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return '{"source":%s,"fnv1a":"%016x"}' % (text, fnv1a64(text.encode()))


def pack_seeds():
    d = clear_seeds("pack")
    rec = {"version": 1, "target": "llvm -mcpu=znver4", "device": "AMD EPYC 9R14 x2",
           "task": "dense_x86:1x512:0123456789abcdef", "config_index": 7, "config": "tile=[7, 1]",
           "costs": [0.5], "error": "none", "error_msg": "", "gflops": 2,
           "timestamp_ms": 1700000000007, "search_seed": 7}
    other = dict(rec, task="conv2d_nchwc_x86:1x4x7x7x16:fedcba9876543210", config_index=3,
                 config="tile=[3, 1]", costs=[0.25], gflops=4, timestamp_ms=1700000000003)
    failed = dict(rec, config_index=9, config="tile=[9, 1]", costs=[], error="compile_error",
                  error_msg="does not lower", gflops=0)
    records = [rec, other, failed]
    # Sources as a log notes them: the template and the workload's canonical JSON (a string).
    dense = {"task": rec["task"], "template": "dense_x86",
             "workload": '{"inputs":[[1,512],[1000,512]],"op":"dense","out_dtype":"float32"}'}
    conv = {"task": other["task"], "template": "conv2d_nchwc_x86",
            "workload": '{"inputs":[[1,4,7,7,16]],"op":"conv2d_nchwc"}'}
    sources = [dense, conv]

    def header(recs, srcs, version=2, **kw):
        h = {"count": len(recs), "created_ms": 1700000000000,
             "devices": sorted({r["device"] for r in recs}), "format": "kiln.records",
             "lane": "device", "target": "llvm -mcpu=znver4",
             "tasks": len({r["task"] for r in recs}), "version": version}
        if version >= 2:
            h["sources"] = len(srcs)
        h.update(kw)
        return json.dumps(h, sort_keys=True, separators=(",", ":"))

    def pack(recs, srcs=(), **kw):
        return "\n".join([header(recs, srcs, **kw)] + [source_line(s) for s in srcs] +
                         [pack_line(r) for r in recs]) + "\n"

    write(d, "ok.jsonl", pack(records, sources))
    write(d, "ok-no-sources.jsonl", pack(records))
    write(d, "ok-empty.jsonl", pack([]))
    write(d, "ok-v1.jsonl", pack(records, version=1))
    # The two kinds of line in any order.
    write(d, "ok-interleaved.jsonl", "\n".join(
        [header(records, sources), pack_line(rec), source_line(conv), pack_line(other),
         source_line(dense), pack_line(failed)]) + "\n")
    write(d, "bad-tampered.jsonl", pack(records, sources).replace('"costs":[0.5]', '"costs":[0.4]'))
    write(d, "bad-tampered-source.jsonl",
          pack(records, sources).replace('"template":"dense_x86"', '"template":"dense_cuda"'))
    write(d, "bad-count.jsonl", pack(records, sources, count=2))
    write(d, "bad-source-count.jsonl", pack(records, sources, sources=1))
    write(d, "bad-source-twice.jsonl", pack(records, [dense, dense], sources=1))
    write(d, "bad-source-no-record.jsonl", pack([rec, failed], sources, tasks=1))
    write(d, "bad-source-in-v1.jsonl", pack(records, sources, version=1))
    write(d, "bad-source-empty-template.jsonl", pack(records, [dict(dense, template="")]))
    write(d, "bad-target.jsonl", pack(records, sources, target="opencl"))
    write(d, "bad-version.jsonl", pack(records, sources, version=3))
    write(d, "bad-no-header.jsonl", "\n".join(pack_line(r) for r in records) + "\n")
    write(d, "bad-truncated.jsonl", pack(records, sources)[:-40])


# ---- dashboard ---------------------------------------------------------------------------------

def dashboard_seeds():
    d = clear_seeds("dashboard")
    token = "fuzz-token-5ecret"  # the fuzz target's guarded dashboard asks for this one
    paths = {
        "farm": "/api/v1/farm", "jobs": "/api/v1/jobs", "job-1": "/api/v1/jobs/1",
        "job-2": "/api/v1/jobs/2", "job-unknown": "/api/v1/jobs/99",
        "job-zero": "/api/v1/jobs/0", "job-huge": "/api/v1/jobs/18446744073709551616",
        "job-sub": "/api/v1/jobs/1/tasks", "events": "/api/v1/events",
        "events-since": "/api/v1/events?since=1700000000000&x=1",
        "events-bad-since": "/api/v1/events?since=yesterday", "page": "/", "css": "/dashboard.css",
        "js": "/dashboard.js", "metrics": "/metrics", "unknown": "/api/v2/jobs",
        "guarded-farm": "/api/v1/farm\nBearer " + token,
        "guarded-job": "/api/v1/jobs/1\nBearer " + token,
        "guarded-wrong": "/api/v1/jobs\nBearer wrong-token",
        "guarded-malformed": "/api/v1/jobs\nBasic abc",
        "guarded-missing": "/api/v1/events?since=0\n",
    }
    for name, text in paths.items():
        write(d, name + ".txt", text)


# ---- onnx --------------------------------------------------------------------------------------

def tensor(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="kiln-fuzz-seeds")
    m.ir_version = 7
    return m.SerializeToString()


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def out(name):
    return helper.make_empty_tensor_value_info(name)


def onnx_seeds():
    d = clear_seeds("onnx")
    n = helper.make_node
    # The small CNN of the tuning tests: conv, relu, conv, global pooling, flatten, dense.
    write(d, "small-cnn.onnx", model(
        [n("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
         n("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         n("GlobalAveragePool", ["c2"], ["p"]), n("Flatten", ["p"], ["f"]),
         n("Gemm", ["f", "fc"], ["y"], transB=1)],
        [vi("x", [1, 4, 8, 8])], [out("y")],
        [tensor("w1", [8, 4, 3, 3]), tensor("w2", [8, 8, 3, 3]), tensor("fc", [10, 8])]))
    # A residual block: conv + batch norm + relu, conv + batch norm, add, relu, max pool.
    bn = [tensor("s", [8]), tensor("b", [8]), tensor("m", [8]),
          numpy_helper.from_array(np.ones(8, dtype=np.float32), "v")]
    write(d, "residual.onnx", model(
        [n("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
         n("BatchNormalization", ["c1", "s", "b", "m", "v"], ["n1"]), n("Relu", ["n1"], ["r1"]),
         n("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         n("BatchNormalization", ["c2", "s", "b", "m", "v"], ["n2"]), n("Add", ["n2", "x"], ["a"]),
         n("Relu", ["a"], ["r"]), n("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [vi("x", [1, 8, 6, 6])], [out("y")],
        [tensor("w1", [8, 8, 3, 3]), tensor("w2", [8, 8, 3, 3])] + bn))
    # Depthwise and grouped convolutions, strides, average pooling, leaky relu.
    write(d, "depthwise.onnx", model(
        [n("Conv", ["x", "dw"], ["c1"], group=8, pads=[1, 1, 1, 1], strides=[2, 2]),
         n("LeakyRelu", ["c1"], ["l"], alpha=0.1),
         n("Conv", ["l", "gw"], ["c2"], group=2),
         n("AveragePool", ["c2"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [vi("x", [1, 8, 9, 9])], [out("y")],
        [tensor("dw", [8, 1, 3, 3]), tensor("gw", [4, 4, 1, 1])]))
    # A multilayer perceptron: MatMul + Add, Gemm with bias, softmax and log-softmax.
    write(d, "mlp.onnx", model(
        [n("MatMul", ["x", "w1"], ["h"]), n("Add", ["h", "b1"], ["hb"]), n("Tanh", ["hb"], ["t"]),
         n("Gemm", ["t", "w2", "b2"], ["g"], alpha=0.5, beta=2.0),
         n("Softmax", ["g"], ["y"], axis=1), n("LogSoftmax", ["g"], ["z"], axis=-1)],
        [vi("x", [2, 16])], [out("y"), out("z")],
        [tensor("w1", [16, 12]), tensor("b1", [12]), tensor("w2", [12, 5]), tensor("b2", [5])]))
    # The shape chain exporters emit: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    write(d, "shape-chain.onnx", model(
        [n("Shape", ["x"], ["s"]),
         n("Gather", ["s", "i0"], ["d0"], axis=0), n("Unsqueeze", ["d0", "ax"], ["u"]),
         n("Concat", ["u", "m1"], ["shape"], axis=0), n("Reshape", ["x", "shape"], ["r"]),
         n("Transpose", ["r"], ["t"], perm=[1, 0]), n("Sigmoid", ["t"], ["y"])],
        [vi("x", [2, 3, 4])], [out("y")],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "i0"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "ax"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "m1")]))
    # Pad, Slice, Concat, Squeeze, elementwise math with broadcasting, Clip, Cast.
    write(d, "tensor-ops.onnx", model(
        [n("Pad", ["x", "pads"], ["p"], mode="constant"),
         n("Slice", ["p", "st", "en", "axes", "steps"], ["s"]),
         n("Concat", ["s", "s"], ["c"], axis=1), n("Squeeze", ["c", "sq"], ["q"]),
         n("Mul", ["q", "k"], ["m"]), n("Sub", ["m", "k"], ["sb"]), n("Div", ["sb", "k"], ["dv"]),
         n("Abs", ["dv"], ["ab"]), n("Sqrt", ["ab"], ["sr"]), n("Exp", ["sr"], ["ex"]),
         n("Log", ["ex"], ["lg"]), n("Neg", ["lg"], ["ng"]), n("Max", ["ng", "k"], ["mx"]),
         n("Min", ["mx", "k"], ["mn"]), n("Pow", ["mn", "k"], ["pw"]),
         n("Clip", ["pw", "lo", "hi"], ["cl"]), n("Cast", ["cl"], ["y"], to=TensorProto.FLOAT)],
        [vi("x", [1, 3, 4])], [out("y")],
        [numpy_helper.from_array(np.array([0, 1, 1, 0, 1, 1], dtype=np.int64), "pads"),
         numpy_helper.from_array(np.array([0, 1], dtype=np.int64), "st"),
         numpy_helper.from_array(np.array([1, 5], dtype=np.int64), "en"),
         numpy_helper.from_array(np.array([0, 2], dtype=np.int64), "axes"),
         numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "steps"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "sq"),
         numpy_helper.from_array(np.array(1.5, dtype=np.float32), "k"),
         numpy_helper.from_array(np.array(-1.0, dtype=np.float32), "lo"),
         numpy_helper.from_array(np.array(1.0, dtype=np.float32), "hi")]))
    # A transposed convolution and global max pooling.
    write(d, "conv-transpose.onnx", model(
        [n("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
         n("GlobalMaxPool", ["c"], ["y"])],
        [vi("x", [1, 4, 5, 5])], [out("y")], [tensor("w", [4, 6, 3, 3])]))
    # An LSTM over 3 steps with constant weights (packed by pack_weights).
    write(d, "lstm.onnx", model(
        [n("LSTM", ["x", "W", "R", "B"], ["y", "h"], hidden_size=4)],
        [vi("x", [3, 1, 5])], [out("y"), out("h")],
        [tensor("W", [1, 16, 5]), tensor("R", [1, 16, 4]), tensor("B", [1, 32])]))
    # Constant folding: a node of constants only, a Constant node, Identity and Dropout.
    write(d, "constants.onnx", model(
        [n("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((2, 3), np.float32))),
         n("Add", ["c", "k"], ["ck"]), n("Identity", ["ck"], ["i"]), n("Dropout", ["x"], ["dx"]),
         n("Mul", ["dx", "i"], ["y"])],
        [vi("x", [2, 3])], [out("y")], [tensor("k", [2, 3])]))
    # A graph input with a default value (an initializer of the same name), opset 11.
    write(d, "input-with-default.onnx", model(
        [n("Add", ["x", "b"], ["y"])], [vi("x", [4]), vi("b", [4])], [out("y")],
        [tensor("b", [4])], opset=11))
    # Invalid ones: garbage, an unsupported operator, a missing input, a bad opset.
    write(d, "bad-garbage.onnx", b"\x08\x07\x12\x04kiln\x3a\xff\xff\xff\x0f")
    write(d, "bad-unsupported-op.onnx", model(
        [n("Einsum", ["x", "x"], ["y"], equation="ij,ij->ij")], [vi("x", [2, 2])], [out("y")],
        opset=13))
    write(d, "bad-missing-input.onnx", model([n("Relu", ["nowhere"], ["y"])], [vi("x", [2])],
                                             [out("y")]))
    write(d, "bad-opset.onnx", model([n("Relu", ["x"], ["y"])], [vi("x", [2])], [out("y")],
                                     opset=7))
    # The ONNX backend node tests (shipped with onnx) of the supported operators, a few each.
    node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    prefixes = {"BatchNormalization": "batchnorm", "LayerNormalization": "layer_normalization",
                "InstanceNormalization": "instancenorm", "ConstantOfShape": "constantofshape",
                "GatherElements": "gather_elements", "ReduceMean": "reduce_mean",
                "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
                "ReduceLogSumExp": "reduce_log_sum_exp"}
    ops = ["Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat",
           "Constant", "Conv", "ConvTranspose", "Div", "Dropout", "Exp", "Flatten", "Gather",
           "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Identity", "LSTM", "LeakyRelu", "Log",
           "LogSoftmax", "MatMul", "Max", "MaxPool", "Min", "Mul", "Neg", "Pad", "Pow", "Relu",
           "Reshape", "Shape", "Sigmoid", "Slice", "Softmax", "Sqrt", "Squeeze", "Sub", "Tanh",
           "Transpose", "Unsqueeze",
           # the reductions, activations, logic and shape operators added with issue 15
           "ReduceMean", "ReduceSum", "ReduceMax", "ReduceLogSumExp", "ArgMax", "HardSwish",
           "HardSigmoid", "Erf", "Elu", "PRelu", "Where", "Equal", "Less", "Not", "And", "Sum",
           "Mean", "Expand", "ConstantOfShape", "Range", "Tile", "Split", "LayerNormalization",
           "InstanceNormalization", "CumSum", "Trilu", "GatherElements", "Hardmax", "Mod",
           "Resize", "Upsample"]
    names = sorted(os.listdir(node_dir))
    for op in ops:
        prefix = "test_" + prefixes.get(op, op.lower())
        picked = 0
        for name in names:
            if picked == 3:
                break
            rest = name[len(prefix):]
            if not name.startswith(prefix) or (rest and not rest.startswith("_")):
                continue
            if "expanded" in name:
                continue
            path = os.path.join(node_dir, name, "model.onnx")
            if os.path.getsize(path) > 8192:
                continue
            shutil.copyfile(path, os.path.join(d, "seed-node-" + name[5:] + ".onnx"))
            picked += 1


# ---- grpc --------------------------------------------------------------------------------------

def grpc_seeds():
    root = os.path.dirname(HERE)
    for exe in ["build/dev/fuzz/fuzz_grpc_regression", "build/fuzz/fuzz/fuzz_grpc"]:
        path = os.path.join(root, exe)
        if os.access(path, os.X_OK):
            d = clear_seeds("grpc")
            # Any input: the target writes the seeds into the folder and exits.
            subprocess.run([path, os.path.abspath(__file__)], check=True,
                           env=dict(os.environ, KILN_FUZZ_WRITE_SEEDS=d))
            return
    print("grpc: no build of fuzz_grpc (cmake --build build/dev --target fuzz_grpc_regression):"
          " its seeds are left as they are")


if __name__ == "__main__":
    npy_seeds()
    bundle_seeds()
    record_seeds()
    pack_seeds()
    dashboard_seeds()
    onnx_seeds()
    grpc_seeds()
    for t in sorted(os.listdir(CORPUS)):
        print(t, len(os.listdir(os.path.join(CORPUS, t))), "files")
