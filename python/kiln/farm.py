"""The farm's client: a tuning farm (kilnd) over its public gRPC API (proto/kiln/v1/service.proto),
as the `kiln submit / jobs / watch / fetch / devices / cancel` commands talk to it.

    farm = kiln.Farm("farm.example.org:7070", token="...")
    job = farm.submit("resnet18.onnx", target="llvm -mcpu=znver4", device_key="epyc", trials=512)
    job = farm.submit("resnet18.onnx", target="llvm -mcpu=znver4", device_key="epyc",
                      budget=2000, time=3600)   # spread where the model gains most, as kiln tune
    job.watch()                    # a progress bar, in a terminal or a notebook
    bundle = job.result()          # the tuned bundle

    with kiln.Farm.local("kiln-state") as farm:     # kilnd, a compiler worker and a CPU agent here
        ...

Every failed call raises a FarmError subclass (kiln.errors) carrying kilnd's message and the
gRPC code. The model goes up in 1 MiB chunks read from its file as they are sent, with the FNV-1a
checksum kilnd checks; a bundle comes down the same way, checked before anything is returned or
written.
"""

import contextlib
import datetime
import numbers
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

import grpc

from kiln._kiln import fnv1a64
from kiln._model import model_source
from kiln.errors import (FarmAuthError, FarmError, FarmInvalidArgumentError, FarmNotFoundError,
                         FarmPreconditionError, FarmResourceExhaustedError, FarmTimeoutError,
                         FarmUnavailableError, InvalidInputError, JobCancelledError,
                         JobFailedError, KilnSystemError)
from kiln.v1 import common_pb2, service_pb2, service_pb2_grpc

__all__ = ["Farm", "LocalFarm", "Job", "JobInfo", "DeviceInfo"]

CONNECT_TIMEOUT_S = 5.0  # an unreachable farm is an error after this, never a hang
CALL_TIMEOUT_S = 60.0  # unary calls (GetJob, ListJobs, ...)
MODEL_CHUNK_BYTES = 1 << 20  # as `kiln submit` sends (rpc/model_upload.h)
MAX_MESSAGE_BYTES = 64 << 20  # as every side of the farm sets (rpc/channel.h)
SHOW_UPLOAD_BYTES = 16 << 20  # submit shows a bar for models from this size
WATCH_RETRIES = 8  # a broken progress stream (kilnd restarting) is reopened this often
FNV1A64_BASIS = 14695981039346656037  # base/fnv1a.h

_FINAL_STATES = ("DONE", "FAILED", "CANCELLED")
_STATE_PREFIX = "JOB_STATE_"


# ---- what the farm answers, as flat records --------------------------------------------------


def _time(ms: int) -> Optional[datetime.datetime]:
    """Unix milliseconds as an aware UTC datetime; None for 0 (not yet)."""
    if ms <= 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)


def _state_name(state: int) -> str:
    """JOB_STATE_RUNNING -> "RUNNING"."""
    return common_pb2.JobState.Name(state)[len(_STATE_PREFIX):]


def _parse_state(text: str) -> int:
    """"running", "RUNNING" or "JOB_STATE_RUNNING" -> JOB_STATE_RUNNING."""
    up = str(text).upper()
    if not up.startswith(_STATE_PREFIX):
        up = _STATE_PREFIX + up
    if up not in common_pb2.JobState.keys() or up == "JOB_STATE_UNSPECIFIED":
        raise InvalidInputError(
            f"states: a job state is queued, running, done, failed or cancelled, got {text!r}")
    return common_pb2.JobState.Value(up)


