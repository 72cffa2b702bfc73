"""kiln.Farm against live kilnds started here (kiln.Farm.local, 127.0.0.1, free ports): submit a
path, an onnx.ModelProto and a torch.nn.Module, watch them to DONE, fetch the bundle (equal to
`kiln fetch`'s), list jobs and devices, cancel; and every refusal as its exception with kilnd's
message: a wrong token, a closed farm, a model that is not ONNX, an unknown job or device key, a
model over the farm's --max-model-bytes; a budget spent exactly, and budgets, time limits and
early stops refused by the client or by kilnd with their messages."""

import dataclasses
import datetime
import os
import socket
import subprocess
import time

import numpy as np
import pytest
from conftest import TINY_IN, TINY_OUT, make_tiny_model

import kiln
from kiln.errors import InvalidInputError

TARGET = "llvm -mcpu=native"


def submit(farm, model, **kw):
    kw.setdefault("target", TARGET)
    kw.setdefault("device_key", "cpu")
    kw.setdefault("trials", 4)
    return farm.submit(model, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_group_members(pgid: int):
    """The pids of live processes in process group `pgid` (from /proc/<pid>/stat)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry))
    return members


@pytest.fixture(scope="module")
def done_job(local_farm, tiny_model_path):
    """The tiny model submitted by path and watched to DONE (with the progress bar)."""
    job = submit(local_farm, tiny_model_path, name="tiny-path", owner="alice")
    info = job.watch(progress=True, timeout=120)
    return job, info


# ---- submit, watch, result, fetch ----------------------------------------------------------


def test_a_path_is_tuned_to_done(done_job):
    job, info = done_job
    assert isinstance(job, kiln.Job) and job.id > 0
    assert info.id == job.id and info.state == "DONE" and info.is_final
    assert info.model_name == "tiny-path" and info.owner == "alice"
    assert info.target == TARGET and info.device_key == "cpu" and info.trials == 4
    assert info.tasks_total == 1 and info.tasks_done == 1
    assert info.trials_done >= 1 and info.trials_failed < info.trials_done
    assert info.best_latency_s is not None and info.best_latency_s > 0
    assert info.error == ""
    assert info.created_at <= info.started_at <= info.finished_at
    assert info.finished_at.tzinfo == datetime.timezone.utc
    assert job.info() == info  # nothing moves after the end


def test_result_and_fetch_equal_the_cli_fetch(done_job, local_farm, kiln_cli, tmp_path):
    job, _ = done_job
    cli_path = tmp_path / "cli.kiln"
    subprocess.run([kiln_cli, "fetch", str(job.id), "--server", local_farm.address, "-o",
                    str(cli_path)], check=True, capture_output=True, timeout=60)
    cli_bytes = cli_path.read_bytes()
    assert len(cli_bytes) > 0

    path = job.fetch(tmp_path / "py.kiln")
    assert path == str(tmp_path / "py.kiln")
    with open(path, "rb") as f:
        assert f.read() == cli_bytes
    # A folder gets job<ID>.kiln in it, and no temporary file stays behind.
    in_dir = job.fetch(tmp_path)
    assert in_dir == os.path.join(str(tmp_path), f"job{job.id}.kiln")
    assert sorted(os.listdir(tmp_path)) == sorted(["cli.kiln", "py.kiln", f"job{job.id}.kiln"])

    result = job.result(timeout=30)
    if isinstance(result, bytes):  # a package without kiln.Bundle.from_bytes
        assert result == cli_bytes
    else:  # the tuned bundle, ready to run: y = x @ w + b
        assert isinstance(result, kiln.Bundle)
        from onnx import numpy_helper

        weights = {t.name: numpy_helper.to_array(t) for t in make_tiny_model().graph.initializer}
        x = np.random.RandomState(1).randn(1, TINY_IN).astype(np.float32)
        y, = result.run(x)
        np.testing.assert_allclose(y, x @ weights["w"] + weights["b"], rtol=1e-4, atol=1e-4)


def test_a_model_proto_is_tuned(local_farm, tiny_model):
    job = submit(local_farm, tiny_model, name="tiny-proto")
    info = job.watch(progress=False, timeout=120)
    assert info.state == "DONE" and info.model_name == "tiny-proto" and info.tasks_total == 1


def test_a_torch_module_is_exported_and_tuned(local_farm, tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not importable here")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(TINY_IN, 16), torch.nn.ReLU())
    job = submit(local_farm, module, example_inputs=torch.randn(1, TINY_IN))
    info = job.watch(progress=False, timeout=120)
    assert info.state == "DONE" and info.model_name == "sequential"
    assert info.tasks_total >= 1
    assert os.path.getsize(job.fetch(tmp_path)) > 0


def test_a_budget_is_spent_exactly_and_shown(local_farm):
    # A model of its own (the tiny model's task with another width): the session's shared record
    # log holds none of its records, which would count against the budget.
    model = make_tiny_model("tiny-budget", n=TINY_OUT * 2)
    job = submit(local_farm, model, trials=None, budget=5, early_stop=0)
    info = job.watch(progress=True, timeout=120)
    assert info.state == "DONE" and info.scheduled
    assert info.budget == 5 and info.trials == 0 and info.early_stop == 0
    assert info.time_limit_s is None
    assert info.trials_done == 5  # the measurements of its task in the log: the budget
    assert info.planned_trials == 5 and info.progress == 1.0
    assert info.tasks_total == 1 and info.tasks_done == 1


def test_a_time_limit_is_sent_and_shown(local_farm):
    # (kilnd_test runs a time-limited job to its end; this one is cancelled once it shows.)
    model = make_tiny_model("tiny-time", n=TINY_OUT * 3)
    job = submit(local_farm, model, trials=None, time=600, early_stop=4)
    try:
        info = job.info()
        assert info.time_limit_s == 600 and info.early_stop == 4 and info.scheduled
        assert info.budget is None and info.trials == 0 and info.planned_trials is None
        assert 0 <= info.progress < 1
    finally:
        job.cancel("only its fields were wanted")


# ---- jobs and devices ----------------------------------------------------------------------


def test_jobs_lists_every_job_with_filters(local_farm, done_job):
    job, info = done_job
    jobs = local_farm.jobs()
    assert all(isinstance(j, kiln.JobInfo) for j in jobs)
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)  # oldest first
    assert info in jobs
    assert [j.id for j in local_farm.jobs(owner="alice")] == [job.id]
    assert local_farm.jobs(owner="nobody-here") == []
    assert job.id in [j.id for j in local_farm.jobs(states="done")]
    assert job.id in [j.id for j in local_farm.jobs(states=["DONE", "running"])]
    assert job.id not in [j.id for j in local_farm.jobs(states=["queued", "JOB_STATE_FAILED"])]
    with pytest.raises(InvalidInputError, match="'finished'"):
        local_farm.jobs(states="finished")
    # Flat records: each field a scalar, a string or a time, so a DataFrame takes them as rows.
    row = dataclasses.asdict(info)
    assert row["id"] == job.id and row["state"] == "DONE"
    for name, value in row.items():
        assert value is None or isinstance(value, (int, float, str, datetime.datetime)), name


def test_devices_lists_the_local_agent(local_farm):
    devices = local_farm.devices()
    assert len(devices) == 1
    d = devices[0]
    assert isinstance(d, kiln.DeviceInfo)
    assert d.key == "cpu" and d.target == TARGET and d.state in ("online", "busy")
    assert d.cores > 0 and d.memory_bytes > 0 and d.arch and d.cpu_model
    assert d.registered_at is not None and not d.emulated
    assert [x.device_id for x in local_farm.devices(key="cpu")] == [d.device_id]
    assert local_farm.devices(key="no-such-key") == []
    row = dataclasses.asdict(d)
    assert row["key"] == "cpu" and isinstance(row["errors"], dict)


# ---- cancel --------------------------------------------------------------------------------


def test_cancel_a_job_that_has_not_ended(local_farm, tmp_path):
    # Its own model (other shapes), a large budget: it cannot end before the cancel lands.
    job = submit(local_farm, make_tiny_model("cancel-me", 48, 40), trials=2000)
    before = job.info()
    assert before.state in ("QUEUED", "RUNNING")
    t0 = time.monotonic()
    with pytest.raises(kiln.FarmTimeoutError, match=f"job {job.id} is still"):
        job.watch(progress=False, timeout=0.5)
    assert time.monotonic() - t0 < 5
    after = job.cancel(reason="changed my mind")
    assert after.id == job.id and after.state == "CANCELLED"
    assert after.error == "changed my mind"
    with pytest.raises(kiln.JobCancelledError, match="changed my mind") as e:
        job.watch(progress=False, timeout=30)
    assert e.value.info.state == "CANCELLED"
    # It has ended: no second cancel, no bundle.
    with pytest.raises(kiln.FarmPreconditionError, match="already cancelled"):
        job.cancel()
    with pytest.raises(kiln.FarmPreconditionError, match="its bundle exists once it is done"):
        job.fetch(tmp_path / "never.kiln")
    assert os.listdir(tmp_path) == []
    with pytest.raises(kiln.JobCancelledError):
        job.result(timeout=30)


def test_a_failed_job_raises_with_kilnds_reason(tmp_path, monkeypatch):
    # kiln-tuner's test hook (tuner/job_driver.cc) crashes the driver of the model "crasher"
    # while it folds constants; kilnd tries twice, then fails the job with the reason.
    monkeypatch.setenv("KILN_DRIVER_FAULT", "crasher:crash:folding constants")
    with kiln.Farm.local(tmp_path / "state", workers=0, agent="cpu") as farm:
        job = submit(farm, make_tiny_model(), name="crasher")
        with pytest.raises(kiln.JobFailedError, match=f"job {job.id} failed: the compiler "
                           "crashed on this model \\(SIGSEGV\\) while folding constants") as e:
            job.watch(progress=False, timeout=60)
        assert e.value.info.state == "FAILED" and "(2 tries)" in e.value.info.error
        assert job.info().error == e.value.info.error
        with pytest.raises(kiln.JobFailedError, match="SIGSEGV"):
            job.result(timeout=30)


# ---- refusals ------------------------------------------------------------------------------


def test_a_closed_farm_is_unavailable_at_once():
    address = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(kiln.FarmUnavailableError, match=f"cannot reach kilnd at {address}") as e:
        kiln.Farm(address)
    assert time.monotonic() - t0 < 3
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, kiln.KilnError)
    assert e.value.address == address


def test_tls_mistakes_are_named(local_farm, tmp_path):
    with pytest.raises(kiln.KilnSystemError, match="cannot read TLS CA certificate '.*nope.pem'"):
        kiln.Farm(local_farm.address, tls=tmp_path / "nope.pem")
    # TLS to a plaintext farm: the handshake fails, and the message says what to check.
    with pytest.raises(kiln.FarmUnavailableError, match="is `tls` the farm's CA"):
        kiln.Farm(local_farm.address, tls=True)


def test_a_farm_that_stops_is_unavailable_to_its_clients(tmp_path):
    with kiln.Farm.local(tmp_path / "state", workers=0, agent=None) as local:
        pid, address = local.pid, local.address
        client = kiln.Farm(address)
        assert client.jobs() == []
    # kilnd and its process group are gone.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert process_group_members(pid) == []
    t0 = time.monotonic()
    with pytest.raises(kiln.FarmUnavailableError, match=f"cannot reach kilnd at {address}"):
        client.jobs()
    assert time.monotonic() - t0 < 3
    client.close()


def test_the_local_farm_stops_on_an_exception(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with kiln.Farm.local(tmp_path / "state", workers=1, agent="cpu") as farm:
            pid = farm.pid
            assert farm.dashboard_url.startswith("http://127.0.0.1:")
            assert farm.devices("cpu")
            raise RuntimeError("boom")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert process_group_members(pid) == []


@pytest.fixture(scope="module")
def guarded_farm(tmp_path_factory):
    """A farm that asks for a token and takes models of at most 4 KiB."""
    with kiln.Farm.local(tmp_path_factory.mktemp("guarded"), workers=0, agent=None,
                         token="s3cret", max_model_bytes=4096) as farm:
        yield farm


def test_a_wrong_token_is_refused_with_kilnds_message(guarded_farm):
    with kiln.Farm(guarded_farm.address, token="wrong") as farm:
        with pytest.raises(kiln.FarmAuthError, match="the token is wrong") as e:
            farm.jobs()
    assert e.value.code.name == "UNAUTHENTICATED" and "(UNAUTHENTICATED)" in str(e.value)
    with kiln.Farm(guarded_farm.address, token="") as farm:
        with pytest.raises(kiln.FarmAuthError, match="this farm requires a token"):
            farm.devices()
    assert guarded_farm.jobs() == []  # the right token


def test_a_model_over_the_farms_limit_names_both_sizes(guarded_farm, tiny_model):
    size = len(tiny_model.SerializeToString())
    assert size > 4096
    with pytest.raises(kiln.FarmResourceExhaustedError) as e:
        submit(guarded_farm, tiny_model)
    assert f"the model is {size} bytes" in str(e.value)
    assert "over this farm's limit of 4096 bytes" in str(e.value)
    assert e.value.code.name == "RESOURCE_EXHAUSTED"


def test_a_model_that_is_not_onnx_is_refused(local_farm, tmp_path):
    notes = tmp_path / "notes.onnx"
    notes.write_text("these are my notes, not a model\n")
    with pytest.raises(kiln.FarmInvalidArgumentError, match="the model does not import") as e:
        submit(local_farm, str(notes))
    assert isinstance(e.value, InvalidInputError)  # a ValueError too
    assert e.value.code.name == "INVALID_ARGUMENT" and e.value.details in str(e.value)
    # Named as the client named it (the file's name), never by its path on the server.
    assert "cannot parse ONNX model 'notes': not a valid ModelProto" in str(e.value)
    assert "upload-" not in str(e.value)
    with pytest.raises(kiln.FarmInvalidArgumentError, match="the model does not import") as e:
        submit(local_farm, b"\x00\x01 not a protobuf either", name="scrap")
    assert "cannot parse ONNX model 'scrap'" in str(e.value)


def test_an_unknown_job_is_not_found(local_farm, tmp_path):
    with pytest.raises(kiln.FarmNotFoundError, match="no job 987654") as e:
        local_farm.job(987654)
    assert e.value.code.name == "NOT_FOUND"
    job = kiln.Job(local_farm, 987654)
    for call in (job.info, job.cancel, lambda: job.watch(progress=False),
                 lambda: job.fetch(tmp_path / "never.kiln")):
        with pytest.raises(kiln.FarmNotFoundError, match="no job 987654"):
            call()


def test_amounts_past_the_farms_limits_are_refused_by_kilnd(local_farm, tiny_model):
    with pytest.raises(kiln.FarmInvalidArgumentError,
                       match="budget 2000000 is over this farm's limit of 1000000") as e:
        submit(local_farm, tiny_model, trials=None, budget=2_000_000)
    assert isinstance(e.value, InvalidInputError)
    with pytest.raises(kiln.FarmInvalidArgumentError, match="early_stop 50000 is over"):
        submit(local_farm, tiny_model, budget=100, early_stop=50_000)
    with pytest.raises(kiln.FarmInvalidArgumentError, match="time_limit_s 1e\\+08 is over"):
        submit(local_farm, tiny_model, trials=None, time=1e8)


def test_an_unknown_device_key_is_not_found(local_farm, tiny_model):
    with pytest.raises(kiln.FarmNotFoundError, match="no device of key 'gpu-rack'.*cpu"):
        submit(local_farm, tiny_model, device_key="gpu-rack")


def test_bad_arguments_are_refused_before_any_call(local_farm, tiny_model, tmp_path):
    with pytest.raises(InvalidInputError, match="trials must be a positive int"):
        submit(local_farm, tiny_model, trials=0)
    with pytest.raises(InvalidInputError, match=r"budget must be a positive int .*got -1"):
        submit(local_farm, tiny_model, budget=-1)
    with pytest.raises(InvalidInputError, match="time must be a positive number of seconds, got "
                                                "nan"):
        submit(local_farm, tiny_model, budget=10, time=float("nan"))
    with pytest.raises(InvalidInputError, match="submit needs trials"):
        submit(local_farm, tiny_model, trials=None)
    with pytest.raises(InvalidInputError, match=r"early_stop \(8\) needs a budget or a time"):
        submit(local_farm, tiny_model, early_stop=8)
    with pytest.raises(InvalidInputError, match="early_stop must be an int >= 0"):
        submit(local_farm, tiny_model, budget=10, early_stop=-2)
    with pytest.raises(InvalidInputError, match="target must be"):
        submit(local_farm, tiny_model, target="")
    with pytest.raises(InvalidInputError, match="no such model file"):
        submit(local_farm, str(tmp_path / "missing.onnx"))
    with pytest.raises(InvalidInputError, match="a job id is a positive int"):
        kiln.Job(local_farm, 0)
    with pytest.raises(InvalidInputError, match="'host:port'"):
        kiln.Farm("no-port-here")
