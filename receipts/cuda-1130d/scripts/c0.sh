#!/usr/bin/env bash
# Session 4, first call on one H200: background jobs that outlive the call (llama.cpp build,
# the bench's synthetic files), then while they run the A/B of the eager branch (E against
# H = 463547c, scripts/gpu-eager.sh) and the tensor-core engine path (X, gpu-mma-engine.sh).
# Picks the build the later calls use (/tmp/bin/CHOICE): E when its gate diffs are all
# `same`, else H.
set -u
OUT=$1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/sm /tmp/bin /tmp/c0 $OUT
cp .stage/bin/* /tmp/bin/; chmod +x /tmp/bin/*
S=$OUT/summary.txt; row() { printf '%-58s %s\n' "$1" "$2" | tee -a $S; }
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j10 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
setsid bash -c '
W=/tmp/bench-vs-llamacpp/m
for spec in "llama8b-l8-q4_k|--preset llama8b --layers 8 --quant q4_k" \
            "llama8b-l8-q4_k_m|--preset llama8b --layers 8 --quant q4_k_m" \
            "llama8b-l8-q8_0|--preset llama8b --layers 8 --quant q8_0" \
            "llama70b-l2-q4_k|--preset llama70b --layers 2 --quant q4_k" \
            "llama8b-l32-q4_k_m|--preset llama8b --layers 32 --quant q4_k_m"; do
  row=${spec%%|*}; flags=${spec#*|}
  nice -n 5 /tmp/bin/H synth $flags -o $W/$row.gguf > /dev/null && echo "$flags" > $W/$row.gguf.flags && echo "synth $row ok $(date +%T)"
done' > /tmp/sm/synth.log 2>&1 < /dev/null &
nvidia-smi -L >> $S
echo /tmp/bin/H > /tmp/bin/CHOICE
if [ -x /tmp/bin/E ] && [ -f .stage/calls4/gpu-eager.sh ]; then
  timeout 200 bash .stage/calls4/gpu-eager.sh /tmp/bin/H /tmp/bin/E /tmp/c0/me $OUT/eager > $OUT/eager.txt 2>&1
  row "gpu-eager.sh exit $? at $(el) s" ""
  tail -15 $OUT/eager.txt >> $S
  # E for the later calls only when every gate diff is same and the planted change is caught.
  sm=$(grep -oE 'diffs same: [0-9]+ of [0-9]+' $OUT/eager.txt | tail -1)
  if [ -n "$sm" ] && [ "$(echo $sm | awk '{print $3}')" = "$(echo $sm | awk '{print $5}')" ] && \
     grep 'negative control' $OUT/eager.txt | tail -1 | grep -vqE 'want NOT same\): (FAIL|skipped)'; then
    echo /tmp/bin/E > /tmp/bin/CHOICE
  fi
  row "CHOICE ($sm)" "$(cat /tmp/bin/CHOICE)"
fi
if [ -x /tmp/bin/X ] && [ -f .stage/calls4/scripts/gpu-mma-engine.sh ]; then
  timeout 220 bash .stage/calls4/scripts/gpu-mma-engine.sh /tmp/bin/X /tmp/c0/mm $OUT/mma > $OUT/mma.txt 2>&1
  row "gpu-mma-engine.sh exit $? at $(el) s" ""
  tail -20 $OUT/mma.txt >> $S
fi
tail -1 /tmp/lcb/build.log >> $S; cat /tmp/sm/synth.log >> $S
for d in eager mma; do [ -d $OUT/$d ] && tar czf $OUT/$d.tgz -C $OUT $d && rm -rf $OUT/$d; done
cat $S
