"""The virtual environment of onnxruntime's quantization tools, shared by make_quantized.py and
make_dynamic_quant.py: onnxruntime.quantization needs a newer onnx than the tests' 1.13, plus
ml_dtypes and sympy, so it runs apart from the tests' Python. One place, build/quant-venv under the
repository root (DEFAULT), made with `python -m venv` and pip (PyPI) on first use and reused after.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT = os.path.join(ROOT, "build", "quant-venv")
PACKAGES = ["onnxruntime", "onnx", "numpy", "sympy", "ml_dtypes"]


def ensure(venv=DEFAULT):
    """The venv's python, after making the venv and installing PACKAGES where it lacks them."""
    venv = os.path.abspath(venv)
    py = os.path.join(venv, "bin", "python3")
    probe = "import onnxruntime.quantization, onnx, numpy, sympy, ml_dtypes"
    if os.path.exists(py) and subprocess.run([py, "-c", probe],
                                             capture_output=True).returncode == 0:
        return py
    print("quant_venv: making %s (pip install %s)" % (venv, " ".join(PACKAGES)), flush=True)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    r = subprocess.run([py, "-m", "pip", "install", "-q", *PACKAGES])
    if r.returncode != 0:
        raise SystemExit("quant_venv: pip install %s into %s failed (exit %d): it needs PyPI"
                         % (" ".join(PACKAGES), venv, r.returncode))
    return py
