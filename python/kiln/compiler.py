"""The compiler in this process: kiln.compile, kiln.tune and kiln.quantize, the same builds as
`kiln compile`, `kiln tune` and `kiln quantize` (one C++ implementation behind both)."""

import os
import sys
import tempfile
from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from kiln import _kiln
from kiln._model import model_source
from kiln.bundle import Bundle
from kiln.errors import InvalidInputError

#: What a progress argument may be: True (a bar on stderr), False / None, or a callable given
#: each event as a dict ({"stage": "build" | "tasks" | "tune" | "task_done" | "quantize", ...}).
Progress = Union[bool, None, Callable[[Dict[str, Any]], None]]

DEFAULT_TARGET = "llvm -mcpu=native"


class _Bars:
    """Progress events drawn as tqdm bars (tqdm.auto: a widget in a notebook, text elsewhere)."""

    def __init__(self, desc: str):
        from tqdm.auto import tqdm

        self._tqdm, self._desc = tqdm, desc
        self._build = self._tasks = None

    def __call__(self, e: Dict[str, Any]) -> None:
        stage = e["stage"]
        if stage == "build":
            if self._build is None:
                self._build = self._tqdm(total=e["total"], desc=f"{self._desc}: compiling",
                                         unit="kernel", file=sys.stderr, leave=False)
            self._build.n = e["index"]
            self._build.set_postfix_str(e["what"][:40], refresh=True)
        elif stage == "tasks":
            self._tasks = self._tqdm(total=e["total"], desc=f"{self._desc}: tuning", unit="task",
                                     file=sys.stderr)
        elif stage == "tune" and self._tasks is not None:
            model = (f", model est. {e['estimated_latency_ms']:.3f} ms"
                     if e.get("estimated_latency_ms") else "")
            self._tasks.set_postfix_str(
                f"task {e['task'] + 1}: {e['trials_done']}/{e['trials_total']} trials, "
                f"best {e['best_gflops']:.1f} GFLOP/s{model}", refresh=True)
        elif stage == "task_done" and self._tasks is not None:
            self._tasks.update(1)
        elif stage == "quantize":
            print(f"{self._desc}: {e['what']}", file=sys.stderr)

    def close(self) -> None:
        for bar in (self._build, self._tasks):
            if bar is not None:
                bar.close()


def _progress(progress: Progress, desc: str):
    if progress is True:
        return _Bars(desc)
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise InvalidInputError(f"progress must be True, False or a callable, got {progress!r}")
    return progress


def _build(progress: Progress, name: str, target: str, output, call) -> Bundle:
    """Runs `call(progress callable)`, one of _kiln's builds returning (bundle bytes, report),
    with the bars closed however it ends; the Bundle, saved to `output` when given."""
    bars = _progress(progress, name)
    try:
        data, report = call(bars)
    finally:
        if isinstance(bars, _Bars):
            bars.close()
    bundle = _bundle(data, name + ".kiln", target)
    bundle.report = report
    if output is not None:
        bundle.save(output)
    return bundle


def compile(model: Any, target: str = DEFAULT_TARGET, *,
            input_shapes: Optional[Dict[str, Sequence[int]]] = None, example_inputs=None,
            records: Optional[Union[str, os.PathLike]] = None, fuse: bool = True,
            layout: bool = True, precision: str = "fp32",
            output: Optional[Union[str, os.PathLike]] = None,
            progress: Progress = True) -> Bundle:
    """Compiles `model` (a path, ONNX bytes, an onnx.ModelProto, or a torch.nn.Module with
    `example_inputs`) for `target` and returns the Bundle, ready to run (and written to `output`
    when given). `input_shapes` binds symbolic dimensions ({"input": (1, 3, 224, 224)}).
    With `records` (a record log's folder, as kiln tune writes), every tunable operator gets the
    log's best config, or, never measured, the config the log's cost model predicts best;
    `bundle.report` says how many did ("tuned", "predicted") and how many kept the default.
    Targets: "llvm -mcpu=native" (this CPU), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53",
    "opencl", "cuda -arch=sm_90", "vdla".
    `precision` "bf16" gives the convolutions and dense products bf16 operands with float32 sums
    (as kiln compile --precision bf16; an x86 target with avx512_bf16, else InvalidInputError);
    `bundle.report` counts them ("bf16_convolutions", "bf16_products")."""
    src = model_source(model, input_shapes=input_shapes, example_inputs=example_inputs)
    if precision not in ("fp32", "bf16"):
        raise InvalidInputError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    if records is not None and not os.path.isdir(os.fspath(records)):
        raise InvalidInputError(f"{os.fspath(records)}: no such record log")
    return _build(progress, src.name, target, output, lambda bars: _kiln.compile(
        src.path or "", src.data, src.name, target, src.input_shapes,
        os.fspath(records) if records is not None else "", fuse, layout, precision, bars))


