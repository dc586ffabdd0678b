#!/usr/bin/env bash
# Final session, main call 2: ppn-gate vs llama.cpp on the same files (llama.cpp built and
# the synthetic files written by start.sh), then the prime/verify arms on CUDA (#13).
set -u
OUT=$1; BIN=${BIN:-.stage/ppn-gate-f}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p $OUT/cmp
echo "bin $BIN; llama.cpp build: $(tail -1 /tmp/lcb/build.log)" > $OUT/info.txt
cat /tmp/sm/synth.log >> $OUT/info.txt
LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin MODELS=models DEADLINE_S=${DL:-300} \
  bash scripts/bench-vs-llamacpp.sh $BIN .stage/llama.cpp.tgz $OUT/cmp > /tmp/cmp.txt 2>&1
echo "bench-vs-llamacpp exit $? at $(el) s" >> $OUT/info.txt
rm -f $OUT/cmp/raw.tar.gz
cp /tmp/cmp.txt $OUT/cmp/stdout.txt
ln -sf /tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf models/llama8b-L8-q4k.gguf
SECTIONS=${H13:-gates fp faults} timeout $(( ${T2:-540} - $(el) )) bash scripts/gpu-h13.sh $BIN models $OUT/h13 > /dev/null 2>&1
echo "gpu-h13 exit $? at $(el) s" >> $OUT/info.txt
cat $OUT/info.txt; tail -14 /tmp/cmp.txt; cat $OUT/h13/summary.txt
