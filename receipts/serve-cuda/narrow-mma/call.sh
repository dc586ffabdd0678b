#!/usr/bin/env bash
# Issue 30 (one H200, after step 20): does the serve arm at --max-rows 8 gain from the tensor
# cores on the narrow files, as the batched arm did? `bench --arms serve` (the bench-vs-llamacpp
# serve flags) under --mma auto (FFMA: the serve arm is not the batch rule's) and --mma on,
# alternating twice, on smol, gem and gemq4km; and the two settings' gates PASS (serve at N = 2).
# Run: OUT=DIR bash receipts/serve-cuda/narrow-mma/call.sh  (.stage carried: bin/ppn-gate-p;
# PART=2 also bin/ppn-gate-s)
set -u
OUT=${OUT:?}
P=.stage/bin/ppn-gate-p
. scripts/shapes.sh
mkdir -p /tmp/nm "$OUT"
for m in smol gem gemq4km; do $P synth ${SHAPES[$m]} -o /tmp/nm/$m.gguf > /dev/null & done; wait
if [ "${PART:-1}" = 2 ]; then
  S=.stage/bin/ppn-gate-s
  for m in smol gem gemq4km; do
    for r in 8 7; do
      mm=on; [ $r = 7 ] && mm=off
      G="--backend cuda --model /tmp/nm/$m.gguf --stages 2 --arms serve,eager --requests 16 --max-rows $r -q"
      $S $G --receipt /tmp/nm/a.json > /dev/null 2>&1; a=$?
      $S $G --mma $mm --receipt /tmp/nm/b.json > /dev/null 2>&1; b=$?
      echo "$m --max-rows $r: auto exit $a ($(python3 -c "import json;print(json.load(open('/tmp/nm/a.json'))['backend']['mma'])")), --mma $mm exit $b; $($S diff --ignore backend.mma /tmp/nm/b.json /tmp/nm/a.json 2>&1 | head -2 | tr '\n' ' ')"
    done
  done | tee "$OUT/rule.txt"
  exit 0
fi
SV="--requests 64 --max-rows 8 --prefill-chunk 8 --prompt-len 32 --gen-len 128"
for m in smol gem gemq4km; do
  for mm in auto on; do
    $P --backend cuda --model /tmp/nm/$m.gguf --stages 2 --arms serve --requests 16 --max-rows 8 --mma $mm -q > /tmp/nm/g.txt 2>&1
    echo "$m --mma $mm gate exit $?: $(grep -m1 serve /tmp/nm/g.txt)"
  done
  for r in 1 2; do
    for mm in auto on; do
      $P bench --backend cuda --model /tmp/nm/$m.gguf --stages 1 --arms serve $SV --mma $mm 2>&1 \
        | grep -E "^ *serve" | head -2 | tr -s ' ' | sed "s/^/$m --mma $mm round $r: /"
    done
  done
done | tee "$OUT/serve.txt"
# Part 2 (run as `PART=2`, the rule's build in bin/ppn-gate-s): the serve arm under auto at
# --max-rows 8 takes the tensor cores, its receipt `diff` same as --mma on's but the note; at
# --max-rows 7 the same bits as auto's FFMA before (--mma off), on the three shapes (rule.txt).
