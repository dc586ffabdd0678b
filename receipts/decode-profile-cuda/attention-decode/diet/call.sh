#!/usr/bin/env bash
# Issue 30, step 16 (tried, not kept): the one-row attention's instruction diet, one call on
# one H200 (2026-12-03). N = cfb742e with tried.patch applied (att_kload/att_vload: whole
# batches loaded or skipped, no branch per load; att_kdots: q in registers, every j one
# branch-free chain, the own slot scored apart by warp 0; the adds eight at a time). O = cfb742e.
# Proves: the kernel alone, O against N (probe-summary.txt: us a launch and the output bits,
# 11 positions, four head shapes; ../probe.cu without its DS argument); the same bits in the
# engine (same.txt); eager and B=8, O and N alternating twice (speed.txt); gates N = 1 and 3
# (gates.txt) and a soak x10 (soak.txt).
# From the repository root, with .stage/ carried (.stage/bin/ppn-gate-{old,new}, and
# .stage/attprobe/att_{old,new}_src.cu made by ../mksrc.py from each tree): OUT=DIR bash THIS
set -u
D=receipts/decode-profile-cuda/attention-decode
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate-new
. $D/common.sh
run() { for v in old new; do for e in 1 0; do /tmp/ap/$v$4 $1 $2 $3 $4 $5 $6 $e | sed "s/^/$v /"; done; done; }
{ run smol 9 3 64 0 0; run qw 14 2 64 0 0; run l8 32 8 128 0 0; run gem 4 1 256 1 1; } > "$OUT"/probe.txt 2>&1
SAME="smol:auto qw05:auto q3:auto l8q4k:auto gemq4km:auto" SPEED="smol qw05 gemq4km l8q4k" PREFILL=smol ROUNDS=2 \
  scripts/decode-ab.sh O=$O N=$N > /tmp/ab.log 2>&1
for m in smol gemq4km; do
  G="--backend cuda --model /tmp/ab/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $G --receipt /tmp/ab/o.json > /dev/null 2>&1
  for f in "--graphs off" "--pdl off"; do
    $N $G $f --receipt /tmp/ab/n.json > /dev/null 2>&1
    echo "$m N $f against O: exit $?; $($N diff --ignore placement.resident --ignore backend.graphs /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -4)" >> $OUT/same.txt
  done
done
gates_on "smol gemq4km"
$N soak --runs 10 --out /tmp/ab/soak --backend cuda --model /tmp/ab/smol.gguf --stages 2 --arms pipelined --jitter-us 20 --gen-len 24 -q > $OUT/soak.txt 2>&1
