#!/usr/bin/env bash
# One GPU (issue 30, step 45): q|k|v of two vectorized formats in ONE one-row launch
# (kernels/mvq.cu mvq_mix_body, engine/matvec.rs mix_of): gemma3's Q4_K_M file holds v in
# Q8_0 beside q and k in Q5_0 in 9 of its 18 layers, which took two launches. O = main
# 1e02852's build (its engine is 987646d's), N = this step's tree. Proves:
#  - ab/same.txt (scripts/decode-ab.sh): N's receipts `diff` same as O's on every arm and
#    serve at N = 2 on the Gemma-3 Q4_K_M mix (Q5_0|Q8_0) and the Qwen3-0.6B shape in Q4_K_M
#    (q3km: Q4_K|Q6_K in 14 of 28 layers, below --mma auto's 4096), --mma auto;
#  - ab/speed.txt: decode-only eager on those two files, builds alternating twice; ab/prof.txt
#    (PROF=1): each launch kind's us and count (events around each launch, graphs off);
#  - gates.txt: with N, every arm PASS at N = 1 and N = 3 with prompt lengths and chunks not
#    used above, on both files; soak x10 of the Gemma-3 mix at N = 2, pipelined and eager,
#    --jitter-us 20;
#  - bench/: N's eager and B=8 on the Gemma-3 twin beside llama.cpp built in this call (the
#    anchors tarball), ROUNDS rounds (summary.txt, vs-llamacpp.json); bench-O/: O's the same,
#    after it, on the same llama.cpp build.
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call1.sh (from the repo root). As run
# (2026-12-06, one H100, `nvidia-h100-x1`): as written; its files are in h100/. A call returns
# 8 files, so bench-O/ did not come back: its summary, as printed, is in h100/printed.txt.
set -u
OUT=${OUT:?}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
OUT=$OUT/ab SAME=${SAME-"gemq4km:auto q3km:auto"} SPEED=${SPEED-"gemq4km q3km"} SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 PROF=1 timeout 260 scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N > /tmp/ab-out.txt 2>&1
echo "decode-ab exit $? at $(( $(date +%s) - T0 )) s"
cat $OUT/ab/same.txt; grep -v floor $OUT/ab/speed.txt
grep -E "^=|q\|k\|v|norm\+head" $OUT/ab/prof.txt | head -24
: > $OUT/gates.txt
for m in gemq4km q3km; do
  for g in "--stages 1 --prompt-len 203 --chunk 64 --gen-len 13 --seed 17" \
           "--stages 3 --prompt-len 45 --chunk 19,6 --gen-len 21 --seed 58"; do
    timeout 60 .stage/bin/N --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q > /tmp/g.txt 2>&1
    echo "N $m $g: exit $? $(grep -c PASS /tmp/g.txt) PASS lines, $(grep -c FAIL /tmp/g.txt) FAIL" >> $OUT/gates.txt
  done
done
timeout 90 .stage/bin/N soak --runs 10 --backend cuda --model /tmp/ab/gemq4km.gguf --stages 2 --arms pipelined,eager \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/soak > /tmp/soak.txt 2>&1
echo "soak exit $?: $(tail -2 /tmp/soak.txt | tr '\n' ' ')" >> $OUT/gates.txt
cat $OUT/gates.txt
echo "gates done at $(( $(date +%s) - T0 )) s"
for b in N O; do
  d=bench; [ $b = O ] && d=bench-O
  ROWS="gemma3-shape-q4_k_m" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= ROUNDS=${ROUNDS:-3} \
    LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log DEADLINE_S=$(( ${DEADLINE:-585} - ($(date +%s) - T0) )) \
    scripts/bench-vs-llamacpp.sh .stage/bin/$b none $OUT/$d > /tmp/bench-$b.out 2>&1
  echo "bench $b exit $? at $(( $(date +%s) - T0 )) s"; tail -3 /tmp/bench-$b.out
  rm -f $OUT/$d/raw.tar.gz; cat $OUT/$d/summary.txt 2>/dev/null
done
