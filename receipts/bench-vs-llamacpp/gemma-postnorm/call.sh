#!/usr/bin/env bash
# Issue 30, the post-norm add step (commit bc0cd0f, its build), in one call on one H200, on synthetic
# twins of the two real files (the call could not carry them): gemma3-shape-q4_k_m (the real
# Gemma-3 270M file's shapes and its type mix matrix for matrix, synth's q4_k_m fallback) and
# smollm2-shape-q4_1. Steps: llama.cpp's build starts in the background (the script's recipe);
# meanwhile the bits of the new build (N) against the one before (O, 27750d6), every arm at
# N = 2, eager/B=8 of both builds alternating twice, and of the new one under --mma on (what
# the tensor cores would give these narrow files); then both rows beside llama.cpp
# (eager, B=8, prefill512) through scripts/bench-vs-llamacpp.sh.
set -u
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
. scripts/shapes.sh
mkdir -p /tmp/lcb /tmp/t
setsid nohup bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release &&
  nice -n 19 cmake --build build -j14 --target llama-bench llama-batched-bench llama-parallel &&
  echo BUILD-OK' > /tmp/lcb.log 2>&1 < /dev/null &
for m in gemq4km smol; do $N synth ${SHAPES[$m]} -o /tmp/t/$m.gguf > /dev/null & done; wait
: > $OUT/same.txt
for m in gemq4km smol; do
  F="--backend cuda --model /tmp/t/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/t/o.json > /tmp/t/o.txt 2>&1; a=$?
  $N $F --receipt /tmp/t/n.json > /tmp/t/n.txt 2>&1; b=$?
  echo "$m --mma auto, every arm at N = 2: exit O $a N $b; $($O diff /tmp/t/o.json /tmp/t/n.json 2>&1 | head -1)" >> $OUT/same.txt
done
for r in 1 2; do for m in gemq4km smol; do for b in O N; do
  eval B=\$$b
  $B bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(" | sed "s|^|$m $b: |" >> $OUT/same.txt
done; done; done
# What the tensor cores would give the Gemma mix (not auto's choice at this width), new build.
for m in gemq4km smol; do
  $N bench --backend cuda --model /tmp/t/$m.gguf --mma on --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(" | sed "s|^|$m N --mma on: |" >> $OUT/same.txt
done
cat $OUT/same.txt
rm -f /tmp/t/*.gguf
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log \
  DEADLINE_S=480 scripts/bench-vs-llamacpp.sh $N .stage/llama.cpp.tgz $OUT/bench > /tmp/t/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/bench/raw.tar.gz; tail -14 /tmp/t/bench.out
