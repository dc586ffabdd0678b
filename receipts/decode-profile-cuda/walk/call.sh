#!/usr/bin/env bash
# The call of BENCH.md step 9 (run from a checkout of the walk, 7528cfe, with d53919d built as .stage/bin/ppn-gate-old): device call 2 of the layer walk: llama.cpp's llama-bench building in the background; the
# bits against the build before with the walk engaged (--mma off keeps every matrix on the
# FFMA kernels even with a prime arm), gates at N = 1 and 3, a soak x5, speeds O/N
# alternating with PPN_CUDA_PROF, then llama-bench beside ppn-gate on the same smol file.
set -u
cd "$(dirname "$0")/../.."
R=$(pwd)
O=$R/.stage/bin/ppn-gate-old N=$R/.stage/bin/ppn-gate
export OUT
T0=$(date +%s)
mkdir -p $HOME/lc && tar xzf .stage/llama.cpp.tgz -C $HOME/lc
( cd $HOME/lc/llama.cpp && setsid nice cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/lc.log 2>&1 && \
    setsid nice cmake --build build -j12 --target llama-bench >> /tmp/lc.log 2>&1; echo BUILD-RC $? >> /tmp/lc.log ) &
SAME="smol:off qw05:off q3:off smol:auto" SPEED="smol qw05 q3" ROUNDS=2 PROF=1 \
  timeout 300 scripts/decode-ab.sh O=$O N=$N > $OUT/ab.log 2>&1
echo "ab rc=$? at $(( $(date +%s) - T0 ))s"
{
echo "=== the walk engaged (-v)"
$N --backend cuda --model /tmp/ab/smol.gguf --mma off --stages 2 --arms eager,batched -v 2>&1 | grep -E "layer walk|PASS|FAIL" | head -6
for st in 1 3; do
  echo "=== smol --mma off --stages $st all arms"
  timeout 60 $N --backend cuda --model /tmp/ab/smol.gguf --mma off --stages $st --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q > /tmp/g.txt 2>&1
  echo "exit $?"; tail -6 /tmp/g.txt
done
echo "=== soak x5 smol pipelined --stages 2"
timeout 100 $N soak --runs 5 --out /tmp/soak --backend cuda --model /tmp/ab/smol.gguf --stages 2 --arms pipelined --prompt-len 8 --gen-len 48 > /tmp/s.txt 2>&1
echo "exit $?"; tail -3 /tmp/s.txt
} > $OUT/gates.txt 2>&1
echo "gates at $(( $(date +%s) - T0 ))s"
{
while ! grep -q BUILD-RC /tmp/lc.log && [ $(( $(date +%s) - T0 )) -lt 520 ]; do sleep 5; done
grep BUILD-RC /tmp/lc.log || { echo "llama.cpp build not done at $(( $(date +%s) - T0 ))s"; tail -3 /tmp/lc.log; }
LB=$HOME/lc/llama.cpp/build/bin/llama-bench
if [ -x $LB ]; then
  for r in 1 2; do
    $LB -m /tmp/ab/smol.gguf -ngl 99 -p 0 -n 128 -r 5 2>&1 | grep -E "tg128|error" | sed "s/^/llama.cpp: /"
    for b in O N; do eval bb=\$$b; $bb bench --backend cuda --model /tmp/ab/smol.gguf --steps 128 2>&1 | grep -E "eager +\(" | sed "s/^/$b: /"; done
  done
fi
} > $OUT/vs-llamacpp.txt 2>&1
cat $OUT/same.txt; grep -v floor $OUT/speed.txt; cat $OUT/gates.txt; grep -E "walk|eager  " $OUT/prof.txt | head -20; cat $OUT/vs-llamacpp.txt
