#!/usr/bin/env bash
# Kiln's checks on a CUDA GPU, for a machine that has the GPU but not Kiln's build dependencies
# (the lent GPU machines here): prepared on the build machine into one folder, then run there with
# the runtime alone.
#
#   scripts/gpu-check.sh DIR [ARCH]   # here: build, compile for cuda -arch=ARCH (sm_90), fill DIR
#   DIR/run.sh                        # on the GPU machine (bash, python3 with numpy; ~2 minutes)
#
# run.sh prints what the runtime sees of the device, runs the runtime's CUDA tests, runs every
# whole model that builds for CUDA with `kiln-run --device cuda` against ONNX Runtime's output
# (max|diff| / max|ref| <= 1e-4, `case=cuda_model_<name> ok=0|1 rel_err=...`; the DQN also as
# dqn_nvptx, its PTX from LLVM's NVPTX back-end instead of NVRTC), the fusion ablation on the
# device (`case=fusion_<name>_cuda fused_ms=... unfused_ms=... speedup=...`, the medians of 50
# runs of the bundle built with and without operator fusion), then the benchmark against cuBLAS
# and cuDNN (bench/cuda/measure_main.cc). Binaries carry libstdc++.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:?usage: scripts/gpu-check.sh DIR [ARCH]}"
arch="${2:-sm_90}"
build=build/dev
cmake --preset dev >/dev/null
cmake --build --preset dev --target kiln kiln-run kiln-device-info runtime_device_test \
  bench_cuda_prepare bench_cuda_measure >/dev/null
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/models"
cp "$build/deploy/runtime/kiln-run" "$build/deploy/runtime/kiln-device-info" \
   "$build/tests/unit/runtime_device_test" "$build/bench/bench_cuda_measure" "$dir/bin/"
strip --strip-debug "$dir"/bin/*  # the folder travels to the GPU machine: keep it small

data="$build/tests/models/data"
[ -f "$data/dqn.onnx" ] || python3 tests/models/make_models.py "$data" >/dev/null
for m in resnet18 mobilenetv2 dqn dcgan lstm; do
  if "$build/client/kiln" compile "$data/$m.onnx" --target "cuda -arch=$arch" -o "$dir/models/$m.kiln" \
       >/dev/null 2>"$dir/models/$m.build-error.txt"; then
    cp "$data/$m.input.npy" "$data/$m.expected.npy" "$dir/models/"
    rm "$dir/models/$m.build-error.txt"
    "$build/client/kiln" compile "$data/$m.onnx" --target "cuda -arch=$arch" --no-fuse \
      -o "$dir/models/$m.unfused" >/dev/null 2>&1 || true
  else
    echo "$m: not built for cuda: $(tail -1 "$dir/models/$m.build-error.txt")" >&2
  fi
done
# The DQN once more with PTX from LLVM's NVPTX back-end instead of NVRTC (docs/gpu.md section 7).
if KILN_CUDA_PTX=nvptx "$build/client/kiln" compile "$data/dqn.onnx" --target "cuda -arch=$arch" \
     -o "$dir/models/dqn_nvptx.kiln" >/dev/null; then
  cp "$data/dqn.input.npy" "$dir/models/dqn_nvptx.input.npy"
  cp "$data/dqn.expected.npy" "$dir/models/dqn_nvptx.expected.npy"
fi
"$build/bench/bench_cuda_prepare" "$dir/bench" --arch "$arch" --candidates "${KILN_CUDA_CANDIDATES:-80}" >&2

cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine; see scripts/gpu-check.sh.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
bin/kiln-device-info || true
bin/runtime_device_test --gtest_filter='DeviceCUDA*' 2>&1 | tail -4
for bundle in models/*.kiln; do
  [ -e "$bundle" ] || continue
  m=$(basename "$bundle" .kiln)
  rm -rf "out/$m"
  if bin/kiln-run "$bundle" --input "models/$m.input.npy" -o "out/$m" --device cuda --profile --repeat 20 > "out.$m.txt" 2>&1; then
    python3 - "$m" "out/$m" "models/$m.expected.npy" <<'PY'
import glob, sys
import numpy as np
name, out, ref = sys.argv[1], sys.argv[2], np.load(sys.argv[3])
got = np.load(glob.glob(out + "/*.npy")[0])
err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
print(f"case=cuda_model_{name} ok={int(err <= 1e-4)} rel_err={err:.2e}")
PY
  else
    echo "case=cuda_model_$m ok=0 error=$(tail -1 "out.$m.txt")"
  fi
done
median_ms() { bin/kiln-run "$1" --input "$2" --device cuda --repeat 50 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'; }
for bundle in models/*.kiln; do
  [ -e "$bundle" ] || continue
  m=$(basename "$bundle" .kiln)
  [ -e "models/$m.unfused" ] || continue
  fused=$(median_ms "$bundle" "models/$m.input.npy")
  unfused=$(median_ms "models/$m.unfused" "models/$m.input.npy")
  python3 -c "print(f'case=fusion_${m}_cuda fused_ms=$fused unfused_ms=$unfused speedup={$unfused / $fused:.3f}')" ||
    echo "case=fusion_${m}_cuda error=no timing"
done
bin/bench_cuda_measure bench
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
