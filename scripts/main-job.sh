#!/usr/bin/env bash
# The main job on the embedded default: build Kiln in release mode, start `kilnd` with its local
# tracker, a compiler worker and a CPU agent (child processes of kilnd), and the shared record log
# in a local folder (kiln-state/records); kilnd starts a job driver (kiln-tuner) for the job; write a model (the paper's DQN network, by
# tests/models/make_models.py), submit it with `kiln submit --watch` (progress bars until every
# operator is tuned), fetch the tuned bundle, stop kilnd, and run the bundle printing where its
# time goes. Run it again and the record log already holds the measurements: nothing is measured
# twice.
#   scripts/main-job.sh [MODEL] [TRIALS]     MODEL: dqn (default), resnet18, mobilenetv2, dcgan, lstm
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-dqn}"
trials="${2:-64}"
cmake --preset release >/dev/null
cmake --build --preset release --target kiln kilnd
bin=build/release
mkdir -p kiln-models kiln-state
python3 tests/models/make_models.py kiln-models --only "$model" --no-expected

# kilnd on free ports; its first stdout line says where.
"$bin/server/kilnd" --listen 127.0.0.1:0 --http 127.0.0.1:0 --state kiln-state \
  --local-workers 1 --local-agent cpu >kiln-state/kilnd.out 2>kiln-state/kilnd.log &
kilnd=$!
trap 'kill $kilnd 2>/dev/null; wait $kilnd 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do
  grep -q "kilnd listening" kiln-state/kilnd.out 2>/dev/null && break
  kill -0 $kilnd 2>/dev/null || { cat kiln-state/kilnd.log; exit 1; }
  sleep 0.1
done
server=$(sed -n 's/.*grpc=\([^ ]*\).*/\1/p' kiln-state/kilnd.out)
http=$(sed -n 's/.*http=\([^ ]*\).*/\1/p' kiln-state/kilnd.out)
echo "kilnd at $server (dashboard: http://$http/, metrics: http://$http/metrics); log: kiln-state/kilnd.log"
# The local agent registers through kilnd's port; wait until it is there.
for _ in $(seq 1 100); do
  "$bin/client/kiln" devices --server "$server" 2>/dev/null | grep -q cpu && break
  sleep 0.1
done

job=$("$bin/client/kiln" submit "kiln-models/$model.onnx" --server "$server" \
  --target "llvm -mcpu=native" --device-key cpu --trials "$trials" | sed -n 's/submitted job //p')
"$bin/client/kiln" watch "$job" --server "$server"
"$bin/client/kiln" fetch "$job" --server "$server" -o "kiln-models/$model.kiln"
kill $kilnd && wait $kilnd || true
trap - EXIT
"$bin/client/kiln" run "kiln-models/$model.kiln" --input "kiln-models/$model.input.npy" --profile 20
