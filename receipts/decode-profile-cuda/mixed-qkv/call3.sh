#!/usr/bin/env bash
# One GPU (issue 30, step 45): the real Gemma-3 Q4_K_M file (v in Q8_0 beside q, k in Q5_0 in
# 9 of 18 layers, so the mixed q|k|v launch) through the gate, where call1.sh and call2.sh
# checked bits on its synthetic twin only. O = main 1e02852's build, N = ee56862's, both and
# the file's six chunks staged under STAGE (/root/stage) by earlier calls on the same warm
# machine (as for call2.sh). Proves:
#  - sha256.txt: the reassembled file is scripts/fetch-models.sh's;
#  - same.txt: N's receipt `diff` same as O's (placement.resident left out, as
#    scripts/decode-ab.sh does) on every arm and serve at N = 2, --mma auto and off;
#  - gates.txt: with N, every arm PASS at N = 1 (prompt 203, chunk 64, seed 17) and N = 3
#    (prompt 45, chunks 19 and 6, seed 58); soak x10 at N = 2, pipelined and eager,
#    --jitter-us 20.
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call3.sh (from the repo root). As run
# (2026-12-06, one H100, `nvidia-h100-x1`, driver 580.159.04): as written, 76 s, after one
# call staging bin/ and c5 and five carrying c0..c4; files in h100-gates/.
set -u
OUT=${OUT:?}
ST=${STAGE:-/root/stage}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/models /tmp/r
F=/root/models/gemma-3-270m-q4_k_m.gguf
[ -f $F ] || cat $ST/gq/c0 $ST/gq/c1 $ST/gq/c2 $ST/gq/c3 $ST/gq/c4 $ST/gq/c5 > $F
sha256sum $F | tee $OUT/sha256.txt
grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 $OUT/sha256.txt && echo "sha256: scripts/fetch-models.sh's" | tee -a $OUT/sha256.txt
: > $OUT/same.txt
for mm in auto off; do
  G="--backend cuda --model $F --mma $mm --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  timeout 60 $ST/bin/O $G --receipt /tmp/r/o.json > /tmp/r/o.txt 2>&1; a=$?
  timeout 60 $ST/bin/N $G --receipt /tmp/r/n.json > /tmp/r/n.txt 2>&1; c=$?
  echo "real file --mma $mm: exit O $a N $c; $($ST/bin/N diff --ignore placement.resident /tmp/r/o.json /tmp/r/n.json 2>&1 | head -4)" >> $OUT/same.txt
done
cat $OUT/same.txt
: > $OUT/gates.txt
for g in "--stages 1 --prompt-len 203 --chunk 64 --gen-len 13 --seed 17" \
         "--stages 3 --prompt-len 45 --chunk 19,6 --gen-len 21 --seed 58"; do
  timeout 60 $ST/bin/N --backend cuda --model $F $g --arms eager,pipelined,batched,prime,verify -q > /tmp/r/g.txt 2>&1
  echo "N real $g: exit $? $(grep -c PASS /tmp/r/g.txt) PASS lines, $(grep -c FAIL /tmp/r/g.txt) FAIL" >> $OUT/gates.txt
done
timeout 90 $ST/bin/N soak --runs 10 --backend cuda --model $F --stages 2 --arms pipelined,eager \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/r/soak > /tmp/r/soak.txt 2>&1
echo "soak exit $?: $(tail -2 /tmp/r/soak.txt | tr '\n' ' ')" >> $OUT/gates.txt
cat $OUT/gates.txt
