#!/usr/bin/env bash
# The main job on the embedded default (this CPU, the record log in a local folder): build Kiln in
# release mode, write a model (the paper's DQN network, by tests/models/make_models.py), tune every
# operator of it with `kiln tune` (resumable: run again and it continues from kiln-records/), then
# run the tuned bundle and print where its time goes.
#   scripts/main-job.sh [MODEL] [TRIALS]     MODEL: dqn (default), resnet18, mobilenetv2, dcgan, lstm
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-dqn}"
trials="${2:-64}"
cmake --preset release >/dev/null
cmake --build --preset release --target kiln kiln-runner
mkdir -p kiln-models
python3 tests/models/make_models.py kiln-models --only "$model" --no-expected
build/release/client/kiln tune "kiln-models/$model.onnx" --trials "$trials" \
  --records kiln-records -o "kiln-models/$model.kiln"
build/release/client/kiln run "kiln-models/$model.kiln" --input "kiln-models/$model.input.npy" \
  --profile 20
