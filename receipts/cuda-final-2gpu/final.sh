#!/usr/bin/env bash
# The session's last device call: module cache, selftest, then ppn-gate vs llama.cpp.
set -u
OUT=$1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p $OUT/h12 $OUT/cmp $OUT/st /tmp/lcb
nvidia-smi -L > $OUT/gpus.txt
( tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 19 cmake --build build -j$(( $(nproc) - 4 )) --target llama-bench llama-batched-bench ) > /tmp/lcb/build.log 2>&1 &
BPID=$!
timeout 75 bash scripts/gpu-h12.sh .stage/ppn-gate $OUT/h12 > /tmp/h12.txt 2>&1
echo "gpu-h12 exit $? at $(el) s" >> $OUT/gpus.txt
FLAGS=""
.stage/ppn-gate --backend cuda -q --stages 2 --receipt /tmp/sanity.json > /tmp/sanity.txt 2>&1 || {
  echo "cached sanity gate failed: $(tail -3 /tmp/sanity.txt)" >> $OUT/gpus.txt; FLAGS=--no-cache; }
timeout 150 .stage/ppn-gate selftest --backend cuda --out /tmp/st > $OUT/st/selftest.txt 2>&1
echo "selftest exit $? at $(el) s" >> $OUT/gpus.txt
cp /tmp/st/selftest.json $OUT/st/ 2>/dev/null
while kill -0 $BPID 2>/dev/null && [ $(el) -lt 330 ]; do sleep 2; done
echo "llama.cpp build: $(ls /tmp/lcb/llama.cpp/build/bin/ 2>&1 | tr '\n' ' ') at $(el) s" >> $OUT/gpus.txt
tail -3 /tmp/lcb/build.log >> $OUT/gpus.txt
PPN_FLAGS=$FLAGS LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin DEADLINE_S=$(( 500 - $(el) )) \
  ROWS="llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m" \
  bash scripts/bench-vs-llamacpp.sh .stage/ppn-gate .stage/llama.cpp.tgz $OUT/cmp > /tmp/cmp.txt 2>&1
echo "bench-vs-llamacpp exit $? at $(el) s" >> $OUT/gpus.txt
rm -f $OUT/cmp/raw.tar.gz $OUT/h12/receipts.tar.gz
cat $OUT/gpus.txt; cat $OUT/h12/summary.txt; tail -25 $OUT/st/selftest.txt; tail -22 /tmp/cmp.txt
