#!/usr/bin/env bash
set -u
D=$(dirname "$0"); OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
SMOL=/tmp/smolshape.gguf
$D/v0 synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $SMOL >/dev/null
for v in v0 v7; do
  $D/$v --backend cuda -q --model $SMOL --stages 2 --receipt $OUT/r/n2-$v.json >>$OUT/log.txt 2>&1; echo "$v n2 exit $?"
  $D/$v --backend cuda -q --model $SMOL --stages 1 --arms batched --batch 8 --receipt $OUT/r/b8-$v.json >>$OUT/log.txt 2>&1; echo "$v b8 exit $?"
done
echo "v7 diff: $($D/v0 diff $OUT/r/n2-v0.json $OUT/r/n2-v7.json 2>&1 | head -1 | cut -c1-30) / $($D/v0 diff $OUT/r/b8-v0.json $OUT/r/b8-v7.json 2>&1 | head -1 | cut -c1-30)"
GEM=/tmp/gemmashape.gguf
$D/v0 synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 --vocab 32768 --quant q4_k --seed 5 -o $GEM >/dev/null
for v in v0 v7; do
  $D/$v --backend cuda -q --model $GEM --stages 2 --receipt $OUT/r/gn2-$v.json >>$OUT/log.txt 2>&1; echo "$v gem n2 exit $?"
  $D/$v --backend cuda -q --model $GEM --stages 1 --arms batched --batch 8 --receipt $OUT/r/gb8-$v.json >>$OUT/log.txt 2>&1; echo "$v gem b8 exit $?"
done
echo "v7 gem diff: $($D/v0 diff $OUT/r/gn2-v0.json $OUT/r/gn2-v7.json 2>&1 | head -1 | cut -c1-30) / $($D/v0 diff $OUT/r/gb8-v0.json $OUT/r/gb8-v7.json 2>&1 | head -1 | cut -c1-30)"
for rep in 1 2; do for v in v0 v6 v7; do
  $D/$v bench --backend cuda --model $SMOL --stages 1 --arms eager,pipelined,batched --batch 8 --steps 64 > $OUT/bench-$v-$rep.txt 2>&1
  echo "$rep $v $(grep -E 'host enqueue' $OUT/bench-$v-$rep.txt | sed 's/.*host enqueue//') | $(grep -E '^  (reference|eager|pipelined|batched)' $OUT/bench-$v-$rep.txt | sed -E 's/ +/ /g; s/tok\/s//' | cut -c1-60 | tr '\n' '|')"
done; done
