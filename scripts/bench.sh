#!/usr/bin/env bash
# Builds Kiln in release mode and runs one benchmark: scripts/bench.sh NAME [ARGS...]
# Known: matmul, int8 (ResNet-50 and MobileNetV2 quantized by onnxruntime's quantize_static, Kiln's
# int8 build against ONNX Runtime's int8 and Kiln's fp32 at 2 threads, with the fraction of
# outputs within 1 LSB of ORT's; the models are made on first use, tests/models/make_quantized.py,
# in build/release/int8-models with a virtual environment from PyPI; ARGS: --rounds, --min-time,
# names), models (whole models against ONNX Runtime; needs python3 with onnx, onnxruntime
# and numpy), layers (single layers: dilated and 1-D convolutions, MatMul against a constant weight,
# against ONNX Runtime; ARGS: --rounds R, --min-time S, layer names), zoo (the torchvision model
# zoo against ONNX Runtime; also Debian's python3-torchvision),
# wide (the wide zoo, 116 networks of every kind, against ONNX Runtime: bench_zoo --set wide,
# at --min-time 0.3 --rounds 1 unless given; ARGS: NAMES, --check-only to compile and match only,
# --dir DIR to keep the exports between runs),
# int8-layers (the int8 kernels, untuned and with --tune N tuned, against oneDNN's u8s8s32
# convolution on the ResNet-18 layers and matmul on BERT-base's linear shapes; needs libdnnl-dev;
# ARGS: --layers, --threads, --min-time, --ic-block, --tune, --records, --no-bert),
# tuning (tuning curves of the ResNet-18 convolutions: xgb vs random vs ga; python3 with
# numpy for the plot), conv (the tuned convolutions against oneDNN; needs libdnnl-dev), farm (the
# tracker's dispatch rate and latency on loopback with simulated agents), dashboard (kilnd's JSON
# API for a job with thousands of records), cuda (Kiln's GPU kernels against cuBLAS and cuDNN on a
# CUDA device: the candidates are compiled here to PTX, then measured on the device; on a GPU
# machine without Kiln's build dependencies, run build/release/bench/bench_cuda_measure DIR there),
# opencl (the ResNet-18 convolutions tuned on this machine's OpenCL device against their default
# GPU configs; ARGS: --trials N, --layers C2,C6,...), vdla (the VDLA's cycle model on the offloaded
# ResNet-18 convolutions compiled by Kiln, serial against two virtual threads, then the quantized
# ResNet-18 with --target vdla against the same build with every QConv on the CPU; ARGS: --layers C2,C6,..., --no-model),
# python (kiln.Bundle.run from Python against GraphExecutor::run from C++ on the DQN: the Python
# package's call overhead), search-cost (what scoring a candidate costs the tuner's search on the CPU
# and OpenCL templates, against a full lowering; ARGS: --layers, --candidates N, --records DIR to
# compare the model's ranking on bench_opencl's or bench_tuning's records), cost-models (the cost
# model kinds, xgb and mlp, on the same ResNet-18 records: Spearman on held-out layers, trials to
# 95% when guiding the search, fit and predict times; ARGS: --layers C2,C6,..., --trials N,
# --reuse-records), tuning-cost (the tuning measurements saved by a cost model pre-trained on
# other models' records on the CPU, by the task scheduler on OpenCL, and zero-shot configs on
# OpenCL, the cost model against random search on OpenCL spaces; ARGS: --cases transfer,scheduler,
# zeroshot,curves, --trials N, --models LIST, --layers LIST), int8-dynamic (models quantized by
# onnxruntime's quantize_dynamic, a BERT-base-like encoder and an LSTM classifier, against ONNX
# Runtime at 2 threads, with their float originals; the quantization tools in a virtual
# environment, build/quant-venv, made on first use; ARGS: bert, lstm, --dir DIR, --threads T),
# bf16 (ResNet-50 built with bf16 products against its float32 build on this CPU, which needs
# avx512_bf16: speedup at 2 threads, max relative error and top-1 agreement over 200 random
# inputs; also Debian's python3-torchvision; ARGS: --threads T, --inputs N, --min-time S, --dir DIR
# to keep the export).
# Each prints one `case=<name> key=value ...` line per case.
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:-}"
if [ -z "$name" ]; then
  echo "usage: scripts/bench.sh NAME [ARGS...]   (known: matmul, int8, models, layers, zoo, wide, tuning, conv, int8-layers, farm, dashboard, cuda, opencl, vdla, python, search-cost, cost-models, tuning-cost, int8-dynamic, bf16)" >&2
  exit 2
fi
shift
case "$name" in
  matmul) target=bench_matmul ;;
  int8) target=bench_int8 ;;
  models) target=bench_models ;;
  layers) target=bench_layers ;;
  zoo) target=bench_zoo ;;
  wide) target=bench_zoo; set -- --set wide "$@" ;;
  tuning) target=bench_tuning ;;
  conv) target=bench_conv ;;
  int8-layers) target=bench_int8_layers ;;
  farm) target=bench_farm ;;
  dashboard) target=bench_dashboard ;;
  cuda)
    cmake --preset release >/dev/null
    cmake --build --preset release --target bench_cuda_prepare bench_cuda_measure >/dev/null
    dir=build/release/bench-results/cuda
    rm -rf "$dir"
    build/release/bench/bench_cuda_prepare "$dir" "$@" >&2
    exec build/release/bench/bench_cuda_measure "$dir" ;;
  opencl) target=bench_opencl ;;
  vdla) target=bench_vdla ;;
  search-cost) target=bench_search_cost ;;
  cost-models) target=bench_cost_models ;;
  tuning-cost) target=bench_tuning_cost ;;
  int8-dynamic) target=bench_int8_dynamic ;;
  bf16) target=bench_bf16 ;;
  python)
    cmake --preset release >/dev/null
    cmake --build --preset release --target kiln_python bench_runtime_call >/dev/null
    exec python3 bench/python_overhead.py build/release ;;
  *) echo "scripts/bench.sh: unknown benchmark '$name' (known: matmul, int8, models, layers, zoo, wide, tuning, conv, int8-layers, farm, dashboard, cuda, opencl, vdla, python, search-cost, cost-models, tuning-cost, int8-dynamic, bf16)" >&2; exit 2 ;;
esac
cmake --preset release >/dev/null
cmake --build --preset release --target "$target" >/dev/null
exec "build/release/bench/$target" "$@"
