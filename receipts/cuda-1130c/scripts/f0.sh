#!/usr/bin/env bash
# Session 3 final, call f0: background jobs that outlive the call (llama.cpp build, the 8B
# shape), then the fault matrix on one H200 and a prime soak on a SmolLM2-shaped file.
set -u
OUT=$1; mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/bin /tmp/f0 $OUT
cp .stage/bin/N /tmp/bin/N; chmod +x /tmp/bin/N; B=/tmp/bin/N
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-62s %s\n' "$1" "$2" | tee -a $S; }
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j13 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
setsid bash -c 'W=/tmp/bench-vs-llamacpp/m; f="--preset llama8b --layers 8 --quant q4_k"
  nice -n 5 /tmp/bin/N synth $f -o $W/llama8b-l8-q4_k.gguf > /dev/null && echo "$f" > $W/llama8b-l8-q4_k.gguf.flags && echo synth-ok' > /tmp/f0/synth.log 2>&1 < /dev/null &
nvidia-smi -L >> $S
$B synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o /tmp/f0/smol.gguf > /dev/null 2>&1
timeout 200 $B selftest --backend cuda --runs 3 --out /tmp/f0/selftest > /tmp/f0/selftest.txt 2>&1
row "selftest (1 GPU, 3 runs) exit $? at $(el) s" "$(tail -1 /tmp/f0/selftest.txt | cut -c1-80)"
cp /tmp/f0/selftest/selftest.json $OUT/ 2>/dev/null
timeout 90 $B soak --backend cuda -q --runs 20 --model /tmp/f0/smol.gguf --stages 4 --arms prime --repeat 5 --chunk 1,8,16,64 --prompt-len 64 --gen-len 8 --out /tmp/f0/soak-prime > /tmp/f0/soak-prime.txt 2>&1
row "soak x20 smol-shape prime N=4 one GPU exit $?" "$(grep -oE '[0-9]+/20 PASS' /tmp/f0/soak-prime.txt | head -1) at $(el) s"
cp /tmp/f0/selftest.txt /tmp/f0/soak-prime.txt $OUT/ 2>/dev/null
tail -1 /tmp/lcb/build.log >> $S; cat /tmp/f0/synth.log >> $S
cat $S