def tune(model: Any, target: str = DEFAULT_TARGET, *, trials: Optional[int] = None,
         budget: Optional[int] = None, time: Optional[float] = None,
         records: Union[str, os.PathLike] = "kiln-records",
         input_shapes: Optional[Dict[str, Sequence[int]]] = None, example_inputs=None,
         explorer: str = "xgb", cost_model: str = "xgb", transfer: bool = True,
         batch: int = 16, seed: int = 1,
         threads: Optional[int] = None,
         output: Optional[Union[str, os.PathLike]] = None,
         progress: Progress = True) -> Bundle:
    """Tunes the model's operators on this machine (`trials` measured configs per task, 200
    when not given, each in a guarded child), every measurement kept in the record log `records`
    (created or resumed: nothing is measured twice), then builds the Bundle with each task's
    best config.
    With `budget` (measurements over all tasks, the log's included) and / or `time` (seconds),
    the task scheduler spreads them where the model's estimated latency drops most, each task
    getting at most `trials` (when given) and none after it stopped improving; the progress
    events carry "estimated_latency_ms".
    `explorer`: "xgb" (the cost model guides the search), "random", "grid" or "ga";
    `cost_model`, the model of the "xgb" explorer: "xgb" (gradient-boosted trees) or "mlp" (a
    small neural network). With `transfer` (the default) the search starts from that model
    pre-trained on every record `records` holds for the target (other models' too), kept in the
    log and trained again after the run; `bundle.report["cost_model"]` says what it learned from.
    Tasks left with no successful measurement get the config it predicts best
    (`report["predicted"]`)."""
    src = model_source(model, input_shapes=input_shapes, example_inputs=example_inputs)
    for name, value in (("trials", 200 if trials is None else trials), ("batch", batch)):
        if not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"{name} must be a positive int, got {value!r}")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise InvalidInputError(f"budget must be a positive int, got {budget!r}")
    if time is not None and (not isinstance(time, (int, float)) or not time > 0):
        raise InvalidInputError(f"time must be a positive number of seconds, got {time!r}")
    if seed < 0:
        raise InvalidInputError(f"seed must be >= 0, got {seed}")
    return _build(progress, src.name, target, output, lambda bars: _kiln.tune(
        src.path or "", src.data, src.name, target, src.input_shapes, os.fspath(records),
        trials or 0, budget or 0, float(time or 0), explorer, cost_model, bool(transfer), batch,
        seed, threads or 0, bars))


def quantize(model: Any, calibration: Sequence[Any], *,
             input_shapes: Optional[Dict[str, Sequence[int]]] = None, example_inputs=None,
             output: Optional[Union[str, os.PathLike]] = None, scales: str = "float",
             progress: Progress = True) -> bytes:
    """Quantizes a float model to int8, as kiln quantize does, and returns the QDQ model's bytes
    (also written to `output` when given); kiln.compile builds its convolutions as integer
    kernels. `calibration` is a list of samples, each an array (a model of one input) or a tuple
    of arrays in the model's input order. `scales`: "float" (per-channel symmetric int8 weights,
    asymmetric uint8 activations) or "pow2" (power-of-two scales, the VDLA's QConv)."""
    if scales not in ("float", "pow2"):
        raise InvalidInputError(f"scales must be 'float' or 'pow2', got {scales!r}")
    src = model_source(model, input_shapes=input_shapes, example_inputs=example_inputs)
    if len(calibration) == 0:
        raise InvalidInputError("quantizing needs calibration data: at least one sample")
    bars = _progress(progress, src.name)
    with tempfile.TemporaryDirectory(prefix="kiln-quantize-") as tmp:
        path = src.path
        if path is None:
            path = os.path.join(tmp, "model.onnx")
            with open(path, "wb") as f:
                f.write(src.data)
        files = []
        for k, sample in enumerate(calibration):
            arrays = sample if isinstance(sample, (tuple, list)) else (sample,)
            for j, a in enumerate(arrays):
                files.append(os.path.join(tmp, f"sample{k}_input{j}.npy"))
                np.save(files[-1], np.asarray(a))
        data, report = _kiln.quantize(path, files, src.input_shapes, scales, bars)
    if isinstance(bars, _Bars):
        bars.close()
    if output is not None:
        with open(os.fspath(output), "wb") as f:
            f.write(data)
    quantize.last_report = report
    return data


def _bundle(data: bytes, origin: str, target: str) -> Bundle:
    """The build's Bundle: loaded now for the CPU (and the VDLA's simulator beside it); for a GPU
    target on first use, so a machine without that GPU can still save it."""
    word = target.split()[0] if target.split() else ""
    if word in ("cuda", "opencl"):
        return Bundle._unloaded(data, origin, word)
    return Bundle.from_bytes(data, origin)
