#!/usr/bin/env bash
# Matvec row tiles 1..8 (every launch over whole tiles) against the base build (733ebbc):
# the same gates with both binaries must give the same receipts (`diff`: same) at batch sizes
# that take every tile and a remainder launch (B = 2, 3, 5, 8, 11 = 8 + 3), on synthetic
# models of SmolLM2-135M's, Gemma-3-270M's and the 8.75 GB model's widths; then bench, both
# binaries in one call, on those and on the 8.75 GB model itself.
#   bash receipts/cuda-wide/call-2.sh BASE TILE OUT
# NO_BIG=1: without the 8.75 GB model; BIG_ONLY=1: only it.
set -u
BASE=$1 TILE=$2 OUT=$3
mkdir -p /tmp/m "$OUT/r"
W=/tmp/m/wide4.gguf S=/tmp/m/smolshape.gguf G=/tmp/m/gemmashape.gguf BIG=/tmp/m/synth-llama-8g.gguf
C="--backend ${BACKEND:-cuda} -q"
$TILE synth --arch llama --layers 4 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 --vocab 32000 --quant q8_0 --seed 13 -o $W >/dev/null
$TILE synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $S >/dev/null
$TILE synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 --vocab 32768 --quant q4_k --seed 5 -o $G >/dev/null
[ -z "${BIG_ONLY:-}" ] && for m in wide4:$W smol:$S gemma:$G; do
  for b in 2 3 5 8 11; do
    for v in base tile; do
      B=$BASE; [ $v = tile ] && B=$TILE
      $B $C --model ${m#*:} --stages 2 --batch $b --receipt $OUT/r/${m%%:*}-b$b-$v.json >>$OUT/log.txt 2>&1
      echo "${m%%:*} N=2 B=$b $v: exit $?"
    done
    echo "${m%%:*} B=$b base vs tile: $($TILE diff $OUT/r/${m%%:*}-b$b-base.json $OUT/r/${m%%:*}-b$b-tile.json 2>&1 | head -2 | tr '\n' ' ' | cut -c1-160)"
  done
done
bench() {
  local name=$1 model=$2 b=$3
  shift 3
  for v in base tile; do
    B=$BASE; [ $v = tile ] && B=$TILE
    echo "$name B=$b $v | $($B bench --backend ${BACKEND:-cuda} --model $model --arms batched --batch $b --steps ${STEPS:-64} "$@" 2>&1 | grep -E '^  (eager|batched)' | sed -E 's/ +/ /g' | tr '\n' '|')"
  done
}
[ -z "${BIG_ONLY:-}" ] && for m in wide4:$W smol:$S gemma:$G; do
  for b in 2 3 5 8; do bench ${m%%:*} ${m#*:} $b --stages 1; done
done
[ -n "${NO_BIG:-}" ] && exit 0
t0=$(date +%s)
$TILE synth --arch llama --layers 45 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 --vocab 32000 --quant q8_0 --seed 13 -o $BIG >/dev/null
echo "synth big: $(($(date +%s) - t0)) s"
for b in 3 8; do STEPS=32 bench big $BIG $b --stages 2; done
for v in base tile; do
  B=$BASE; [ $v = tile ] && B=$TILE
  $B $C --model $BIG --stages 2 --batch 3 --receipt $OUT/r/big-b3-$v.json >>$OUT/log.txt 2>&1
  echo "big N=2 B=3 $v: exit $?"
done
echo "big B=3 base vs tile: $($TILE diff $OUT/r/big-b3-base.json $OUT/r/big-b3-tile.json 2>&1 | head -2 | tr '\n' ' ' | cut -c1-160)"
