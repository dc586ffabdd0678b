#!/usr/bin/env bash
# Issue 30, step 18, call 2 (one H200): the dense head walk (mvq_d8) with its rows found once
# a group, against 54ada91 (M): N2 two items in flight (as M), N5 N2 with one x swizzle a
# run (not a group). Proves, in order:
#  (a) the same bits: every arm and serve at N = 2 (prime at chunks of 64) on both gemma3
#      files (ab/same.txt);
#  (b) eager and B=8, builds alternating twice (ab/speed.txt);
#  (c) Nsight Compute on one head launch (mvq_d8) of each build on gemq4km (ncu.txt);
#  (d) the faster of N2 and N5 (both gemma3 files' eager, summed: winner.txt) beside
#      llama.cpp, built in this call from the anchors tarball, on the Gemma-3 270M Q4_K_M mix
#      twin and the SmolLM2 shape (bench/);
#  (e) every arm PASS with it at N = 1 and 3 on gem and gemq4km with prompts, chunks and
#      seeds no other check uses (gates.txt); soak x20 of gem at N = 2 on one GPU, pipelined
#      and eager with --jitter-us 20 (soak.txt).
# Run: OUT=DIR bash receipts/decode-profile-cuda/vocab-head/call2.sh  (.stage carried: the
# builds in bin/, llama.cpp.tgz)
set -u
OUT=${OUT:?}
B=.stage/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
OUT=$OUT/ab SAME="gemq4km:auto gem:auto" SPEED="gemq4km gem" ROUNDS=2 \
  scripts/decode-ab.sh M=$B/ppn-gate-m N2=$B/ppn-gate-n2 N5=$B/ppn-gate-n5 > /dev/null 2>&1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
X="--section SpeedOfLight --section Occupancy --metrics dram__bytes_read.sum,smsp__inst_executed.sum"
for n in m n2 n5; do
  RUN="bench --backend cuda --model /tmp/ab/gemq4km.gguf --graphs off --arms eager --steps 8"
  timeout 60 $NCU $X -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-$n $RUN 2>&1 \
    | grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|dram__bytes_read|smsp__inst_executed.sum" | sed "s/^/gemq4km $n /"
done > "$OUT/ncu.txt"
W=$(awk '/eager/ && $2 ~ /^N[25]:$/ {s[$2]+=$(NF-3)} END {b="N2:"; for (k in s) if (s[k] > s[b]) b=k; sub(":","",b); print tolower(b)}' "$OUT/ab/speed.txt")
echo "faster: $W" > "$OUT/winner.txt"
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log \
  DEADLINE_S=200 scripts/bench-vs-llamacpp.sh $B/ppn-gate-$W .stage/llama.cpp.tgz "$OUT/bench" > "$OUT/bench.out" 2>&1
echo "bench exit $?" >> "$OUT/winner.txt"; rm -f "$OUT/bench/raw.tar.gz"
: > "$OUT/gates.txt"
for m in gem gemq4km; do
  for g in "--stages 1 --prompt-len 257 --chunk 64 --gen-len 12 --seed 3" \
           "--stages 3 --prompt-len 61 --chunk 29,7 --gen-len 17 --seed 91"; do
    $B/ppn-gate-$W --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q > /tmp/ab/g.txt 2>&1
    echo "$W $m $g: exit $? $(grep -c PASS /tmp/ab/g.txt) PASS lines, $(grep -c FAIL /tmp/ab/g.txt) FAIL" >> "$OUT/gates.txt"
  done
done
timeout 60 $B/ppn-gate-$W soak --runs 20 --backend cuda --model /tmp/ab/gem.gguf --stages 2 --arms pipelined,eager \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/soak > "$OUT/soak.txt" 2>&1; echo "soak exit $?" >> "$OUT/soak.txt"