@dataclass(frozen=True)
class JobInfo:
    """A job as the farm sees it (the Job message, flattened): what was asked, its state and
    progress. `dataclasses.asdict(info)` (or a list of them) goes straight into a pandas
    DataFrame. Times are UTC datetimes, None until they happen."""

    id: int
    state: str  # "QUEUED", "RUNNING", "DONE", "FAILED" or "CANCELLED"
    model_name: str
    owner: str
    target: str
    device_key: str
    trials: int  # configs per task (fixed split); under a budget or time, each one's cap (0: none)
    budget: Optional[int]  # measurements over all tasks; None: none (fixed split, or time only)
    time_limit_s: Optional[float]  # seconds of tuning from its start; None: no time limit
    early_stop: Optional[int]  # the scheduler's patience in trials as submitted; None: its default
    priority: int
    tasks_total: int  # tuning tasks extracted from the model (0 until the driver has them)
    tasks_done: int  # tasks that get no more trials
    trials_done: int  # measurements of its tasks in the farm's record log, errors included
    trials_failed: int  # of those, measurements with an error
    best_latency_s: Optional[float]  # the best end-to-end estimate so far; None before any
    phase: str  # what the job's driver is doing ("folding constants", ...)
    error: str  # why it failed, or the reason it was cancelled with
    created_at: Optional[datetime.datetime]
    started_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]  # when the progress counters last changed

    @classmethod
    def from_wire(cls, j: service_pb2.Job) -> "JobInfo":
        p = j.progress
        return cls(id=j.id, state=_state_name(p.state), model_name=j.model_name, owner=j.owner,
                   target=j.target, device_key=j.device_key, trials=j.trials,
                   budget=j.budget or None, time_limit_s=j.time_limit_s or None,
                   early_stop=j.early_stop if j.HasField("early_stop") else None,
                   priority=j.priority, tasks_total=p.tasks_total, tasks_done=p.tasks_done,
                   trials_done=p.trials_done, trials_failed=p.trials_failed,
                   best_latency_s=p.best_latency_s or None, phase=p.phase, error=j.error,
                   created_at=_time(j.created_ms), started_at=_time(j.started_ms),
                   finished_at=_time(j.finished_ms), updated_at=_time(p.updated_ms))

    @property
    def is_final(self) -> bool:
        """Whether the job has ended (DONE, FAILED or CANCELLED)."""
        return self.state in _FINAL_STATES

    @property
    def scheduled(self) -> bool:
        """Whether the task scheduler spreads a budget or time limit (else the fixed split)."""
        return self.budget is not None or self.time_limit_s is not None

    @property
    def planned_trials(self) -> Optional[int]:
        """The measurements the job is to make in all: its budget, or tasks x trials in the
        fixed split; None when not known (tasks not extracted yet, or only a time limit)."""
        if self.budget is not None:
            return self.budget
        if self.scheduled or not self.tasks_total:
            return None
        return self.tasks_total * self.trials

    @property
    def time_elapsed_s(self) -> float:
        """Seconds of its time limit that have passed (up to its end once finished); 0 before
        it started or without a time limit."""
        if self.time_limit_s is None or self.started_at is None:
            return 0.0
        end = self.finished_at or datetime.datetime.now(datetime.timezone.utc)
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def progress(self) -> float:
        """How far the job has got, from 0 to 1, as `kiln watch` and the dashboard draw it: in
        the fixed split the larger of trials_done / (tasks_total x trials) and tasks_done /
        tasks_total; under a budget or time limit the larger of trials_done / budget and the
        time since it started / time_limit_s; 1 once DONE."""
        if self.state == "DONE":
            return 1.0
        fraction = 0.0
        planned = self.planned_trials
        if planned:
            fraction = self.trials_done / planned
        if self.time_limit_s is not None:
            fraction = max(fraction, self.time_elapsed_s / self.time_limit_s)
        if not self.scheduled and self.tasks_total:
            fraction = max(fraction, self.tasks_done / self.tasks_total)
        return min(1.0, max(0.0, fraction))


@dataclass(frozen=True)
class DeviceInfo:
    """A device of the farm as its tracker sees it (DeviceInfo and its capabilities, flattened),
    for a pandas DataFrame like JobInfo."""

    device_id: int  # the tracker's id (changes when the device registers again)
    key: str  # its device key: what submit's device_key names
    state: str  # "online", "busy" or "quarantined"
    quarantine_reason: str
    target: str  # the target string it measures for
    fingerprint: str
    board: str  # the board's model, "" when unknown
    arch: str  # the CPU architecture its agent runs as
    cpu_model: str
    cores: int  # cores usable for measurement
    memory_bytes: int
    driver: str  # driver or runtime version
    emulated: bool  # its agent runs under emulation: its timings are not the board's
    max_threads_per_block: int  # GPUs; 0 elsewhere
    shared_memory_bytes: int  # GPUs; 0 elsewhere
    completed: int  # results it reported, errors included
    in_flight: int  # requests running on it now
    measures_last_minute: int
    registered_at: Optional[datetime.datetime]
    errors: Dict[str, int] = field(default_factory=dict)  # results by error kind ("crash", ...)

    @classmethod
    def from_wire(cls, d: common_pb2.DeviceInfo) -> "DeviceInfo":
        c = d.capabilities
        return cls(device_id=d.device_id, key=d.key, state=d.state,
                   quarantine_reason=d.quarantine_reason, target=d.target,
                   fingerprint=d.fingerprint, board=c.board, arch=c.arch,
                   cpu_model=c.cpu_model, cores=c.cores, memory_bytes=c.memory_bytes,
                   driver=c.driver, emulated=c.emulated,
                   max_threads_per_block=c.max_threads_per_block,
                   shared_memory_bytes=c.shared_memory_bytes, completed=d.completed,
                   in_flight=d.in_flight, measures_last_minute=d.measures_last_minute,
                   registered_at=_time(d.registered_ms), errors=dict(d.errors))


