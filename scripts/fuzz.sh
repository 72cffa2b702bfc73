#!/usr/bin/env bash
# Builds the fuzz preset (clang-19, libFuzzer + AddressSanitizer; fuzz/) and runs every fuzz target
# for its share of SECONDS (default 60; the build is not counted): onnx two shares, the others one.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]        (default: every fuzz/<target>_fuzz.cc)
#
# Each target fuzzes build/fuzz/work/<target>/corpus (with the dictionary fuzz/<target>.dict when
# there is one): its seeds (fuzz/corpus/<target>/) plus what earlier runs found there; nothing is
# written into fuzz/. Crash, leak, timeout and out-of-memory inputs go to
# build/fuzz/work/<target>/artifacts/ (emptied at the start), libFuzzer's output to .../log-<n>.txt.
# After a crash the target starts again for the rest of its share, so a run can find several.
# Prints one line per target and exits 1 when any target crashed:
#   case=fuzz_<target> execs=<n> crashes=<k> seconds=<s>
# Reproduce a crash:  build/fuzz/fuzz/fuzz_<target> build/fuzz/work/<target>/artifacts/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[ $# -gt 0 ] && shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then  # every fuzz/<target>_fuzz.cc
  for f in fuzz/*_fuzz.cc; do targets+=("$(basename "$f" _fuzz.cc)"); done
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi

cmake --preset fuzz >/dev/null
nice cmake --build --preset fuzz >/dev/null

share() { [ "$1" = onnx ] && echo 2 || echo 1; }
parts=0
for t in "${targets[@]}"; do
  [ -f "fuzz/${t}_fuzz.cc" ] || { echo "scripts/fuzz.sh: unknown target '$t'" >&2; exit 2; }
  parts=$((parts + $(share "$t")))
done

any_crash=0
for t in "${targets[@]}"; do
  budget=$((seconds * $(share "$t") / parts))
  [ "$budget" -lt 1 ] && budget=1
  work="build/fuzz/work/$t"
  rm -rf "$work/artifacts"
  mkdir -p "$work/corpus" "$work/artifacts"
  for f in "fuzz/corpus/$t"/*; do
    [ -f "$f" ] || continue
    cp "$f" "$work/corpus/"
  done
  rm -f "$work"/log-*.txt
  options=(-timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/")
  [ -f "fuzz/$t.dict" ] && options+=(-dict="fuzz/$t.dict")
  execs=0 run=0 start=$SECONDS
  while true; do
    left=$((budget - (SECONDS - start)))
    [ "$left" -lt 1 ] && break
    run=$((run + 1))
    log="$work/log-$run.txt"
    before=$(ls "$work/artifacts" | wc -l)
    rc=0
    "build/fuzz/fuzz/fuzz_$t" -max_total_time="$left" "${options[@]}" "$work/corpus" >"$log" 2>&1 \
      || rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    [ -z "$n" ] && n=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -1)
    execs=$((execs + ${n:-0}))
    [ "$rc" -eq 0 ] && break
    # A crash: keep the input that did it out of the corpus, or the next start stops on it again;
    # stop when this run found nothing new (the same input again).
    [ "$(ls "$work/artifacts" | wc -l)" -gt "$before" ] || break
    sha1sum "$work/artifacts"/* | awk '{print $1}' > "$work/crashing.sha1"
    sha1sum "$work/corpus"/* | awk 'NR == FNR { bad[$1] = 1; next } ($1 in bad) { print $2 }' \
      "$work/crashing.sha1" - | xargs -r rm -f
  done
  crashes=$(find "$work/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  [ "$crashes" -gt 0 ] && any_crash=1
  echo "case=fuzz_$t execs=$execs crashes=$crashes seconds=$((SECONDS - start))"
done
exit "$any_crash"
