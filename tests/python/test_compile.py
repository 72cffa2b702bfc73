"""kiln.compile, kiln.tune and kiln.quantize: the same bundles as the CLI's, tuning into a record
log that a second run resumes, progress events, and bad models, shapes and targets."""

import subprocess

import numpy as np
import onnx
import pytest

import kiln
from kiln_models import conv_relu, reference, two_convs

def test_a_bundle_compiled_in_python_equals_the_clis(tmp_path, kiln_cli):
    model = tmp_path / "m.onnx"
    onnx.save(conv_relu(), model)
    subprocess.run([kiln_cli, "compile", str(model), "--input-shape", "x=1,3,16,16", "-o",
                    str(tmp_path / "cli.kiln")], check=True, capture_output=True)
    b = kiln.compile(str(model), input_shapes={"x": (1, 3, 16, 16)}, output=tmp_path / "py.kiln",
                     progress=False)
    assert (tmp_path / "py.kiln").read_bytes() == (tmp_path / "cli.kiln").read_bytes()
    # The same from the ModelProto and from its bytes.
    for source in (conv_relu(), conv_relu().SerializeToString()):
        kiln.compile(source, input_shapes={"x": (1, 3, 16, 16)}, output=tmp_path / "mem.kiln",
                     progress=False)
        assert (tmp_path / "mem.kiln").read_bytes() == (tmp_path / "cli.kiln").read_bytes()
    assert b.report["kernels"] >= 1 and b.report["operators"] == 2


def has_avx512_bf16() -> bool:
    with open("/proc/cpuinfo") as f:
        return " avx512_bf16" in f.read()


@pytest.mark.skipif(not has_avx512_bf16(), reason="this CPU has no avx512_bf16")
def test_bf16_precision_against_onnx_runtime():
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
    want = reference(two_convs(), {"x": x})[0]
    b = kiln.compile(two_convs(), precision="bf16", progress=False)
    # Both convolutions, the first's 3 input channels blocked as 4 (a zero one) to make pairs.
    assert b.report["bf16_convolutions"] == 2
    got = b.run(x=x)[0]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert 1e-6 < err < 1e-2, err


def test_progress_events_and_an_exception_from_the_callback(tmp_path):
    events = []
    kiln.compile(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, progress=events.append)
    builds = [e for e in events if e["stage"] == "build"]
    assert builds and builds[-1]["index"] == builds[-1]["total"]
    assert builds[-1]["what"] == "generating code"

    class Stop(Exception):
        pass

    def stop(event):
        raise Stop()

    with pytest.raises(Stop):  # as Ctrl-C in a notebook would: the build stops, nothing is left
        kiln.compile(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, progress=stop)


def test_torch_module_with_example_inputs():
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 5))
    x = torch.rand(2, 3, 8, 8)
    b = kiln.compile(net, example_inputs=(x,), progress=False)
    assert [(t.name, t.shape) for t in b.inputs] == [("input", (2, 3, 8, 8))]
    with torch.no_grad():
        expected = net(x).numpy()
    np.testing.assert_allclose(b.run(x)[0], expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(kiln.InvalidInputError, match="needs example_inputs"):
        kiln.compile(net, progress=False)


def test_tune_fills_the_record_log_and_resumes_it(tmp_path):
    records = tmp_path / "records"
    events = []
    b = kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, trials=4, batch=4,
                  records=records, progress=events.append)
    done = [e for e in events if e["stage"] == "task_done"]
    assert [e["stage"] for e in events][0] == "tasks" and len(done) == events[0]["total"] >= 1
    assert all(e["measured_now"] == 4 and e["trials"] == 4 for e in done)
    assert b.report["tuned"] >= 1 and b.report["tasks"] == len(done)
    x = np.random.default_rng(8).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(b.run(x)[0], reference(conv_relu(), {"x": x})[0], rtol=1e-4,
                               atol=1e-4)
    # Run again: everything is in the log, nothing is measured twice.
    events.clear()
    kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, trials=4, batch=4,
              records=records, progress=events.append)
    assert all(e["measured_now"] == 0 for e in events if e["stage"] == "task_done")
    # compile with the log picks the tuned configs.
    c = kiln.compile(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, records=records,
                     progress=False)
    assert c.report["tuned"] == b.report["tuned"] and c.report["defaults"] == 0
    # The log's cost model was trained after the first run and is current: kept.
    assert b.report["cost_model"].startswith("trained on ")
    assert c.report["predicted"] == 0


