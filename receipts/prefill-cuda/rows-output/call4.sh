#!/usr/bin/env bash
# Issue 30 step 37, call 4 on one GPU: the changed attention_rows under every arm at every
# stage count the issue names, all stages on the one GPU (hidden placements).
#   A = 1085007's kernels (.stage/bin/A: call 2's N, the same code but comments).
# Proves (gates.txt): on the SmolLM2, Gemma-3 Q4_K_M-mix and Qwen3-0.6B shapes, every arm
# (eager, pipelined, batched, prime at chunks of 37 and 100, verify, serve) PASSes at N = 1, 2,
# 3, 4 and 8 over a 100-token prompt; and at N = 2 with --graphs off, the receipt `diff`s same
# as with graphs on.
set -u
OUT=${OUT:?}
B=.stage/bin/A
. scripts/shapes.sh
for m in smol gemq4km q3; do $B synth ${SHAPES[$m]} -o /tmp/$m.gguf > /dev/null & done; wait
A="--arms eager,pipelined,batched,prime,verify,serve --prompt-len 100 --chunk 37,100"
{
for m in smol gemq4km q3; do
  for n in 1 2 3 4 8; do
    timeout 100 $B --backend cuda --model /tmp/$m.gguf --stages $n $A --quiet --receipt /tmp/$m-$n.json
    echo "$m N=$n exit $?"
  done
  timeout 100 $B --backend cuda --model /tmp/$m.gguf --stages 2 $A --graphs off --quiet --receipt /tmp/$m-2g.json
  echo "$m N=2 --graphs off exit $?; $($B diff --ignore backend.graphs /tmp/$m-2.json /tmp/$m-2g.json 2>&1 | head -3)"
done
} > $OUT/gates.txt 2>&1
cat $OUT/gates.txt
