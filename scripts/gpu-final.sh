#!/usr/bin/env bash
# One call on the GPU machine after engine changes: the engine checks on the real models,
# the engine's receipts diffed against the previous engine's committed ones, and a runtime
# pass (the one-GPU battery gates/gpu-1.json, `ppn-gate selftest` with 5 runs per row, an
# x20 soak and N=2/N=4 bench on SmolLM2).
#
#   scripts/gpu-final.sh BIN MODELDIR ORACLEDIR OLD_ENGINE_RECEIPTS OUTDIR
#
# Run from the repository root (the battery names models/ and tests/data/ relative to it;
# models/ is linked to MODELDIR when absent).
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
[ -e models ] || ln -s "$M" models
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
{
    "$BIN" battery gates/gpu-1.json --out "$OUT/rt/battery"
    echo "battery: exit $?"
    "$BIN" selftest --backend cuda --runs 5 --out "$OUT/rt/selftest"
    echo "selftest: exit $?"
    "$BIN" soak --backend cuda -q --runs 20 --out "$OUT/rt/soak-smol-n4-x20" --model "$SMOL" --stages 4
    echo "soak: exit $?"
    find "$OUT/rt/soak-smol-n4-x20" -name 'run-*.json' ! -name 'run-001.json' -delete
    for n in 2 4; do
        "$BIN" bench --backend cuda --model "$SMOL" --stages $n --steps 64
    done
} >"$OUT/rt/summary.txt" 2>&1
echo "runtime: exit $?" >>"$OUT/rt/summary.txt"
grep -m6 -E "module|modules" "$OUT/e/log.txt"
grep -v "^cuda: device" "$OUT/e/summary.txt" | grep -E "exit|same|diff|vs previous|tok/s|enqueue|bandwidth"
grep -v "^cuda: device" "$OUT/rt/summary.txt" | grep -E "PASS|FAIL|SKIP|caught|passed|cannot open|tok/s|exit"
# At most 8 files come back from the machine: one archive of every receipt and log.
cp "$OUT/e/summary.txt" "$OUT/engine-summary.txt"
cp "$OUT/rt/summary.txt" "$OUT/runtime-summary.txt"
tar czf "$OUT/final.tgz" -C "$OUT" e rt && rm -rf "$OUT/e" "$OUT/rt"
