#!/usr/bin/env bash
# Final session, call main2: ppn-gate vs llama.cpp on the same files (+ prefill512 rows),
# then prime/verify gates with stages over two GPUs (#13).
set -u
OUT=$1; BIN=${BIN:-$(cat /tmp/bin/CHOICE 2>/dev/null || echo /tmp/bin/M)}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p $OUT/cmp
echo "bin $BIN; llama.cpp build: $(tail -1 /tmp/lcb/build.log)" > $OUT/info.txt
while ! grep -q BUILD-OK /tmp/lcb/build.log && [ $(el) -lt ${BUILD_WAIT:-120} ]; do sleep 3; done
echo "build wait $(el) s: $(tail -1 /tmp/lcb/build.log)" >> $OUT/info.txt
LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin MODELS=models DEADLINE_S=${DL:-380} \
  bash scripts/bench-vs-llamacpp.sh $BIN .stage/llama.cpp.tgz $OUT/cmp > /tmp/cmp.txt 2>&1
echo "bench-vs-llamacpp exit $? at $(el) s" >> $OUT/info.txt
rm -f $OUT/cmp/raw.tar.gz
cp /tmp/cmp.txt $OUT/cmp/stdout.txt
GPUS=2 SECTIONS=${H13:-gates} timeout $(( ${T2:-560} - $(el) )) bash scripts/gpu-h13.sh $BIN models $OUT/h13 > /dev/null 2>&1
echo "gpu-h13 GPUS=2 exit $? at $(el) s" >> $OUT/info.txt
cat $OUT/info.txt; tail -20 /tmp/cmp.txt; cat $OUT/h13/summary.txt
