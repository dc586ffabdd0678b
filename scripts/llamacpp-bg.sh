#!/usr/bin/env bash
# Starts llama.cpp's build (the anchors tarball, CUDA sm_90, the three bench tools) in the
# background on the GPU machine, detached (setsid) so that it outlives the step, or the call,
# that started it: a call script's A/B runs meanwhile, and `scripts/bench-vs-llamacpp.sh` then
# takes LLAMA_BIN=DIR/llama.cpp/build/bin LLAMA_WAIT_LOG=DIR.log (it waits for BUILD-OK there).
#
#   scripts/llamacpp-bg.sh TARBALL DIR     (returns at once; the log is DIR.log)
set -u
[ $# -eq 2 ] && [ -f "$1" ] || { echo "usage: $0 TARBALL DIR (TARBALL a file)" >&2; exit 2; }
mkdir -p "$2"
setsid nohup bash -c 'tar xzf "$0" -C "$1" && cd "$1/llama.cpp" &&
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release &&
  nice -n 19 cmake --build build -j12 --target llama-bench llama-batched-bench llama-parallel &&
  echo BUILD-OK' "$1" "$2" > "$2.log" 2>&1 < /dev/null &
