#!/usr/bin/env bash
# Final session, call 0: jobs that outlive this call while the machine stays warm: the
# llama.cpp build and the bench's synthetic models (build N, measured in call 2, writes them:
# synth output does not depend on the engine).
set -u
OUT=$1
mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/sm $OUT
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j12 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
cp .stage/ppn-gate-n /tmp/ppn-n
setsid bash -c '
W=/tmp/bench-vs-llamacpp/m
for spec in "llama8b-l8-q4_k|--preset llama8b --layers 8 --quant q4_k" \
            "llama8b-l8-q4_k_m|--preset llama8b --layers 8 --quant q4_k_m" \
            "llama8b-l8-q8_0|--preset llama8b --layers 8 --quant q8_0" \
            "llama70b-l2-q4_k|--preset llama70b --layers 2 --quant q4_k" \
            "llama8b-l32-q4_k_m|--preset llama8b --layers 32 --quant q4_k_m"; do
  row=${spec%%|*}; flags=${spec#*|}
  /tmp/ppn-n synth $flags -o $W/$row.gguf && echo "$flags" > $W/$row.gguf.flags && echo "synth $row ok $(date +%T)"
done' > /tmp/sm/synth.log 2>&1 < /dev/null &
ls -la .stage/parts/ | tail -3
echo "started: llama.cpp build and synth in the background"
