#!/usr/bin/env python3
"""A statically quantized model on AArch64 (make_quantized.py's small_qdq: its 5 convolutions as
ConvInteger and its Gemm as MatMulInteger on dot4_u8s8, with ONNX Runtime's float requantization
between them) compiled for a Cortex-A53 (NEON), a Cortex-A55 (the dot product: udot) and a
Cortex-A55 with i8mm (usdot), run by the arm64 preset's kiln-run under QEMU: every output equal,
bit for bit, to the same model's bundle for this machine run here.

    python3 int8_qdq_arm64_test.py KILN KILN_RUN ARM64_KILN_RUN QEMU MODELS_DIR WORK_DIR

Exit 77 (CTest's skip) when the arm64 kiln-run or QEMU is absent, saying which.
"""
import os
import subprocess
import sys

import numpy as np
import onnx

KILN, KILN_RUN, ARM64_KILN_RUN, QEMU, MODELS, WORK = sys.argv[1:7]
CPUS = {"a53": "cortex-a53", "a55": "cortex-a55", "a55_i8mm": "cortex-a55 -mattr=+i8mm"}


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit("%s: exit %d" % (" ".join(args), r.returncode))


def main():
    for what, path in (("the arm64 kiln-run (scripts/build-arm64.sh builds it)", ARM64_KILN_RUN),
                       ("qemu-aarch64-static (scripts/setup.sh installs it)", QEMU)):
        if not path or not os.path.exists(path):
            print("skipped: %s is missing: %s" % (what, path or "not found"))
            sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    qdq = os.path.join(MODELS, "small_qdq.qdq.onnx")
    x = os.path.join(MODELS, "small_qdq.input.npy")
    names = [o.name for o in onnx.load(qdq).graph.output]
    host = os.path.join(WORK, "host.kiln")
    run(KILN, "compile", qdq, "-o", host)
    run(KILN_RUN, host, "--input", x, "-o", os.path.join(WORK, "host_out"))
    failures = []
    for key, cpu in CPUS.items():
        bundle = os.path.join(WORK, key + ".kiln")
        run(KILN, "compile", qdq, "--target", "llvm -mtriple=aarch64-linux-gnu -mcpu=" + cpu, "-o",
            bundle)
        out = os.path.join(WORK, key + "_out")
        run(QEMU, "-L", "/", ARM64_KILN_RUN, bundle, "--input", x, "-o", out)
        for name in names:
            want = np.load(os.path.join(WORK, "host_out", name + ".npy"))
            got = np.load(os.path.join(out, name + ".npy"))
            same = got.shape == want.shape and np.array_equal(got, want)
            print("%s %s output %s %s: %s" % ("ok  " if same else "FAIL", cpu, name, want.shape,
                  "equal to this machine's" if same else
                  "%d of %d elements differ" % (int(np.sum(got != want)), want.size)
                  if got.shape == want.shape else "shape %s" % (got.shape,)))
            if not same:
                failures.append("%s %s" % (cpu, name))
    if failures:
        raise SystemExit("%d failed: %s" % (len(failures), failures))


if __name__ == "__main__":
    main()
