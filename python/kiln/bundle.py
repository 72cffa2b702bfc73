"""The runtime from Python: a compiled model (a bundle) loaded and run on NumPy arrays."""

import os
import shutil
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from kiln import _kiln
from kiln.errors import InvalidInputError


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a bundle."""

    name: str
    shape: Tuple[int, ...]
    dtype: str  #: a NumPy dtype name: "float32", "int64", "bool", ...
    has_default: bool = False  #: an input the model gives a value, which may be left out


def _as_array(value: Any, info: TensorInfo) -> np.ndarray:
    """`value` as a C-contiguous NumPy array, without a copy where it already is one; DLPack
    tensors (PyTorch's, on the CPU) are read in place."""
    if isinstance(value, np.ndarray):
        return value if value.flags.c_contiguous else np.ascontiguousarray(value)
    if hasattr(value, "__dlpack__"):
        try:
            return np.ascontiguousarray(np.from_dlpack(value))
        except (RuntimeError, TypeError, BufferError) as e:
            raise InvalidInputError(f"input '{info.name}': cannot read it through DLPack ({e}); "
                                    "a tensor on a GPU must be copied to the CPU first") from None
    # Lists and scalars take the input's dtype; arrays keep theirs (and a wrong one is an error).
    return np.ascontiguousarray(np.asarray(value, dtype=info.dtype))


class Bundle:
    """A compiled model: the executor's graph, its kernels and its parameters, loaded to run.

        b = kiln.Bundle("resnet18.kiln")
        (y,) = b.run(x)                    # or b.run(input=x): by the input's name
        rows = b.profile(x, runs=20)       # where the time goes, per kernel

    Inputs are NumPy arrays (or anything with __dlpack__, such as a CPU torch.Tensor, read in
    place, or a list); each must have its input's shape and dtype, and an error names the input
    and both. Outputs are new NumPy arrays; `torch.from_dlpack(y)` shares their memory. `run`
    releases the GIL: two threads can run two bundles at once.
    """

    def __init__(self, path: Union[str, os.PathLike], *, device: str = "cpu",
                 threads: Optional[int] = None):
        """Loads the bundle file at `path` for `device` ("cpu", or "cuda" / "opencl" for a GPU
        bundle, "vdla" for one with VDLA programs). `threads` resizes the runtime's thread pool,
        which every bundle of this process shares (kiln.set_num_threads)."""
        self._path: Optional[str] = os.fspath(path)
        self._data: Optional[bytes] = None
        self.report: Dict[str, Any] = {}  #: what the build did (kiln.compile / kiln.tune)
        if not os.path.isfile(self._path):
            raise InvalidInputError(f"{self._path}: no such bundle file")
        self._init(_kiln.Executor(self._path, device), threads)

    @classmethod
    def from_bytes(cls, data: bytes, origin: str = "<memory>", *, device: str = "cpu",
                   threads: Optional[int] = None) -> "Bundle":
        """A bundle from its bytes (what kiln.compile builds and a farm's job fetches); `origin`
        names it in errors."""
        self = cls.__new__(cls)
        self._path, self._data, self.report = None, bytes(data), {}
        self._init(_kiln.Executor(self._data, origin, device), threads)
        return self

    @classmethod
    def _unloaded(cls, data: bytes, origin: str, device: str) -> "Bundle":
        """A bundle for a device this machine may not have (a GPU target's build): loaded on
        first use, so that it can be saved where it cannot run."""
        self = cls.__new__(cls)
        self._path, self._data, self.report = None, bytes(data), {}
        self._pending = (origin, device)
        return self

    def __getattr__(self, name: str):
        # Only reached for attributes not set yet: an _unloaded bundle's executor and tables.
        pending = self.__dict__.get("_pending")
        if pending is None or name.startswith("__"):
            raise AttributeError(name)
        del self.__dict__["_pending"]
        self._init(_kiln.Executor(self._data, pending[0], pending[1]), None)
        return getattr(self, name)

    def _init(self, executor, threads: Optional[int]) -> None:
        self._exec = executor
        if threads is not None:
            if threads < 1:
                raise InvalidInputError(f"threads must be at least 1, got {threads}")
            _kiln.set_num_threads(threads)
        self._inputs = [TensorInfo(n, tuple(s), d, h) for n, s, d, h in executor.inputs()]
        self._outputs = [TensorInfo(n, tuple(s), d) for n, s, d in executor.outputs()]
        self._index = {t.name: i for i, t in enumerate(self._inputs)}

    @property
    def inputs(self) -> List[TensorInfo]:
        """The model's inputs, in order: name, shape, dtype, and whether it has a default."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """The model's outputs, in order: name, shape, dtype."""
        return list(self._outputs)

    @property
    def device(self) -> str:
        """Where the kernels run: "cpu", "cuda", "opencl"."""
        return self._exec.device()

    def _bind(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        inputs = self._inputs
        if len(args) > len(inputs):
            raise InvalidInputError(f"the model has {len(inputs)} inputs, got {len(args)} positional values")
        given = [False] * len(inputs)
        for i, value in enumerate(args):
            self._exec.set_input(i, _as_array(value, inputs[i]))
            given[i] = True
        for name, value in kwargs.items():
            i = self._index.get(name)
            if i is None:
                known = ", ".join(t.name for t in inputs)
                raise InvalidInputError(f"the model has no input '{name}' (its inputs: {known})")
            if given[i]:
                raise InvalidInputError(f"input '{name}' given twice (by position and by name)")
            self._exec.set_input(i, _as_array(value, inputs[i]))
            given[i] = True
        for i, t in enumerate(inputs):
            if not given[i] and not t.has_default:
                raise InvalidInputError(
                    f"input '{t.name}' ({t.dtype}{list(t.shape)}) is missing")

    def run(self, *args: Any, **kwargs: Any) -> List[np.ndarray]:
        """Runs the model on its inputs (by position, or by name) and returns its outputs in
        order. An input with a default value may be left out (it keeps the last value given)."""
        if not kwargs and len(args) == len(self._inputs):
            for a in args:
                if type(a) is not np.ndarray or not a.flags.c_contiguous:
                    break
            else:  # every input a C-contiguous array, by position: one call into C++
                return self._exec.call(args)
        self._bind(args, kwargs)
        self._exec.run()
        return self._exec.results()

    def profile(self, *args: Any, runs: int = 10, **kwargs: Any) -> List[Dict[str, Any]]:
        """Runs the model `runs` times (after one warm-up) and returns one row per kernel,
        slowest first: "node", "function", "median_ms", "share" (of the kernels' sum), "ops"
        (the fused operators, "Conv+Add+Relu"), "shapes" (its tensors'), "flops" and "bytes"
        (one call's work, from the bundle), "gflops", "gbytes_per_s", and on the CPU, against
        the machine's measured peak and bandwidth (`self.last_machine`): "peak_fraction",
        "bandwidth_fraction", "bound" ("compute" or "memory"), "efficiency" (the fraction of
        that roof reached) and "lost_ms" (time above the roof). A figure the bundle cannot give
        (an older bundle without the kernels' work) is None. `self.last_runs_ms` holds each
        run's whole time."""
        if runs < 1:
            raise InvalidInputError(f"runs must be at least 1, got {runs}")
        self._bind(args, kwargs)
        rows, run_ms, machine = self._exec.profile(runs)
        self.last_runs_ms: List[float] = list(run_ms)
        self.last_machine: Optional[Dict[str, Any]] = machine
        out = [dict(r) for r in rows]
        out.sort(key=lambda r: -r["median_ms"])
        return out

    def save(self, path: Union[str, os.PathLike]) -> str:
        """Writes the bundle to `path` (for kiln run, kiln-run on a board, or Bundle(path))."""
        path = os.fspath(path)
        if self._data is not None:
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(self._data)
            os.replace(tmp, path)
        elif os.path.abspath(path) != os.path.abspath(self._path):
            shutil.copyfile(self._path, path)
        return path

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self._inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in self._outputs)
        where = self._path or "<memory>"
        return f"<kiln.Bundle {where} ({ins}) -> ({outs}) on {self.device}>"


def set_num_threads(n: int) -> None:
    """Threads every bundle's parallel loops run on (one pool per process; 0: all CPUs)."""
    _kiln.set_num_threads(n)


def num_threads() -> int:
    """The size of the runtime's thread pool."""
    return _kiln.num_threads()
