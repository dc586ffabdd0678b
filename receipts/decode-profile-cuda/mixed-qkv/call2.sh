#!/usr/bin/env bash
# One H200 (issue 30, step 45), O and N as in call1.sh. Before it, on the same warm machine:
# `scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc` (llama.cpp's build, detached) and the
# real Gemma-3 Q4_K_M file carried as six chunks of one stream (`split -b 45000000 -d -a 1
# models/gemma-3-270m-q4_k_m.gguf .stage/gq/c`, one chunk a call). Proves:
#  - sha256.txt: the reassembled file is scripts/fetch-models.sh's (its sha256);
#  - ab/: on the H200, N's receipts `diff` same as O's on every arm and serve at N = 2 on the
#    Gemma-3 Q4_K_M twin, and decode-only eager of O and N on the twin and q3km, alternating
#    twice (speed.txt);
#  - bench-N/, bench-O/: eager and B=8 of the real file and its twin beside llama.cpp built in
#    this session on this machine, ROUNDS rounds each (summary.txt, vs-llamacpp.json), N's
#    first, then O's on the same llama.cpp build. Returned as one tarball (all.tgz).
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call2.sh (from the repo root).
set -u
OUT=${OUT:?}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/models
cat .stage/gq/c0 .stage/gq/c1 .stage/gq/c2 .stage/gq/c3 .stage/gq/c4 .stage/gq/c5 > /root/models/gemma-3-270m-q4_k_m.gguf
sha256sum /root/models/gemma-3-270m-q4_k_m.gguf | tee $OUT/sha256.txt
grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 $OUT/sha256.txt && echo "sha256: scripts/fetch-models.sh's" | tee -a $OUT/sha256.txt
OUT=$OUT/ab SAME=${SAME-"gemq4km:auto"} SPEED=${SPEED-"gemq4km q3km"} SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 timeout 150 scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N > /tmp/ab-out.txt 2>&1
echo "decode-ab exit $? at $(( $(date +%s) - T0 )) s"
cat $OUT/ab/same.txt; grep -v floor $OUT/ab/speed.txt; rm -f $OUT/ab/prefill.txt
for b in N O; do
  MODELS=/root/models ROWS="gemma3-270m-q4_k_m gemma3-shape-q4_k_m" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= ROUNDS=${ROUNDS:-3} \
    LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log \
    DEADLINE_S=$(( ${DEADLINE:-580} - ($(date +%s) - T0))) \
    scripts/bench-vs-llamacpp.sh .stage/bin/$b none $OUT/bench-$b > /tmp/bench-$b.out 2>&1
  echo "bench $b exit $? at $(( $(date +%s) - T0 )) s"; tail -2 /tmp/bench-$b.out
  rm -f $OUT/bench-$b/raw.tar.gz; cat $OUT/bench-$b/summary.txt 2>/dev/null
done
(cd $OUT && tar czf /tmp/all.tgz sha256.txt ab bench-N bench-O 2>/dev/null) && rm -rf $OUT/ab $OUT/bench-N $OUT/bench-O && mv /tmp/all.tgz $OUT/
ls $OUT
