"""Kiln: a deep-learning compiler and tuning farm, from Python.

    import kiln
    b = kiln.compile("resnet18.onnx", input_shapes={"input": (1, 3, 224, 224)})
    y, = b.run(x)

The farm (kiln.Farm) is a client of a running kilnd over gRPC; the compiler (kiln.compile,
kiln.tune, kiln.quantize) and the runtime (kiln.Bundle) run in this process, through the C++
libraries.
"""

import os as _os

__version__ = "0.1.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
# kiln.tune measures every candidate in a guarded kiln-runner child; the package carries it.
if _os.path.exists(_os.path.join(_here, "bin", "kiln-runner")):
    _os.environ.setdefault("KILN_RUNNER", _os.path.join(_here, "bin", "kiln-runner"))

from kiln.errors import InvalidInputError, KilnError, KilnSystemError  # noqa: E402
from kiln.bundle import Bundle, TensorInfo, num_threads, set_num_threads  # noqa: E402
from kiln.compiler import compile, quantize, tune  # noqa: E402

# The farm's client (kiln/farm.py).
from kiln.errors import (FarmAuthError, FarmError, FarmInvalidArgumentError,  # noqa: E402
                         FarmNotFoundError, FarmPreconditionError, FarmResourceExhaustedError,
                         FarmTimeoutError, FarmUnavailableError, JobCancelledError,
                         JobFailedError)
from kiln.farm import DeviceInfo, Farm, Job, JobInfo, LocalFarm  # noqa: E402

__all__ = ["Bundle", "TensorInfo", "compile", "tune", "quantize", "num_threads", "set_num_threads",
           "Farm", "LocalFarm", "Job", "JobInfo", "DeviceInfo",
           "KilnError", "InvalidInputError", "KilnSystemError", "FarmError", "FarmAuthError",
           "FarmInvalidArgumentError", "FarmNotFoundError", "FarmPreconditionError",
           "FarmResourceExhaustedError", "FarmTimeoutError", "FarmUnavailableError",
           "JobCancelledError", "JobFailedError", "__version__"]
