#!/usr/bin/env bash
# The CUDA engine checks (issue 4), run on the GPU machine in one call:
#
#   scripts/gpu-engine.sh BIN MODELDIR ORACLEDIR OUTDIR
#
# - oracle: each real model on both oracle tapes, one stage, --topk 20 (compare the receipts
#   here with scripts/oracle-compare.py);
# - determinism: the same gate twice, `diff` of the receipts must say "same";
# - batch invariance: --batch B for B in 1 2 3 8 (each batched row is compared bit for bit with
#   its own B=1 single-stage reference by the gate itself);
# - timing: load + build + a 48-step gate, wall clock;
# - bench: single-stage decode, batch 8.
set -u
BIN=$1
M=$2
O=$3
OUT=$4
SECTIONS=""
source "$(dirname "$0")/gpu-lib.sh"
C="--backend cuda -q"
run() { # run NAME ARGS...: gate, exit code and wall ms
    local name=$1
    shift
    local t0=$(date +%s%N)
    "$BIN" $C "$@" --receipt "$OUT/r/$name.json" >>"$LOG" 2>&1
    local rc=$?
    row "$name" "exit $rc ($((($(date +%s%N) - t0) / 1000000)) ms)"
}
for t in tapeA tapeT; do
    run oracle-smol-$t --model "$SMOL" --tape "$O/smollm2-135m-q4_1.$t.json" --topk 20
    run oracle-gemma-$t --model "$GEMMA" --tape "$O/gemma3-270m-q4_k_m.$t.json" --topk 20
done
for m in smol gemma; do
    f=$SMOL
    [ $m = gemma ] && f=$GEMMA
    run twice-$m-a --model "$f" --stages 2
    run twice-$m-b --model "$f" --stages 2
    row "diff twice-$m: $("$BIN" diff "$OUT/r/twice-$m-a.json" "$OUT/r/twice-$m-b.json" | head -1 | cut -c1-40)" ""
    for b in 1 2 3 8; do
        run batch$b-$m --model "$f" --stages 1 --arms batched --batch $b
    done
    run gate48-$m --model "$f" --stages 1 --prompt-len 8 --gen-len 40
done
for f in "$SMOL" "$GEMMA"; do
    for b in 1 8; do
        "$BIN" bench --backend cuda --model "$f" --stages 1 --batch $b --steps 64 >>"$SUM" 2>&1
    done
done
