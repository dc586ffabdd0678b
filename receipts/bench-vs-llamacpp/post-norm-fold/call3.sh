#!/usr/bin/env bash
# Issue 30, step 14, call 3 on one H200 (call 2's --pdl line named a receipt field that does
# not exist, so neither line compared): the new build (N, 797ce72) with --graphs off (every
# launch of the walk made each step: layers()'s eager loop, its own walk_carry) and with
# --pdl off, against O's (9917b9f) default receipt, every arm and serve at N = 2 on the
# Gemma-3 shapes (gem, gemq4km), and at N = 1 with --graphs off (one walk of 18 layers:
# 17 adds carried). same-graphs-pdl.txt.
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
mkdir -p /tmp/ab; . scripts/shapes.sh
for m in gem gemq4km; do $N synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null; done
: > $OUT/same-graphs-pdl.txt
for m in gem gemq4km; do
  for st in 2 1; do
    G="--backend cuda --model /tmp/ab/$m.gguf --stages $st --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
    $O $G --receipt /tmp/ab/o.json > /dev/null 2>&1
    for f in "--graphs off" "--pdl off"; do
      [ $st = 1 ] && [ "$f" = "--pdl off" ] && continue
      $N $G $f --receipt /tmp/ab/n.json > /tmp/ab/n.txt 2>&1; e=$?
      echo "$m N = $st, N $f against O: exit $e; $($N diff --ignore placement.resident --ignore backend.graphs /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -4)" >> $OUT/same-graphs-pdl.txt
    done
  done
done
cat $OUT/same-graphs-pdl.txt
