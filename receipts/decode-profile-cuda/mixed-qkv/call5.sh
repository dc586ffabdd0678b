#!/usr/bin/env bash
# One GPU, meant for an H200 (issue 30, step 45): the Gemma-3 Q4_K_M twin (scripts/shapes.sh
# gemq4km, synthesized here) beside llama.cpp, in ONE call, for where the real file's six chunk
# calls (call2.sh) do not fit the session's device time. O = main 1e02852's build (before step
# 45), N = main 4abba25's; carried as .stage/bins.tar.xz (`tar cJf .stage/bins.tar.xz -C
# .stage bin`) with .stage/llama.cpp.tgz (the anchors tarball). Proves:
#  - same.txt (while llama.cpp builds): N's receipt `diff` same as O's (placement.resident left
#    out) on every arm and serve at N = 2 on q3km (scripts/shapes.sh: v in Q6_K beside Q4_K q
#    and k in 14 of 28 layers, 1024 wide) under --mma off, graphs on and off: the mixed
#    Q4_K|Q6_K FFMA launch, which step 45's first check (decode-ab under auto with --batch 8,
#    so the tensor cores for the whole run) never ran;
#  - bench-N/, bench-O/: eager and B=8 of the twin beside llama.cpp built in this call on this
#    machine, ROUNDS (3) rounds each (summary.txt, vs-llamacpp.json), N's first, then O's on
#    the same llama.cpp build.
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call5.sh (from the repo root, carrying
# the two .stage files); BENCH=0: same.txt only. As run (2026-12-06): named nvidia-h200, an
# H100 came (driver 580.159.04), so BENCH=0 (31 s), files in h100-q3km/. Then, in the next
# session, on an H200 (driver 580.159.04) with BENCH=1 ROUNDS=3 DEADLINE=540: files in
# h200-bench/ (276 s; bench-O/vs-llamacpp.json did not come back: a call returns 8 files).
set -u
OUT=${OUT:?}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p /root/stage && tar xJf .stage/bins.tar.xz -C /root/stage
[ "${BENCH:-1}" = 0 ] || [ -f /tmp/lc.log ] || scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
. scripts/shapes.sh
mkdir -p /tmp/r && /root/stage/bin/N synth ${SHAPES[q3km]} -o /tmp/r/q3km.gguf > /dev/null
ALL="--stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
: > $OUT/same.txt
for set in "--mma off $ALL" "--mma off --graphs off $ALL"; do
  G="--backend cuda --model /tmp/r/q3km.gguf $set"
  timeout 90 /root/stage/bin/O $G --receipt /tmp/r/o.json > /tmp/r/o.txt 2>&1; a=$?
  timeout 90 /root/stage/bin/N $G --receipt /tmp/r/n.json > /tmp/r/n.txt 2>&1; c=$?
  echo "q3km ${set%% --stages*}: exit O $a N $c; $(/root/stage/bin/N diff --ignore placement.resident /tmp/r/o.json /tmp/r/n.json 2>&1 | head -4)" >> $OUT/same.txt
done
cat $OUT/same.txt
[ "${BENCH:-1}" = 1 ] || exit 0
for b in N O; do
  MODELS=/nonexistent ROWS="gemma3-shape-q4_k_m" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= ROUNDS=${ROUNDS:-3} \
    LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log \
    DEADLINE_S=$(( ${DEADLINE:-585} - ($(date +%s) - T0))) \
    scripts/bench-vs-llamacpp.sh /root/stage/bin/$b none $OUT/bench-$b > /tmp/bench-$b.out 2>&1
  echo "bench $b exit $? at $(( $(date +%s) - T0 )) s"; tail -2 /tmp/bench-$b.out
  rm -f $OUT/bench-$b/raw.tar.gz; cat $OUT/bench-$b/summary.txt 2>/dev/null
done
