"""A 500 MiB model through kiln.Farm.submit and `kiln submit`: y = x @ W with W an 8192 x 16000
float constant, far over gRPC's message limits, uploaded in chunks read from its file to an
embedded farm with kilnd's default --max-model-bytes (2 GiB); kilnd's resident memory (VmRSS
sampled during each upload, and VmHWM) stays well below the model's size, since it writes the
chunks to disk as they arrive. Both jobs are tuned (2 trials) and their bundles fetched, and kilnd
never holds a bundle in its own memory. Prints the figures. Slow: it writes, uploads, imports,
tunes and builds 500 MiB twice.
"""

import os
import subprocess
import threading
import time

import numpy as np
import pytest

import kiln

K, N = 8192, 16000  # W: 500 MiB of float32
MIB = 1 << 20


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte, v = v & 0x7F, v >> 7
        out.append(byte | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field_header(number: int, length: int) -> bytes:
    """A length-delimited protobuf field's tag and length."""
    return _varint(number << 3 | 2) + _varint(length)


def write_matmul_model(path: str, k: int, n: int) -> np.ndarray:
    """Writes y = x @ w (x [1, k], w [k, n] float32) to `path` without holding the model in
    memory, and returns w's first row (to check a small one).

    Protobuf merges a message that appears twice and appends repeated fields, so the file is the
    model without its initializer, then a second ModelProto.graph (field 7) holding only the
    initializer (GraphProto.initializer, field 5), whose raw_data (TensorProto field 9) is
    written in pieces."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])])
    head = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    raw_len = k * n * 4
    tensor_head = TensorProto(dims=[k, n], data_type=TensorProto.FLOAT, name="w")
    tensor_head = tensor_head.SerializeToString() + _field_header(9, raw_len)
    tensor_len = len(tensor_head) + raw_len
    initializer_header = _field_header(5, tensor_len)
    rows_per_piece = max(1, (16 * MIB) // (n * 4))
    with open(path, "wb") as f:
        f.write(head.SerializeToString())
        f.write(_field_header(7, len(initializer_header) + tensor_len))
        f.write(initializer_header)
        f.write(tensor_head)
        for row in range(0, k, rows_per_piece):
            rows = min(rows_per_piece, k - row)
            i = np.arange(row * n, (row + rows) * n, dtype=np.int64)
            f.write(((i % 251) * 1e-3 - 0.1).astype(np.float32).tobytes())
    return ((np.arange(n) % 251) * 1e-3 - 0.1).astype(np.float32)


def status_bytes(pid: int, field: str) -> int:
    """A /proc/<pid>/status field in bytes ("VmRSS", "VmHWM")."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_the_model_writer_makes_a_valid_model(tmp_path):
    import onnx
    from onnx import numpy_helper

    path = str(tmp_path / "small.onnx")
    first_row = write_matmul_model(path, 5, 300)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    (w,) = model.graph.initializer
    assert w.name == "w" and list(w.dims) == [5, 300]
    np.testing.assert_array_equal(numpy_helper.to_array(w)[0], first_row)


def sampled_peak(pid: int, upload) -> tuple:
    """Runs `upload()` while sampling kilnd's VmRSS every 10 ms; returns (upload's result, its
    seconds, kilnd's growth in bytes: the larger of the sampled peak and VmHWM, over VmRSS
    before)."""
    rss_before = status_bytes(pid, "VmRSS")
    peak = [rss_before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], status_bytes(pid, "VmRSS"))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.monotonic()
    try:
        result = upload()
    finally:
        done.set()
        sampler.join()
    seconds = time.monotonic() - t0
    return result, seconds, max(status_bytes(pid, "VmHWM"), peak[0]) - rss_before


def test_a_500_mib_model_is_uploaded_tuned_and_fetched(tmp_path, kiln_cli):
    path = str(tmp_path / "big.onnx")
    write_matmul_model(path, K, N)
    size = os.path.getsize(path)
    assert size > 500 * MIB

    # kilnd's default --max-model-bytes (2 GiB) takes it.
    with kiln.Farm.local(tmp_path / "state", workers=1, agent="cpu") as farm:
        pid = farm.pid
        client_hwm_before = status_bytes(os.getpid(), "VmHWM")
        job, upload_s, growth = sampled_peak(pid, lambda: farm.submit(
            path, target="llvm -mcpu=native", device_key="cpu", trials=2))
        client_growth = status_bytes(os.getpid(), "VmHWM") - client_hwm_before
        print(f"\nmodel {size / MIB:.1f} MiB: kiln.Farm.submit answered job {job.id} after "
              f"{upload_s:.2f} s ({size / MIB / upload_s:.0f} MiB/s, kilnd's import check "
              f"included); kilnd's memory grew {growth / MIB:.1f} MiB "
              f"({100 * growth / size:.1f}% of the model); this process's VmHWM grew "
              f"{client_growth / MIB:.1f} MiB")
        assert growth < size // 4, (
            f"kilnd's resident memory grew by {growth / MIB:.1f} MiB for a "
            f"{size / MIB:.1f} MiB model")
        assert client_growth < size // 4

        # The same model through the CLI, `kiln submit`.
        out, cli_s, cli_growth = sampled_peak(pid, lambda: subprocess.run(
            [kiln_cli, "submit", path, "--server", farm.address, "--target", "llvm -mcpu=native",
             "--device-key", "cpu", "--trials", "2"], check=True, capture_output=True,
            text=True).stdout)
        cli_job = farm.job(int(out.split("submitted job ")[1].split()[0]))
        print(f"kiln submit answered job {cli_job.id} after {cli_s:.2f} s; kilnd's memory grew "
              f"{cli_growth / MIB:.1f} MiB ({100 * cli_growth / size:.1f}% of the model)")
        assert cli_growth < size // 4

        t1 = time.monotonic()
        info = job.watch(progress=False, timeout=900)
        tune_s = time.monotonic() - t1
        assert info.state == "DONE" and info.tasks_total == 1
        t2 = time.monotonic()
        bundle = job.fetch(tmp_path / "big.kiln")
        fetch_s = time.monotonic() - t2
        bundle_size = os.path.getsize(bundle)
        hwm_end = status_bytes(pid, "VmHWM")
        print(f"tuned ({info.trials_done} trials, best {info.best_latency_s * 1e3:.3f} ms) and "
              f"built in {tune_s:.1f} s; bundle {bundle_size / MIB:.1f} MiB fetched in "
              f"{fetch_s:.2f} s; kilnd's VmHWM at the end {hwm_end / MIB:.1f} MiB")
        assert bundle_size > size // 2  # the weights travel in the bundle
        assert cli_job.watch(progress=False, timeout=900).state == "DONE"
        assert cli_job.fetch(tmp_path / "cli.kiln")
        # kilnd checks an uploaded bundle in place (check_bundle_file maps it): at most the
        # bundle's pages, never a copy of it in kilnd's own memory.
        hwm_end = status_bytes(pid, "VmHWM")
        print(f"kilnd's VmHWM after both jobs {hwm_end / MIB:.1f} MiB")
        assert hwm_end < 1.5 * bundle_size


if __name__ == "__main__":
    pytest.main([__file__, "-q", "-s"])
