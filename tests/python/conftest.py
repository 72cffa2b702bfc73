"""Fixtures of the Python package's tests: the build's package on sys.path, the `kiln` program,
an embedded farm (kilnd with a compiler worker and a CPU agent) in a temporary folder, and a tiny
ONNX model that tunes in seconds.

The package is the build's (build/<preset>/python, the target kiln_python): $KILN_PYTHON_DIR,
which CTest sets, else build/dev/python of this checkout.
"""

import os
import sys

import numpy as np
import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN_PYTHON_DIR = os.environ.get("KILN_PYTHON_DIR") or os.path.join(_REPO, "build", "dev",
                                                                      "python")
if not os.path.isdir(os.path.join(KILN_PYTHON_DIR, "kiln")):
    raise RuntimeError(f"no kiln package in {KILN_PYTHON_DIR}: build the target kiln_python "
                       "(cmake --build --preset dev --target kiln_python) or set KILN_PYTHON_DIR")
sys.path.insert(0, KILN_PYTHON_DIR)

import kiln  # noqa: E402

from kiln_models import TINY_IN, TINY_OUT, make_tiny_model  # noqa: E402,F401


@pytest.fixture(scope="session")
def kiln_cli() -> str:
    """The `kiln` program of the same build: $KILN_CLI, else client/kiln beside the package."""
    path = os.environ.get("KILN_CLI") or os.path.join(os.path.dirname(KILN_PYTHON_DIR), "client",
                                                      "kiln")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no kiln program at {path} (build the target kiln, or set KILN_CLI)")
    return path


@pytest.fixture(scope="session")
def local_farm(tmp_path_factory):
    """An embedded farm for the whole session: kilnd on free ports of 127.0.0.1, one compiler
    worker and a CPU agent of key "cpu", its state in a temporary folder; stopped at the end."""
    with kiln.Farm.local(tmp_path_factory.mktemp("farm"), workers=1, agent="cpu") as farm:
        yield farm


@pytest.fixture(scope="session")
def tiny_model():
    """The tiny model as an onnx.ModelProto."""
    return make_tiny_model()


@pytest.fixture(scope="session")
def tiny_model_path(tiny_model, tmp_path_factory) -> str:
    """The tiny model as a file, tiny.onnx."""
    path = tmp_path_factory.mktemp("models") / "tiny.onnx"
    path.write_bytes(tiny_model.SerializeToString())
    return str(path)
