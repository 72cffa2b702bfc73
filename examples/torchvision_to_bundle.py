"""From a torchvision model to a tuned bundle on the embedded farm, checked against ONNX Runtime.

    python3 examples/torchvision_to_bundle.py [--model resnet18] [--trials 8] [--state DIR]

It starts the embedded farm (kilnd with a compiler worker and this machine's CPU as its device),
submits the model with its example input (exported to ONNX inside kiln), watches every operator
being tuned, takes the tuned bundle, runs it on the example input and compares its output and
its speed with ONNX Runtime's. The record log stays in the state folder: run it again and
nothing is measured twice.

torch and torchvision come from this python3 when it has them (pip install torch torchvision);
otherwise the model is exported by Debian's python3-torchvision (/usr/bin/python3, which
scripts/setup.sh installs) and submitted as a file.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

import kiln

SHAPE = (1, 3, 224, 224)


def export_with_debian_torch(name: str, path: str, x: np.ndarray) -> None:
    """Exports torchvision's `name` (random weights) with /usr/bin/python3's torch."""
    np.save(path + ".x.npy", x)
    script = (
        "import sys, numpy, torch, torchvision\n"
        "m = getattr(torchvision.models, sys.argv[1])().eval()\n"
        "x = torch.from_numpy(numpy.load(sys.argv[2]))\n"
        "torch.onnx.export(m, (x,), sys.argv[3], input_names=['input'], opset_version=13)\n")
    subprocess.run(["/usr/bin/python3", "-c", script, name, path + ".x.npy", path], check=True)


def median_ms(fn, runs: int = 20) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18", help="a torchvision.models name (resnet18)")
    ap.add_argument("--trials", type=int, default=8, help="measurements per operator (8)")
    ap.add_argument("--state", default="kiln-state-example", help="the farm's folder")
    args = ap.parse_args()

    x = np.random.default_rng(0).uniform(0, 1, SHAPE).astype(np.float32)
    tmp = tempfile.mkdtemp(prefix="kiln-example-")
    onnx_path = os.path.join(tmp, args.model + ".onnx")
    try:
        import torch
        import torchvision

        net = getattr(torchvision.models, args.model)().eval()  # random weights: no download
        model, example = net, (torch.from_numpy(x),)
        with warnings.catch_warnings():  # torch >= 2.9 calls this exporter legacy
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(net, example, onnx_path, input_names=["input"], opset_version=13,
                              dynamo=False)  # the same model for ONNX Runtime
        print(f"{args.model}: torch {torch.__version__} in this python3")
    except ImportError:
        export_with_debian_torch(args.model, onnx_path, x)
        model, example = onnx_path, None
        print(f"{args.model}: exported by /usr/bin/python3's torch (this python3 has none)")

    with kiln.Farm.local(args.state) as farm:
        print(f"embedded farm at {farm.address}; dashboard {farm.dashboard_url}")
        job = farm.submit(model, example_inputs=example, name=args.model,
                          input_shapes={"input": SHAPE}, target="llvm -mcpu=native",
                          device_key="cpu", trials=args.trials)
        job.watch()
        bundle = job.result()
    path = bundle.save(os.path.join(tmp, args.model + ".kiln"))
    print(f"tuned bundle: {path}")

    import onnxruntime as ort

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"input": x})
    (y,) = bundle.run(x)
    err = float(np.abs(y - expected).max())
    scale = float(np.abs(expected).max())
    kiln_ms = median_ms(lambda: bundle.run(x))
    ort_ms = median_ms(lambda: session.run(None, {"input": x}))
    print(f"max |kiln - onnxruntime| = {err:.2e} (outputs up to {scale:.2f})")
    print(f"kiln {kiln_ms:.2f} ms, onnxruntime {ort_ms:.2f} ms: {ort_ms / kiln_ms:.2f}x")
    top = bundle.profile(x, runs=10)[:3]
    print("slowest kernels: " + ", ".join(f"{r['node']} {r['median_ms']:.2f} ms" for r in top))
    return 0 if err <= 1e-3 * max(1.0, scale) else 1


if __name__ == "__main__":
    sys.exit(main())