def test_a_second_model_starts_from_the_logs_cost_model_and_builds_zero_shot(tmp_path):
    records = tmp_path / "records"
    kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, trials=8, batch=4,
              records=records, progress=False)
    # Another shape: a new task, never measured: the log's model picks its config where the log
    # shows tuning gains much over the template's default, else the default stays.
    shapes = {"x": (1, 3, 24, 24)}
    c = kiln.compile(conv_relu(size=24), input_shapes=shapes, records=records, progress=False)
    assert c.report["tuned"] == 0 and c.report["predicted"] + c.report["defaults"] == 1
    x = np.random.default_rng(9).uniform(-1, 1, (1, 3, 24, 24)).astype(np.float32)
    np.testing.assert_allclose(c.run(x)[0], reference(conv_relu(size=24), {"x": x})[0],
                               rtol=1e-4, atol=1e-4)
    off = kiln.tune(conv_relu(size=24), input_shapes=shapes, trials=4, batch=4, records=records,
                    transfer=False, progress=False)
    assert off.report["cost_model"] == ""  # --no-transfer: no model kept or trained


def test_tune_with_the_mlp_cost_model(tmp_path):
    # Two rounds per task: the second is chosen by the MLP fitted on the first.
    events = []
    b = kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, trials=8, batch=4,
                  cost_model="mlp", records=tmp_path / "records", progress=events.append)
    done = [e for e in events if e["stage"] == "task_done"]
    assert done and all(0 < e["measured_now"] <= 8 for e in done)  # a small space: all of it
    assert max(e["measured_now"] for e in done) == 8 and b.report["tuned"] == len(done)


def test_tune_with_a_budget_spends_it_and_reports_the_models_latency(tmp_path):
    records = tmp_path / "records"
    events = []
    b = kiln.tune(two_convs(), input_shapes={"x": (1, 3, 16, 16)}, budget=10, batch=4,
                  records=records, progress=events.append)
    tasks = events[0]
    assert tasks["stage"] == "tasks" and len(tasks["calls"]) == tasks["total"] >= 1
    rounds = [e for e in events if e["stage"] == "tune"]
    assert rounds and rounds[-1]["measurements"] == 10 and rounds[-1]["budget"] == 10
    assert rounds[-1]["estimated_latency_ms"] > 0
    done = [e for e in events if e["stage"] == "task_done"]
    assert sum(e["measured_now"] for e in done) == 10 and all(e["why"] for e in done)
    assert b.report["measurements"] == 10 and b.report["ended"] == "budget spent"
    assert b.report["estimated_latency_ms"] == rounds[-1]["estimated_latency_ms"]
    # The same budget again: already spent, nothing measured.
    again = kiln.tune(two_convs(), input_shapes={"x": (1, 3, 16, 16)}, budget=10, batch=4,
                      records=records, progress=False)
    assert again.report["measured_now"] == 0 and again.report["measurements"] == 10


