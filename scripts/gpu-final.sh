#!/usr/bin/env bash
# One call on the GPU machine after engine changes: the engine checks on the real models,
# the engine's receipts diffed against the previous engine's committed ones, and a short
# runtime pass (same-device gates, x20 soak, the built-in-model faults, N=2/N=4 bench).
#
#   scripts/gpu-final.sh BIN MODELDIR ORACLEDIR OLD_ENGINE_RECEIPTS OUTDIR
set -u
BIN=$1
M=$2
O=$3
OLD=$4
OUT=$5
mkdir -p "$OUT/e" "$OUT/rt"
bash scripts/gpu-engine.sh "$BIN" "$M" "$O" "$OUT/e" >/dev/null 2>&1
echo "engine: exit $?" >>"$OUT/e/summary.txt"
for r in "$OUT"/e/r/*.json; do
    b=$(basename "$r")
    [ -f "$OLD/$b" ] && printf '%-40s %s\n' "vs previous engine: $b" \
        "$("$BIN" diff "$OLD/$b" "$r" 2>&1 | head -1 | cut -c1-12)" >>"$OUT/e/summary.txt"
done
NO_BIG=1 SOAK_RUNS=20 BENCH_MODELS="$M/SmolLM2-135M-Instruct.Q4_1.gguf" \
    bash scripts/gpu-runtime.sh "$BIN" "$M" "$OUT/rt" "gates soak faults-light bench" >/dev/null 2>&1
echo "runtime: exit $?" >>"$OUT/rt/summary.txt"
grep -m6 -E "module|modules" "$OUT/e/log.txt"
grep -v "^cuda: device" "$OUT/e/summary.txt" | grep -E "exit|same|diff|vs previous|tok/s|enqueue|bandwidth"
grep -v "^cuda: device" "$OUT/rt/summary.txt" | grep -E "PASS|FAIL|tok/s|exit"
# At most 8 files come back from the machine: one archive of every receipt and log.
cp "$OUT/e/summary.txt" "$OUT/engine-summary.txt"
cp "$OUT/rt/summary.txt" "$OUT/runtime-summary.txt"
tar czf "$OUT/final.tgz" -C "$OUT" e rt && rm -rf "$OUT/e" "$OUT/rt"
