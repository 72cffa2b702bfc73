#!/usr/bin/env bash
# Installs every Debian package Kiln builds, tests and benchmarks with, plus the PyPI helpers the
# tests compare against. Idempotent and non-interactive: run it as root (or with sudo) on a fresh
# Debian 12 machine. The CUDA toolkit is expected at /usr/local/cuda and is used only where found.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config git python3 python3-pip clang-format
  # compiler core: LLVM 19 with its linker as a library (in-process linking)
  llvm-19-dev liblld-19-dev libzstd-dev zlib1g-dev libcurl4-openssl-dev libedit-dev libxml2-dev libffi-dev
  # the farm
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev prometheus-cpp-dev
  # tuning
  libxgboost-dev xgboost
  # graph frontend
  libonnx-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev
  # the fuzz preset (scripts/fuzz.sh): clang-19 with libFuzzer and AddressSanitizer's runtimes
  clang-19 libclang-rt-19-dev
  # the model zoo's exports (tests/models/make_zoo.py: torch and torchvision for /usr/bin/python3)
  python3-torchvision
  # OpenCL on the CPU
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
  # the dashboard: kilnd's HTTP server (civetweb, also under prometheus-cpp) and the browser test
  libcivetweb-dev chromium
  # the Python package's bindings (python/src), built against this python3's headers
  pybind11-dev
)
# AArch64 boards (scripts/build-arm64.sh): the cross compiler, QEMU to run its programs here, and
# Debian's arm64 gRPC and protobuf beside the host's (multiarch, the architecture below). Where
# they cannot be installed (a mirror without arm64), setup goes on: the board tests skip, saying so.
BOARD_PACKAGES=(g++-aarch64-linux-gnu qemu-user-static libgrpc++-dev:arm64 libprotobuf-dev:arm64)

# The arm64 packages need the architecture; apt-get update below then reads its lists.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup: adding the arm64 architecture (dpkg --add-architecture arm64)"
  $SUDO dpkg --add-architecture arm64
fi

missing_of() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${PACKAGES[@]}")
mapfile -t missing_board < <(missing_of "${BOARD_PACKAGES[@]}")
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_board[@]} -gt 0 ]; then
  $SUDO apt-get update -qq || [ ${#missing[@]} -eq 0 ]
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ${#missing_board[@]} -gt 0 ]; then
  echo "setup: installing ${#missing_board[@]} AArch64 packages: ${missing_board[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing_board[@]}" ||
    echo "setup: warning: the AArch64 packages did not install; scripts/build-arm64.sh and the" \
         "board tests will skip, saying what is missing" >&2
fi
[ ${#missing[@]} -gt 0 ] || [ ${#missing_board[@]} -gt 0 ] || echo "setup: all Debian packages present"

# Test helpers and comparison references only (never linked into Kiln): onnx 1.13 carries the ONNX
# backend node tests for opsets up to 18 (the range Kiln's frontend reads); onnxruntime is the
# reference the model tests compare with. numpy<2 and protobuf<4 are what onnx 1.13 was built for.
# pyyaml reads deploy/farm's Kubernetes manifests in deploy_manifests_test.
python3 -c 'import onnx, onnxruntime, numpy, yaml; assert onnx.__version__ == "1.13.1"' 2>/dev/null ||
  python3 -m pip install -q --root-user-action=ignore "onnx==1.13.1" "numpy<2" "protobuf<4" onnxruntime pyyaml
# The Python package's own needs (python/pyproject.toml: grpcio for the farm's client, tqdm for its
# progress bars), pytest for its tests (tests/python), scikit-build-core for `pip install ./python`.
python3 -c 'import grpc, tqdm, pytest, scikit_build_core' 2>/dev/null ||
  python3 -m pip install -q --root-user-action=ignore grpcio tqdm pytest scikit-build-core "protobuf<4"
# The Python package `kiln` (python/), built by CMake in build/dev (the dev preset's folder, so that
# a dev build and the package share their objects) and installed into python3.
if ! python3 -c 'import kiln' 2>/dev/null; then
  echo "setup: building and installing the Python package kiln (python/; about 10 minutes on a" \
       "fresh machine, seconds after a dev build)"
  python3 -m pip install -q --root-user-action=ignore --no-build-isolation "$(dirname "$0")/../python"
fi
echo "setup: done"