def test_quantize_then_compile(tmp_path):
    rng = np.random.default_rng(9)
    samples = [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(3)]
    qdq = kiln.quantize(two_convs(), samples, output=tmp_path / "q.onnx", progress=False)
    ops = [n.op_type for n in onnx.load_from_string(qdq).graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    assert (tmp_path / "q.onnx").read_bytes() == qdq
    assert kiln.quantize.last_report["convolutions_quantized"] == 2
    assert kiln.quantize.last_report["samples"] == 3
    b = kiln.compile(qdq, progress=False)
    assert b.report["integer_convolutions"] == 1, b.report["qconvs_kept_float"]
    ref = reference(two_convs(), {"x": samples[0]})[0]
    err = np.abs(b.run(samples[0])[0] - ref).max()
    assert err < 0.1 * np.abs(ref).max()  # int8: within 10% of the range
    # Power-of-two scales, the VDLA's: the same convolution realized, as close.
    pow2 = kiln.quantize(two_convs(), samples, scales="pow2", progress=False)
    b2 = kiln.compile(pow2, progress=False)
    assert b2.report["integer_convolutions"] == 1, b2.report["qconvs_kept_float"]
    assert np.abs(b2.run(samples[0])[0] - ref).max() < 0.1 * np.abs(ref).max()


@pytest.mark.parametrize("call, error, message", [
    (lambda p: kiln.compile(p / "none.onnx"), kiln.InvalidInputError, "no such model file"),
    (lambda p: kiln.compile(b"not onnx", progress=False), kiln.InvalidInputError, "model"),
    (lambda p: kiln.compile(conv_relu(), progress=False), kiln.InvalidInputError, "--input-shape"),
    (lambda p: kiln.compile(conv_relu(), input_shapes={"x": (1, 0, 16, 16)}),
     kiln.InvalidInputError, "input_shapes['x']: every dimension must be positive, got [1, 0, 16, 16]"),
    (lambda p: kiln.compile(conv_relu(), "tpu", input_shapes={"x": (1, 3, 16, 16)}, progress=False),
     kiln.InvalidInputError, "tpu"),
    (lambda p: kiln.compile(42), kiln.InvalidInputError, "got int"),
    (lambda p: kiln.compile(two_convs(), precision="fp16", progress=False),
     kiln.InvalidInputError, "precision must be 'fp32' or 'bf16', got 'fp16'"),
    (lambda p: kiln.compile(two_convs(), "llvm -mcpu=znver3", precision="bf16", progress=False),
     kiln.InvalidInputError, "--precision bf16 needs avx512_bf16 (vdpbf16ps); target 'llvm "
     "-mcpu=znver3' (CPU 'znver3') has sse4.2, avx2, fma but not avx512_bf16"),
    (lambda p: kiln.compile(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, records=p / "nope"),
     kiln.InvalidInputError, "no such record log"),
    (lambda p: kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, trials=0),
     kiln.InvalidInputError, "trials must be a positive int, got 0"),
    (lambda p: kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, budget=0),
     kiln.InvalidInputError, "budget must be a positive int, got 0"),
    (lambda p: kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, time=-1),
     kiln.InvalidInputError, "time must be a positive number of seconds, got -1"),
    (lambda p: kiln.tune(conv_relu(), input_shapes={"x": (1, 3, 16, 16)}, cost_model="forest",
                         records=p / "records", progress=False),
     kiln.InvalidInputError, "unknown cost model 'forest' (known: xgb, mlp)"),
    (lambda p: kiln.quantize(conv_relu(), [], input_shapes={"x": (1, 3, 16, 16)}),
     kiln.InvalidInputError, "calibration"),
    (lambda p: kiln.quantize(conv_relu(), [np.zeros((1, 3, 8, 8), np.float32)],
                             input_shapes={"x": (1, 3, 16, 16)}, progress=False),
     kiln.InvalidInputError, "x"),
    (lambda p: kiln.quantize(conv_relu(), [np.zeros((1, 3, 16, 16), np.float32)],
                             input_shapes={"x": (1, 3, 16, 16)}, scales="fp8"),
     kiln.InvalidInputError, "scales must be 'float' or 'pow2', got 'fp8'"),
])
def test_bad_models_shapes_and_targets(tmp_path, call, error, message):
    with pytest.raises(error) as e:
        call(tmp_path)
    assert message in str(e.value)
