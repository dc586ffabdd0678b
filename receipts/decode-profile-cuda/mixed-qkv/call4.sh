#!/usr/bin/env bash
# One GPU (issue 30, step 45's review mend): `mvq_mix_launch` (src/backend/cuda/engine/
# matvec.rs) orders q|k|v's matrices in a stack array of three instead of a Vec built on every
# launch. That host path runs on every one-row q|k|v launch of a two-format model when graphs
# are off (with graphs on, only at capture), so this call runs it both ways.
# O = main 1e02852's build (before step 45), N = main 4abba25's (the mend); both staged under STAGE
# (/root/stage/bin) by the call before. The file: the Gemma-3 Q4_K_M twin (scripts/shapes.sh
# gemq4km), synthesized here by N. Proves:
#  - same.txt: N's receipt `diff` same as O's (placement.resident left out, as
#    scripts/decode-ab.sh does) on every arm and serve at N = 2 under --mma off (the mixed
#    FFMA launch: a --batch 8 run under auto takes the tensor cores), with graphs on, graphs
#    off, and graphs and programmatic dependent launch off; and on eager and pipelined under
#    auto (no batch: q|k|v stays on the mixed launch at 640 wide), graphs off;
#  - gates.txt: with N and graphs off, every arm PASS under --mma off at N = 1 (prompt 203,
#    chunk 64, seed 17), N = 3 (prompt 45, chunks 19 and 6, seed 58), N = 4 (prompt 77, chunk
#    33, seed 4) and N = 8 (prompt 29, chunk 5, seed 811), every stage on the one GPU; soak
#    x10 at N = 2, pipelined and eager, graphs off, --jitter-us 20.
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call4.sh (from the repo root). As run
# (2026-12-06): named nvidia-h200, an H100 came (driver 580.159.04), 63 s, after a first line
# unpacking .stage/bins.tar.xz under STAGE; files in h100-mend/.
set -u
OUT=${OUT:?}
ST=${STAGE:-/root/stage}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/r
. "$(dirname "$0")"/../../../scripts/shapes.sh
F=/tmp/r/gemq4km.gguf
[ -f $F ] || $ST/bin/N synth ${SHAPES[gemq4km]} -o $F > /dev/null
ALL="--stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
: > $OUT/same.txt
for set in "--mma off $ALL" "--mma off --graphs off $ALL" "--mma off --graphs off --pdl off $ALL" \
           "--mma auto --graphs off --stages 2 --arms eager,pipelined --prompt-len 70 --gen-len 24 -q"; do
  G="--backend cuda --model $F $set"
  timeout 90 $ST/bin/O $G --receipt /tmp/r/o.json > /tmp/r/o.txt 2>&1; a=$?
  timeout 90 $ST/bin/N $G --receipt /tmp/r/n.json > /tmp/r/n.txt 2>&1; c=$?
  echo "gemq4km ${set%% --stages*}: exit O $a N $c; $($ST/bin/N diff --ignore placement.resident /tmp/r/o.json /tmp/r/n.json 2>&1 | head -4)" >> $OUT/same.txt
done
cat $OUT/same.txt
: > $OUT/gates.txt
for g in "--stages 1 --prompt-len 203 --chunk 64 --gen-len 13 --seed 17" \
         "--stages 3 --prompt-len 45 --chunk 19,6 --gen-len 21 --seed 58" \
         "--stages 4 --prompt-len 77 --chunk 33 --gen-len 9 --seed 4" \
         "--stages 8 --prompt-len 29 --chunk 5 --gen-len 17 --seed 811"; do
  timeout 90 $ST/bin/N --backend cuda --model $F --mma off --graphs off $g --arms eager,pipelined,batched,prime,verify -q > /tmp/r/g.txt 2>&1
  echo "N gemq4km --mma off --graphs off $g: exit $? $(grep -c PASS /tmp/r/g.txt) PASS lines, $(grep -c FAIL /tmp/r/g.txt) FAIL" >> $OUT/gates.txt
done
timeout 120 $ST/bin/N soak --runs 10 --backend cuda --model $F --stages 2 --arms pipelined,eager --graphs off \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/r/soak > /tmp/r/soak.txt 2>&1
echo "N soak x10 --graphs off: exit $?: $(tail -2 /tmp/r/soak.txt | tr '\n' ' ')" >> $OUT/gates.txt
cat $OUT/gates.txt
