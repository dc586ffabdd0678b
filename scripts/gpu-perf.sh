#!/usr/bin/env bash
# Engine speed work on the GPU machine, in one call (issue 4):
#
#   scripts/gpu-perf.sh BASE_BIN NEW_BIN OUTDIR [ncu|-] [stages]
#
# - two synthetic models generated there (SmolLM2-135M's shapes in q4_1; a gemma3-shaped
#   model in q4_k), so no model transfer is needed;
# - bit-identity of NEW against BASE: the same gates (all arms, N=2; batched B=8) with both
#   binaries, `diff` of the receipts (kernel changes that keep every reduction order must
#   say "same");
# - eager/batched bench of both binaries on the SmolLM2-shaped model, one after the other;
# - with "ncu": per-kernel GPU time of NEW (Nsight Compute, clocks left alone), 4 tokens;
# - with "stages": NEW's bench at N=2 and N=4 (pipelined vs eager on one GPU).
set -u
BASE=$1
NEW=$2
OUT=$3
mkdir -p "$OUT/r"
SUM="$OUT/summary.txt"
row() { printf '%-56s %s\n' "$1" "$2" | tee -a "$SUM"; }
SMOL=/tmp/smolshape.gguf
GEM=/tmp/gemmashape.gguf
"$NEW" synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 \
    --vocab 49152 --quant q4_1 --seed 3 -o $SMOL >/dev/null
"$NEW" synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 \
    --vocab 32768 --quant q4_k --seed 5 -o $GEM >/dev/null
for m in smol gem; do
    f=$SMOL
    [ $m = gem ] && f=$GEM
    for b in base new nopdl; do
        bin=$BASE
        extra=""
        [ $b != base ] && bin=$NEW
        [ $b = nopdl ] && extra="--pdl off"
        "$bin" --backend cuda -q --model $f --stages 2 $extra --receipt "$OUT/r/$m-n2-$b.json" >>"$OUT/log.txt" 2>&1
        row "$m gate N=2 all arms ($b)" "exit $?"
        "$bin" --backend cuda -q --model $f --stages 1 --arms batched --batch 8 $extra \
            --receipt "$OUT/r/$m-b8-$b.json" >>"$OUT/log.txt" 2>&1
        row "$m gate batched B=8 ($b)" "exit $?"
    done
    for g in n2 b8; do
        for b in new nopdl; do
            row "diff $m-$g base $b" "$("$NEW" diff "$OUT/r/$m-$g-base.json" "$OUT/r/$m-$g-$b.json" 2>&1 | head -1 | cut -c1-40)"
        done
    done
done
for b in base nopdl new; do
    bin=$BASE
    extra=""
    [ $b != base ] && bin=$NEW
    [ $b = nopdl ] && extra="--pdl off"
    echo "== bench $b" >>"$SUM"
    "$bin" bench --backend cuda --model $SMOL --stages 1 --arms eager,batched --batch 8 --steps 64 $extra >>"$SUM" 2>&1
done
[ "${5:-}" = stages ] && echo "== bench new, N=2 and N=4 (pipelined vs eager)" >>"$SUM"
[ "${5:-}" = stages ] && for n in 2 4; do
    "$NEW" bench --backend cuda --model $SMOL --stages $n --steps 64 >>"$SUM" 2>&1
done
if [ "${4:-}" = ncu ]; then
    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-skip 1520 \
        --launch-count 608 "$NEW" bench --backend cuda --model $SMOL --stages 1 --arms eager \
        --steps 16 >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
    row "ncu" "exit $?"
fi
cat "$SUM"
