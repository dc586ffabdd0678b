#!/usr/bin/env bash
# Issue 30 step 61, call 5 (prepared 2026-12-08, not run). First, on N, a model of heads x
# head_dim 16 gated on CUDA: refused when its stages are built, exit 2, naming the width
# (2c35475; `w16.txt`). Then the A/B: N = 6c31750 (step 60's two-blocks-not-q8.patch, the
# one-row bound at 2 blocks an SM, reverted in 04d0c70) and N2 = N + host-mirror.patch (the
# host's grid sizing told that bound; N sizes for 3) against M = febdf20, on smol and
# gemq4km (call 4's gains) and l8q40 (8B, 8 layers, Q4_0: 4096-wide one-row FFMA launches
# that fill their grid, where 3 sized and 2 resident run a second wave, as Q8_0's did in
# step 60's call 2): bits (every arm and serve at N = 2 on smol and l8q40) and decode-only
# eager, two rounds (`c5.out`). With BUDGET > 0, then the CUDA shape sweep on N (seed 7).
#   bash scripts/build-variant.sh M febdf20; bash scripts/build-variant.sh N 6c31750
#   bash scripts/build-variant.sh N2 6c31750 receipts/decode-profile-cuda/warm-pass/host-mirror.patch
#   OUT=DIR bash receipts/decode-profile-cuda/warm-pass/call5.sh     [.stage carried; BUDGET=S: the sweep too]
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
B=.stage/bin/N
$B synth --arch qwen3 --layers 6 --embd 32 --heads 1 --kv-heads 1 --ff 64 --vocab 1687 --quant bf16 \
  --seed 71122 --head-dim 16 --tied -o /tmp/w16.gguf
$B --backend cuda --model /tmp/w16.gguf --stages 2 --prompt-len 4 --gen-len 4 > $OUT/w16.txt 2>&1
echo "w16 exit $?" | tee -a $OUT/w16.txt; cat $OUT/w16.txt
mkdir -p $OUT/c5
SAME="smol:auto l8q40:auto" SPEED="smol l8q40 gemq4km" SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 OUT=$OUT/c5 timeout 230 scripts/decode-ab.sh M=.stage/bin/M N=.stage/bin/N N2=.stage/bin/N2 \
  > $OUT/c5.out 2>&1
echo "ab exit $?"; cat $OUT/c5/same.txt; grep -h "eager " $OUT/c5/speed.txt
[ "${BUDGET:-0}" -gt 0 ] || exit 0
python3 scripts/shape-sweep.py $B --backend cuda --out /tmp/shapes --models 300 --seed 7 \
  --budget-s ${BUDGET:-0} > $OUT/shapes.out 2>&1
echo "shapes exit $?"
cp /tmp/shapes/summary.txt /tmp/shapes/refusals.txt /tmp/shapes/findings.txt $OUT/
tail -1 $OUT/summary.txt; head -c 3000 $OUT/findings.txt; grep -c "^backend" $OUT/refusals.txt
