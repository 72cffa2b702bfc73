#!/usr/bin/env bash
# Tunes the model zoo on this machine into one record log, the log that
# `scripts/bench.sh zoo --records DIR` builds the tuned models from:
#   scripts/tune_zoo.sh DIR [--trials N] [NAME ...]
# Exports the zoo (tests/models/make_zoo.py, Debian's python3-torchvision), then runs `kiln tune`
# (release build, llvm -mcpu=native, batch bound to 1, N trials per task, default 64) on each model
# in turn, all into DIR. Tasks the models share are tuned once; killed and run again, it resumes
# from the log. Tune on an idle machine: measurements that shared the CPU are flagged as contended,
# and their speeds understated. The whole zoo is about 340 tasks, 45-50 minutes on 2 cores at 64.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/tune_zoo.sh DIR [--trials N] [NAME ...]"
records="${1:-}"
if [ -z "$records" ] || [ "${records#-}" != "$records" ]; then
  echo "$usage" >&2
  exit 2
fi
shift
trials=64
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --trials)
      [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
      trials="$2"
      shift 2 ;;
    -*) echo "scripts/tune_zoo.sh: unknown flag '$1'; $usage" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
python_torch="$(sed -n 's/^KILN_TORCH_PYTHON:FILEPATH=//p' build/release/CMakeCache.txt 2>/dev/null || true)"
python_torch="${python_torch:-/usr/bin/python3}"
cmake --preset release >/dev/null
cmake --build --preset release --target kiln kiln-runner >/dev/null
if [ ${#names[@]} -eq 0 ]; then
  read -r -a names <<<"$("$python_torch" tests/models/make_zoo.py --list | tr '\n' ' ')"
fi
models="$(mktemp -d)"
trap 'rm -rf "$models"' EXIT
only=()
for n in "${names[@]}"; do only+=(--only "$n"); done
"$python_torch" tests/models/make_zoo.py "$models" "${only[@]}" >/dev/null
for n in "${names[@]}"; do
  echo "== $n" >&2
  build/release/client/kiln tune "$models/$n.onnx" --input-shape input=1,3,224,224 \
    --trials "$trials" --records "$records" -o "$models/$n.kiln"
done
