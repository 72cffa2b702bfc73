#!/usr/bin/env bash
# Kiln's checks on a CUDA GPU, for a machine that has the GPU but not Kiln's build dependencies
# (the lent GPU machines here): prepared on the build machine into one folder, then run there with
# the runtime alone.
#
#   scripts/gpu-check.sh DIR [ARCH]   # here: build, compile for cuda -arch=ARCH (sm_90), fill DIR
#   DIR/run.sh                        # on the GPU machine (bash, xz, python3 with numpy; ~4 minutes)
#
# run.sh prints what the runtime sees of the device, runs the runtime's CUDA tests, runs the whole
# models whose bundles with weights fit the folder (KILN_GPU_CHECK_MODELS: MobileNetV2, DQN)
# with `kiln-run --device cuda` against ONNX Runtime's output (max|diff| / max|ref| <= 1e-4,
# `case=cuda_model_<name> ok=0|1 rel_err=...`; the DQN also as dqn_nvptx, its PTX from LLVM's
# NVPTX back-end instead of NVRTC), then all five models built from constant-weight copies on
# CUDA and on the GPU's OpenCL (`case=<cuda|opencl>_model_<name>_constant_weights ok=...` against
# ONNX Runtime on the same copy, and the fusion ablation `case=fusion_<name>_<cuda|opencl>
# fused_ms=... unfused_ms=... speedup=...`, the medians of 50 runs with and without operator
# fusion), then the benchmark against cuBLAS and cuDNN (bench/cuda/measure_main.cc). Binaries
# carry libstdc++.
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
# The models with their weights, where the folder can carry them (the folder travels within 64 MiB:
# ResNet-18's 47 MB, the LSTM's 80 MB and the DCGAN's 14 MB stay here): checked against ONNX
# Runtime's output.
for m in ${KILN_GPU_CHECK_MODELS:-mobilenetv2 dqn}; do
  if "$build/client/kiln" compile "$data/$m.onnx" --target "cuda -arch=$arch" -o "$dir/models/$m.kiln" \
       >/dev/null 2>"$dir/models/$m.build-error.txt"; then
    cp "$data/$m.input.npy" "$data/$m.expected.npy" "$dir/models/"
    rm "$dir/models/$m.build-error.txt"
  else
    echo "$m: not built for cuda: $(tail -1 "$dir/models/$m.build-error.txt")" >&2
  fi
done
# All five models for the fusion ablation on both GPU targets (CUDA, and OpenCL through the GPU's
# own OpenCL driver), fused and unfused, built from copies whose weights are one constant: the
# times do not depend on the values, and such bundles compress to almost nothing. Their outputs
# are checked too, against ONNX Runtime on the same constant-weight model (a weaker check than
# real weights, but one that covers ResNet-18 and the LSTM).
mkdir -p "$dir/timing"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in resnet18 mobilenetv2 dqn dcgan lstm; do
  python3 tests/models/constant_weights.py "$data/$m.onnx" "$tmp/$m.onnx"
  python3 - "$tmp/$m.onnx" "$data/$m.input.npy" "$dir/timing/$m.expected.npy" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
np.save(sys.argv[3], s.run(None, {s.get_inputs()[0].name: np.load(sys.argv[2])})[0])
PY
  cp "$data/$m.input.npy" "$dir/timing/"
  for t in "cuda -arch=$arch" opencl; do
    d=${t%% *}
    "$build/client/kiln" compile "$tmp/$m.onnx" --target "$t" -o "$dir/timing/$m.$d.fused" >/dev/null 2>&1 ||
      echo "$m: not built for $d" >&2
    "$build/client/kiln" compile "$tmp/$m.onnx" --target "$t" --no-fuse -o "$dir/timing/$m.$d.unfused" \
      >/dev/null 2>&1 || echo "$m: not built unfused for $d" >&2
  done
done
xz -T2 -6 "$dir"/timing/*.fused "$dir"/timing/*.unfused
# The DQN once more with PTX from LLVM's NVPTX back-end instead of NVRTC (docs/gpu.md section 7).
if KILN_CUDA_PTX=nvptx "$build/client/kiln" compile "$data/dqn.onnx" --target "cuda -arch=$arch" \
     -o "$dir/models/dqn_nvptx.kiln" >/dev/null; then
  cp "$data/dqn.input.npy" "$dir/models/dqn_nvptx.input.npy"
  cp "$data/dqn.expected.npy" "$dir/models/dqn_nvptx.expected.npy"
fi
"$build/bench/bench_cuda_prepare" "$dir/bench" --arch "$arch" --candidates "${KILN_CUDA_CANDIDATES:-80}" >&2
xz -T2 -6 "$dir"/bench/*.json

cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine; see scripts/gpu-check.sh.
cd "$(dirname "$0")"
if command -v xz >/dev/null; then xz -d timing/*.xz bench/*.xz; else
  python3 -c 'import glob, lzma, os
for f in glob.glob("timing/*.xz") + glob.glob("bench/*.xz"):
    open(f[:-3], "wb").write(lzma.open(f).read()); os.remove(f)'
fi
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
median_ms() { bin/kiln-run "$1" --input "$2" --device "$3" --repeat 50 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'; }
for d in cuda opencl; do
  for m in resnet18 mobilenetv2 dqn dcgan lstm; do
    [ -e "timing/$m.$d.fused" ] || continue
    rm -rf "out/t.$m.$d"
    if bin/kiln-run "timing/$m.$d.fused" --input "timing/$m.input.npy" -o "out/t.$m.$d" --device "$d" > "out.t.$m.$d.txt" 2>&1; then
      python3 - "$m" "$d" "out/t.$m.$d" "timing/$m.expected.npy" <<'PY'
import glob, sys
import numpy as np
name, dev, out, ref = sys.argv[1], sys.argv[2], sys.argv[3], np.load(sys.argv[4])
got = np.load(glob.glob(out + "/*.npy")[0])
err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
print(f"case={dev}_model_{name}_constant_weights ok={int(err <= 1e-4)} rel_err={err:.2e}")
PY
    else
      echo "case=${d}_model_${m}_constant_weights ok=0 error=$(tail -1 "out.t.$m.$d.txt")"
    fi
    [ -e "timing/$m.$d.unfused" ] || continue
    fused=$(median_ms "timing/$m.$d.fused" "timing/$m.input.npy" "$d")
    unfused=$(median_ms "timing/$m.$d.unfused" "timing/$m.input.npy" "$d")
    python3 -c "print(f'case=fusion_${m}_$d fused_ms=$fused unfused_ms=$unfused speedup={$unfused / $fused:.3f}')" ||
      echo "case=fusion_${m}_$d error=no timing"
  done
done
bin/bench_cuda_measure bench
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
