#!/usr/bin/env bash
# One GPU, meant for an H200 (issue 30, step 45), O and N as in call1.sh (O = main 1e02852's
# build, N = ee56862's).
# Before it, on the same warm machine, earlier calls put under STAGE (/root/stage): bin/O and
# bin/N, gq/c0..c5 (the real Gemma-3 Q4_K_M file as six chunks of one stream, `split -b
# 45000000 -d -a 1 models/gemma-3-270m-q4_k_m.gguf .stage/gq/c`, one chunk a call, since a
# call carries 64 MiB), and started `scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc`:
# the first carried .stage/bins.tar.xz (`tar cJf .stage/bins.tar.xz -C .stage bin`),
# .stage/llama.cpp.tgz and .stage/gq/c5 and ran `mkdir -p /root/stage/gq && tar xJf
# .stage/bins.tar.xz -C /root/stage && cp .stage/gq/c5 /root/stage/gq/ &&
# scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc`; the next five `cp .stage/gq/cK
# /root/stage/gq/`, carrying that chunk.
# Proves:
#  - sha256.txt: the reassembled file is scripts/fetch-models.sh's (its sha256);
#  - ab/: on that GPU, N's receipts `diff` same as O's on every arm and serve at N = 2 on the
#    Gemma-3 Q4_K_M twin, and decode-only eager of O and N on the twin and q3km, alternating
#    twice (speed.txt);
#  - bench-N/, bench-O/: eager and B=8 of the real file and its twin beside llama.cpp built in
#    this session on this machine, ROUNDS rounds each (summary.txt, vs-llamacpp.json), N's
#    first, then O's on the same llama.cpp build. Returned as one tarball (all.tgz).
# Run: OUT=DIR receipts/decode-profile-cuda/mixed-qkv/call2.sh (from the repo root). As run
# (2026-12-06): named nvidia-h200, an H100 came (`nvidia-smi` in the first line printed); as
# written, after five chunk calls; all.tgz unpacked in h100-real/.
set -u
OUT=${OUT:?}
ST=${STAGE:-/root/stage}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/models
cat $ST/gq/c0 $ST/gq/c1 $ST/gq/c2 $ST/gq/c3 $ST/gq/c4 $ST/gq/c5 > /root/models/gemma-3-270m-q4_k_m.gguf
sha256sum /root/models/gemma-3-270m-q4_k_m.gguf | tee $OUT/sha256.txt
grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 $OUT/sha256.txt && echo "sha256: scripts/fetch-models.sh's" | tee -a $OUT/sha256.txt
OUT=$OUT/ab SAME=${SAME-"gemq4km:auto"} SPEED=${SPEED-"gemq4km q3km"} SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 timeout 150 scripts/decode-ab.sh O=$ST/bin/O N=$ST/bin/N > /tmp/ab-out.txt 2>&1
echo "decode-ab exit $? at $(( $(date +%s) - T0 )) s"
cat $OUT/ab/same.txt; grep -v floor $OUT/ab/speed.txt; rm -f $OUT/ab/prefill.txt
for b in N O; do
  MODELS=/root/models ROWS="gemma3-270m-q4_k_m gemma3-shape-q4_k_m" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= ROUNDS=${ROUNDS:-3} \
    LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log \
    DEADLINE_S=$(( ${DEADLINE:-580} - ($(date +%s) - T0))) \
    scripts/bench-vs-llamacpp.sh $ST/bin/$b none $OUT/bench-$b > /tmp/bench-$b.out 2>&1
  echo "bench $b exit $? at $(( $(date +%s) - T0 )) s"; tail -2 /tmp/bench-$b.out
  rm -f $OUT/bench-$b/raw.tar.gz; cat $OUT/bench-$b/summary.txt 2>/dev/null
done
(cd $OUT && tar czf /tmp/all.tgz sha256.txt ab bench-N bench-O 2>/dev/null) && rm -rf $OUT/ab $OUT/bench-N $OUT/bench-O && mv /tmp/all.tgz $OUT/
ls $OUT
