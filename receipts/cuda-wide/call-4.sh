#!/usr/bin/env bash
# The committed tree (807d7da; it differs from the tile build's source by cargo fmt and one kernel comment) against the
# measured row-tile build: the same gates must be `same`.
#   bash receipts/cuda-wide/call-4.sh TILE HEAD OUT
set -u
TILE=$1 HEAD=$2 OUT=$3
mkdir -p /tmp/m "$OUT/r"
W=/tmp/m/wide4.gguf S=/tmp/m/smolshape.gguf G=/tmp/m/gemmashape.gguf
$HEAD synth --arch llama --layers 4 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 --vocab 32000 --quant q8_0 --seed 13 -o $W >/dev/null
$HEAD synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $S >/dev/null
$HEAD synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 --vocab 32768 --quant q4_k --seed 5 -o $G >/dev/null
for m in wide4:$W smol:$S gemma:$G; do
  for b in 3 11; do
    for v in tile head; do
      B=$TILE; [ $v = head ] && B=$HEAD
      $B --backend cuda -q --model ${m#*:} --stages 2 --batch $b --receipt $OUT/r/${m%%:*}-b$b-$v.json >>$OUT/log.txt 2>&1
      echo "${m%%:*} N=2 B=$b $v: exit $?"
    done
    echo "${m%%:*} B=$b tile vs head: $($HEAD diff $OUT/r/${m%%:*}-b$b-tile.json $OUT/r/${m%%:*}-b$b-head.json 2>&1 | head -1 | cut -c1-12)"
  done
done