# ---- the connection ------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    """An int, a NumPy integer; not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _read_file(path: Union[str, os.PathLike], what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise KilnSystemError(f"cannot read {what} '{os.fspath(path)}': {e.strerror}") from None


class Farm:
    """A connection to a tuning farm (kilnd's public API over gRPC).

        farm = kiln.Farm("127.0.0.1:7070", token=None, tls=None)
        job = farm.submit("model.onnx", target="llvm -mcpu=native", device_key="cpu", trials=64)

    `token` is sent as the metadata "authorization: Bearer <token>" on every call (None: the
    environment's $KILN_TOKEN, as `kiln` does; "": none). `tls` is None for plaintext, a path to
    the CA certificate(s) (PEM) to trust, or True for the system's roots. Connecting waits at
    most `connect_timeout` seconds: an unreachable farm raises FarmUnavailableError naming the
    address, never hangs. A Farm is a context manager that closes its channel; it may be shared
    between threads.

    Every failed call raises a kiln.errors.FarmError subclass carrying kilnd's message and the
    gRPC code: FarmUnavailableError, FarmAuthError, FarmNotFoundError, FarmInvalidArgumentError,
    FarmResourceExhaustedError, FarmPreconditionError, FarmTimeoutError.
    """

    def __init__(self, address: str, token: Optional[str] = None,
                 tls: Union[None, bool, str, os.PathLike] = None, *,
                 connect_timeout: float = CONNECT_TIMEOUT_S) -> None:
        if not isinstance(address, str) or ":" not in address:
            raise InvalidInputError(f"a farm's address is 'host:port', got {address!r}")
        self.address = address
        if token is None:
            token = os.environ.get("KILN_TOKEN", "")
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._tls = tls is not None and tls is not False
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        if not self._tls:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            roots = None if tls is True else _read_file(tls, "TLS CA certificate")
            creds = grpc.ssl_channel_credentials(root_certificates=roots)
            self._channel = grpc.secure_channel(address, creds, options=options)
        self._stub = service_pb2_grpc.KilnServiceStub(self._channel)
        try:
            self._connect(connect_timeout)
        except BaseException:
            self._channel.close()
            raise

    def _connect(self, timeout: float) -> None:
        """Waits until the channel is connected; FarmUnavailableError when the connection fails
        or takes longer than `timeout` seconds."""
        settled = threading.Event()
        outcome: List[grpc.ChannelConnectivity] = []  # the first settled state
        final = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                 grpc.ChannelConnectivity.SHUTDOWN)

        def on_state(state: grpc.ChannelConnectivity) -> None:  # on gRPC's thread
            if state in final and not settled.is_set():
                outcome.append(state)
                settled.set()

        self._channel.subscribe(on_state, try_to_connect=True)
        try:
            in_time = settled.wait(timeout)
        finally:
            self._channel.unsubscribe(on_state)
        if not in_time:
            raise FarmUnavailableError(
                f"cannot reach kilnd at {self.address} (no connection within {timeout:g} s)",
                code=grpc.StatusCode.UNAVAILABLE, address=self.address)
        if outcome[0] != grpc.ChannelConnectivity.READY:
            hint = ", and is `tls` the farm's CA?" if self._tls else "?"
            raise FarmUnavailableError(
                f"cannot reach kilnd at {self.address} (the connection failed; is kilnd "
                f"running there{hint})", code=grpc.StatusCode.UNAVAILABLE, address=self.address)

    def close(self) -> None:
        """Closes the channel; calls after this fail."""
        self._channel.close()

    def __enter__(self) -> "Farm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<kiln.Farm {self.address}>"

    # -- errors --

    def _error(self, e: grpc.RpcError) -> FarmError:
        """The FarmError for a failed call: "<kilnd's message> (<CODE>)"."""
        code, details = e.code(), e.details() or ""
        kw = dict(code=code, details=details, address=self.address)
        if code == grpc.StatusCode.UNAVAILABLE:
            return FarmUnavailableError(f"cannot reach kilnd at {self.address} ({details})", **kw)
        message = f"{details} ({code.name})"
        cls = {
            grpc.StatusCode.UNAUTHENTICATED: FarmAuthError,
            grpc.StatusCode.PERMISSION_DENIED: FarmAuthError,
            grpc.StatusCode.NOT_FOUND: FarmNotFoundError,
            grpc.StatusCode.INVALID_ARGUMENT: FarmInvalidArgumentError,
            grpc.StatusCode.RESOURCE_EXHAUSTED: FarmResourceExhaustedError,
            grpc.StatusCode.FAILED_PRECONDITION: FarmPreconditionError,
            grpc.StatusCode.DEADLINE_EXCEEDED: FarmTimeoutError,
        }.get(code, FarmError)
        if code == grpc.StatusCode.UNIMPLEMENTED:
            message += f"; is {self.address} a kilnd that serves kiln.v1?"
        return cls(message, **kw)

    def _unary(self, method: str, request: Any, timeout: Optional[float] = CALL_TIMEOUT_S) -> Any:
        try:
            return getattr(self._stub, method)(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _stream(self, method: str, request: Any, timeout: Optional[float] = None) -> Any:
        """A server stream; iterating it raises grpc.RpcError (the caller maps it)."""
        return getattr(self._stub, method)(request, metadata=self._metadata, timeout=timeout)

    # -- the calls --

    def submit(self, model: Any, *, target: str, device_key: str, trials: Optional[int] = None,
               budget: Optional[int] = None, time: Optional[float] = None,
               early_stop: Optional[int] = None,
               input_shapes: Optional[Dict[str, Sequence[int]]] = None,
               name: Optional[str] = None, priority: int = 0, owner: Optional[str] = None,
               example_inputs: Any = None, input_names: Optional[Sequence[str]] = None,
               progress: bool = True) -> "Job":
        """Submits `model` to be tuned on the farm's devices of `device_key`; returns its Job.

        `model` is a path to an .onnx file, its bytes, an onnx.ModelProto, or a torch.nn.Module
        with `example_inputs` (exported here with every shape bound from them; `input_names`
        names its inputs). `target` is what to tune for ("llvm -mcpu=znver4", "cuda
        -arch=sm_90", ...), `input_shapes` the sizes of the model's symbolic dimensions
        ({"input": (1, 3, 224, 224)}), `name` the job's name (default: the file's or graph's
        name), `owner` whose job it is (default: $USER).

        How much to measure, as `kiln tune` (give `trials`, `budget` or `time`):
        `trials` alone: each task in turn gets that many measured configs. With `budget`
        (measurements over all the model's tasks) and / or `time` (seconds, counted from when the
        job starts running, retries included), the farm's task scheduler gives every task a first
        round and then each round to the task where the model's estimated latency drops most;
        `trials` then caps each task, and `early_stop` (trials without a 1% gain before a task gets
        no more; 0: never; default 32) applies. Measurements count from the farm's record log:
        what earlier jobs measured of the same tasks counts as trials and against the budget.

        The model goes up in 1 MiB chunks, read from its file as they are sent (any size up to
        the farm's --max-model-bytes; never the whole file in memory), with its size announced
        first and its FNV-1a checksum last; a bar shows the upload of models from 16 MiB when
        `progress` is true. kilnd checks that the model imports before it takes the job:
        FarmInvalidArgumentError names the problem otherwise, FarmNotFoundError an unknown
        device key, FarmResourceExhaustedError a model over the farm's limit (both sizes).
        """
        if not isinstance(target, str) or not target:
            raise InvalidInputError(f"target must be a target string such as "
                                    f"'llvm -mcpu=native', got {target!r}")
        if not isinstance(device_key, str) or not device_key:
            raise InvalidInputError(f"device_key must name the farm's devices (farm.devices() "
                                    f"lists them), got {device_key!r}")
        if trials is not None and (not _is_int(trials) or not 0 < trials < 1 << 32):
            raise InvalidInputError(f"trials must be a positive int, got {trials!r}")
        if budget is not None and (not _is_int(budget) or not 0 < budget < 1 << 32):
            raise InvalidInputError(f"budget must be a positive int (measurements over all "
                                    f"tasks), got {budget!r}")
        if time is not None and (isinstance(time, bool) or not isinstance(time, numbers.Real)
                                 or not 0 < time < float("inf")):
            raise InvalidInputError(f"time must be a positive number of seconds, got {time!r}")
        scheduled = budget is not None or time is not None
        if trials is None and not scheduled:
            raise InvalidInputError("submit needs trials (per task), a budget or a time limit")
        if early_stop is not None:
            if not scheduled:
                raise InvalidInputError(f"early_stop ({early_stop!r}) needs a budget or a time "
                                        f"limit: without them each task gets its trials")
            if not _is_int(early_stop) or not 0 <= early_stop < 1 << 32:
                raise InvalidInputError(f"early_stop must be an int >= 0 (trials; 0: never stop "
                                        f"a task early), got {early_stop!r}")
        if not _is_int(priority) or not -(1 << 31) <= priority < 1 << 31:
            raise InvalidInputError(f"priority must be a 32-bit int, got {priority!r}")
        src = model_source(model, input_shapes=input_shapes, example_inputs=example_inputs,
                           input_names=input_names, name=name)
        size = src.size()
        if size == 0:
            raise InvalidInputError(f"the model {src.path or src.name!r} is empty")
        job = service_pb2.SubmitModelRequest(
            name=src.name, target=target, device_key=device_key, trials=int(trials or 0),
            budget=int(budget or 0), time_limit_s=float(time or 0),
            priority=int(priority), owner=os.environ.get("USER", "") if owner is None else owner,
            model_size=size)
        if early_stop is not None:
            job.early_stop = int(early_stop)
        for input_name, dims in src.input_shapes.items():
            job.input_shapes.add(name=input_name, dims=list(dims))

        bar = None
        if progress and size >= SHOW_UPLOAD_BYTES:
            from tqdm.auto import tqdm

            bar = tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024,
                       desc=f"uploading {src.name}")
        # The request iterator runs on gRPC's thread: an error reading the model is kept here
        # and raised instead of the CANCELLED it turns the call into.
        read_error: List[BaseException] = []

        def messages() -> Iterator[service_pb2.ModelUpload]:
            try:
                yield service_pb2.ModelUpload(job=job)
                sent, h = 0, FNV1A64_BASIS
                with src.open() as f:
                    while sent < size:
                        chunk = f.read(min(MODEL_CHUNK_BYTES, size - sent))
                        if not chunk:
                            raise InvalidInputError(
                                f"the model {src.path or src.name!r} ended after {sent} of "
                                f"{size} bytes (was it changed while being sent?)")
                        h = fnv1a64(chunk, h)
                        yield service_pb2.ModelUpload(chunk=chunk)
                        sent += len(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                yield service_pb2.ModelUpload(checksum=h)
            except BaseException as e:  # noqa: B902 -- re-raised on the caller's thread
                read_error.append(e)
                raise

        try:
            # No deadline: a big model on a slow link takes long (an unreachable farm failed
            # when connecting).
            resp = self._stub.SubmitModel(messages(), metadata=self._metadata)
        except grpc.RpcError as e:
            if read_error:
                raise read_error[0] from None
            raise self._error(e) from None
        finally:
            if bar is not None:
                bar.close()
        return Job(self, resp.job_id)

    def job(self, job_id: int) -> "Job":
        """The Job of an existing id (FarmNotFoundError when the farm has none)."""
        job = Job(self, job_id)
        job.info()
        return job

    def jobs(self, owner: Optional[str] = None,
             states: Union[None, str, Sequence[str]] = None) -> List[JobInfo]:
        """The farm's jobs, oldest first, as JobInfo records: only `owner`'s when given, only
        those in `states` ("queued", "running", "done", "failed", "cancelled"; one or a list)
        when given. `pandas.DataFrame(farm.jobs())` makes a table of them."""
        if isinstance(states, str):
            states = [states]
        req = service_pb2.ListJobsRequest(owner=owner or "",
                                          states=[_parse_state(s) for s in states or ()])
        return [JobInfo.from_wire(j) for j in self._unary("ListJobs", req).jobs]

    def devices(self, key: Optional[str] = None) -> List[DeviceInfo]:
        """The farm's devices as DeviceInfo records, only those of `key` when given."""
        req = service_pb2.ListDevicesRequest(key=key or "")
        return [DeviceInfo.from_wire(d) for d in self._unary("ListDevices", req).devices]

    # -- the embedded farm --

    @classmethod
    @contextlib.contextmanager
    def local(cls, state_dir: Union[str, os.PathLike], workers: int = 1,
              agent: Optional[str] = "cpu",
              token: Optional[str] = None, *, max_model_bytes: Optional[int] = None,
              kilnd_args: Sequence[str] = (),
              start_timeout: float = 60.0) -> Iterator["LocalFarm"]:
        """A whole farm on this machine, for as long as the `with` block runs:

            with kiln.Farm.local("kiln-state") as farm:
                print(farm.dashboard_url)
                job = farm.submit(model, target="llvm -mcpu=native", device_key="cpu", trials=64)

        Starts the package's kilnd on free ports of 127.0.0.1 with `workers` compiler workers
        and a CPU agent of device key `agent` (None: no agent), jobs, models, bundles and the
        record log in `state_dir` (kept: tuning the same model again measures nothing twice),
        kilnd's output in STATE/kilnd.log. `token` (None: none) is asked of every call,
        `max_model_bytes` sets kilnd's limit on models (2 GiB by default), `kilnd_args` are
        more of kilnd's flags. Waits until the agent is listed, then yields a connected
        LocalFarm; on leaving, even through an exception, stops kilnd and its children.
        """
        kilnd = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kilnd")
        if not os.access(kilnd, os.X_OK):
            raise KilnSystemError(f"the embedded farm needs kilnd, not found at {kilnd} "
                                  "(is the package installed whole?)")
        if not _is_int(workers) or workers < 0:
            raise InvalidInputError(f"workers must be a count of compiler workers, got "
                                    f"{workers!r}")
        state = os.path.abspath(os.fspath(state_dir))
        os.makedirs(state, exist_ok=True)
        argv = [kilnd, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--state", state,
                "--local-workers", str(workers)]
        if agent:
            argv += ["--local-agent", agent]
        if token:
            token_file = os.path.join(state, "kilnd.token")
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
            argv += ["--token-file", token_file]
        if max_model_bytes is not None:
            argv += ["--max-model-bytes", str(int(max_model_bytes))]
        argv += [str(a) for a in kilnd_args]

        out_path, log_path = os.path.join(state, "kilnd.out"), os.path.join(state, "kilnd.log")
        env = dict(os.environ)
        env.pop("KILN_TOKEN", None)  # kilnd would ask for it; `token` alone decides
        with open(out_path, "wb") as out, open(log_path, "wb") as log:
            # Its own process group, so that whatever it leaves behind can be stopped with it.
            process = subprocess.Popen(argv, stdout=out, stderr=log, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
        farm: Optional[LocalFarm] = None
        try:
            grpc_address, http_address = _wait_listening(process, out_path, log_path,
                                                         start_timeout)
            farm = LocalFarm(grpc_address, token=token or "", process=process, state_dir=state,
                             dashboard_url=f"http://{http_address}/", log_path=log_path)
            if agent:
                farm._wait_for_devices(agent, start_timeout)
            yield farm
        finally:
            if farm is not None:
                farm.close()
            _stop(process)


def _log_tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, "r", errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def _wait_listening(process: subprocess.Popen, out_path: str, log_path: str,
                    timeout: float) -> "tuple[str, str]":
    """kilnd's addresses from its first stdout line ("kilnd listening grpc=H:P http=H:P ...")."""
    deadline = time.monotonic() + timeout
    while True:
        with open(out_path, "r", errors="replace") as f:
            line = f.readline()
        if line.startswith("kilnd listening") and line.endswith("\n"):
            fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
            return fields["grpc"], fields["http"]
        if process.poll() is not None:
            raise KilnSystemError(f"kilnd exited with status {process.returncode} before "
                                  f"listening:\n{_log_tail(log_path)}")
        if time.monotonic() > deadline:
            raise KilnSystemError(f"kilnd did not start listening within {timeout:g} s "
                                  f"(its log: {log_path})")
        time.sleep(0.05)


def _exited(pid: int) -> bool:
    """Whether child `pid` has ended, without reaping it: while it is unreaped, its process
    group's id cannot be taken by another process."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True


def _stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stops kilnd as SIGTERM asks (it stops its workers, agent and job drivers), waiting at
    most `grace_s`, then SIGKILLs whatever is left of the process group it leads."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while not _exited(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class LocalFarm(Farm):
    """The embedded farm Farm.local starts: a Farm connected to it, with where to look.

    Attributes: `dashboard_url` (kilnd's page of jobs and devices, its JSON API and /metrics),
    `state_dir`, `log_path` (kilnd's log), `pid` (kilnd's process id)."""

    def __init__(self, address: str, *, token: str, process: subprocess.Popen, state_dir: str,
                 dashboard_url: str, log_path: str) -> None:
        super().__init__(address, token=token)
        self.process = process
        self.pid = process.pid
        self.state_dir = state_dir
        self.dashboard_url = dashboard_url
        self.log_path = log_path

    def _wait_for_devices(self, key: str, timeout: float) -> None:
        """Waits until a device of `key` (the local agent) is registered."""
        deadline = time.monotonic() + timeout
        while not self.devices(key):
            if self.process.poll() is not None:
                raise KilnSystemError(f"kilnd exited with status {self.process.returncode}:\n"
                                      f"{_log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise KilnSystemError(
                    f"the local agent '{key}' did not register within {timeout:g} s (its log: "
                    f"{os.path.join(self.state_dir, 'sides')})")
            time.sleep(0.1)

    def __repr__(self) -> str:
        return f"<kiln.LocalFarm {self.address} pid={self.pid} state={self.state_dir}>"


# ---- a job ---------------------------------------------------------------------------------


def _latency(seconds: float) -> str:
    """0.000123 -> "123 us", 0.0456 -> "45.6 ms"; "-" for none yet."""
    if seconds <= 0:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e3:.4g} ms"


class _ProgressBar:
    """A tqdm bar over a job's progress (JobInfo.progress), in a terminal or a notebook
    (tqdm.auto): over its measurements (the budget, or tasks x trials) or, when only a time
    limit bounds it, over the limit's seconds; the state, tasks, failures, best latency and phase
    beside it."""

    def __init__(self, job_id: int) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=None, desc=f"job {job_id}", unit="trial", dynamic_ncols=True)

    def show(self, info: JobInfo) -> None:
        planned = info.planned_trials
        if planned:
            total = planned
        elif info.time_limit_s is not None:
            total = max(1, round(info.time_limit_s))
            self._bar.unit = "s"
        else:
            total = None
        if total:
            self._bar.total = total
            n = round(info.progress * total)
        else:
            n = info.trials_done
        text = (f"{info.state} tasks {info.tasks_done}/{info.tasks_total} "
                f"trials {info.trials_done} failed {info.trials_failed} "
                f"best {_latency(info.best_latency_s or 0)}")
        if info.state == "RUNNING" and info.phase:
            phase = info.phase
            text += f" {phase[:37] + '...' if len(phase) > 40 else phase}"
        self._bar.set_postfix_str(text, refresh=False)
        if n > self._bar.n:
            self._bar.update(n - self._bar.n)  # keeps tqdm's rate
        else:
            self._bar.n = n
            self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


class Job:
    """A tuning job on a farm (what Farm.submit returns, or Farm.job(id)).

        job.info()          # its state and progress now (JobInfo)
        job.watch()         # follows it to its end with a progress bar; the final JobInfo
        job.result()        # waits until DONE and returns the tuned bundle
        job.fetch("m.kiln") # writes the bundle of a DONE job to a file
        job.cancel()
    """

    def __init__(self, farm: Farm, job_id: int) -> None:
        if not _is_int(job_id) or job_id <= 0:
            raise InvalidInputError(f"a job id is a positive int, got {job_id!r}")
        self.farm = farm
        self.id = int(job_id)

    def __repr__(self) -> str:
        return f"<kiln.Job {self.id} on {self.farm.address}>"

    def info(self) -> JobInfo:
        """The job's state and progress now."""
        return JobInfo.from_wire(self._wire())

    def _wire(self) -> service_pb2.Job:
        return self.farm._unary("GetJob", service_pb2.GetJobRequest(job_id=self.id))

    def watch(self, progress: bool = True, timeout: Optional[float] = None) -> JobInfo:
        """Follows the job until it ends and returns its final JobInfo when it is DONE.

        With `progress`, a tqdm bar (terminal or notebook) shows JobInfo.progress (the
        measurements against the budget, or the time against the time limit), the tasks done,
        failures, the best latency so far and what the job's driver is doing. Raises
        JobFailedError with kilnd's reason if the job FAILED, JobCancelledError if it was
        cancelled, FarmTimeoutError when `timeout` seconds pass first. A progress stream that
        breaks (kilnd restarting) is opened again, with a pause growing up to 4 s.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self._wire()
        state = _state_name(job.progress.state)
        bar = _ProgressBar(self.id) if progress else None
        try:
            retries = 0
            while state not in _FINAL_STATES:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise FarmTimeoutError(
                        f"job {self.id} is still {state} after {timeout:g} s",
                        address=self.farm.address)
                got, broken = False, None
                stream = self.farm._stream(
                    "WatchJob", service_pb2.WatchJobRequest(job_id=self.id), remaining)
                try:
                    for p in stream:
                        got, state = True, _state_name(p.state)
                        if bar is not None:
                            # A time limit counts from the job's start, which a job queued when
                            # the watch began lacks.
                            if job.time_limit_s and not job.started_ms and state != "QUEUED":
                                job = self._wire()
                            job.progress.CopyFrom(p)
                            bar.show(JobInfo.from_wire(job))
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                        continue  # the loop's check says so
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise self.farm._error(e) from None
                    broken = e
                if state in _FINAL_STATES:
                    break
                # The stream broke (kilnd restarting) or ended before the job did: again, later.
                retries = 1 if got else retries + 1
                if retries > WATCH_RETRIES:
                    if broken is not None:
                        raise self.farm._error(broken)
                    raise FarmError(f"the progress stream of job {self.id} keeps ending before "
                                    f"the job does (last state {state})",
                                    address=self.farm.address)
                time.sleep(min(4.0, 0.25 * (1 << retries)))
        finally:
            if bar is not None:
                bar.close()
        info = self.info()  # the final word, with the error
        where = self.farm.address
        if info.state == "FAILED":
            raise JobFailedError(f"job {self.id} failed: {info.error or '(no reason given)'}",
                                 info=info, address=where)
        if info.state == "CANCELLED":
            raise JobCancelledError(
                f"job {self.id} was cancelled" + (f" ({info.error})" if info.error else ""),
                info=info, address=where)
        return info

    def result(self, timeout: Optional[float] = None, progress: bool = False) -> Any:
        """Waits until the job is DONE (Job.watch, with a bar when `progress`), fetches its
        tuned bundle into memory and returns it as a kiln.Bundle, ready to run (the bundle's
        bytes when this package has no kiln.Bundle.from_bytes). Raises as watch does."""
        self.watch(progress=progress, timeout=timeout)
        parts: List[bytes] = []
        self._download(parts.append)
        data = b"".join(parts)
        import kiln

        bundle = getattr(kiln, "Bundle", None)
        if bundle is not None and hasattr(bundle, "from_bytes"):
            return bundle.from_bytes(data, f"job {self.id} on {self.farm.address}")
        return data

    def fetch(self, path: Union[None, str, os.PathLike] = None) -> str:
        """Writes the tuned bundle of this DONE job to `path` (default: job<ID>.kiln; a folder:
        that name in it) and returns the path. The file appears only once every chunk has
        arrived and the checksum matches (written to a temporary file beside it, then renamed).
        FarmPreconditionError when the job is not done (Job.result waits for it)."""
        out = os.fspath(path) if path is not None else f"job{self.id}.kiln"
        if os.path.isdir(out):
            out = os.path.join(out, f"job{self.id}.kiln")
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".",
                                   suffix=".tmp", dir=os.path.dirname(os.path.abspath(out)))
        try:
            with os.fdopen(fd, "wb") as f:
                self._download(f.write)
            os.replace(tmp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        return out

    def _download(self, write: Callable[[bytes], Any]) -> int:
        """FetchBundle's chunks handed to `write` in order, each checked as `kiln fetch` does
        (offsets, total size, the final checksum); returns the size. A FarmError names the
        first problem (the caller drops what was written)."""
        what = f"fetching the bundle of job {self.id}"
        received, total, h = 0, None, FNV1A64_BASIS
        ended = False
        stream = self.farm._stream("FetchBundle", service_pb2.FetchBundleRequest(job_id=self.id))
        problem = None
        try:
            for c in stream:
                if ended:
                    problem = "a chunk came after the last one"
                elif c.offset != received:
                    problem = (f"chunk at offset {c.offset}, expected {received} (a gap or an "
                               "overlap)")
                elif total is not None and c.total_size != total:
                    problem = f"the total size changed from {total} to {c.total_size} bytes"
                elif received + len(c.data) > c.total_size:
                    problem = f"chunks run past the total size of {c.total_size} bytes"
                if problem:
                    break
                total = c.total_size
                write(c.data)
                h = fnv1a64(c.data, h)
                received += len(c.data)
                if c.last:
                    ended = True
                    if received != total:
                        problem = f"the last chunk ends at {received} bytes of {total}"
                    elif c.checksum != h:
                        problem = (f"checksum mismatch: the server says {c.checksum:016x}, the "
                                   f"received bytes hash to {h:016x}")
                    if problem:
                        break
        except grpc.RpcError as e:
            raise self.farm._error(e) from None
        finally:
            stream.cancel()  # a no-op once the stream has ended
        if problem:
            raise FarmError(f"{what}: {problem}", address=self.farm.address)
        if not ended:
            raise FarmError(f"{what}: the stream ended after {received} of {total or 0} bytes "
                            "without its last chunk", address=self.farm.address)
        return received

    def cancel(self, reason: str = "") -> JobInfo:
        """Stops the job if it is queued or running and returns its JobInfo (now CANCELLED);
        `reason` is recorded with it. FarmPreconditionError when it has already ended."""
        req = service_pb2.CancelJobRequest(job_id=self.id, reason=reason)
        return JobInfo.from_wire(self.farm._unary("CancelJob", req))
