#!/usr/bin/env bash
# Issue 30, step 19, call 4 (one H200): the candidate D4B (d4b/tried.patch, not kept), the dense
# head walk (mvq_d8) at 4 blocks an SM, its grid giving every warp the same number of groups,
# against O (dcd57f1's tree). Proves, in order:
#  (a) one head launch of each (Nsight Compute, graphs off; ncu.txt) on gemq4km (Q8_0 head),
#      gem (Q5_0) and smol (Q4_1, whose head call 3's D4 made slower);
#  (b) the same bits: every arm and serve at N = 2 on the three files (ab/same.txt);
#  (c) eager and B=8, builds alternating twice (ab/speed.txt);
#  (d) every arm PASS with D4B at N = 1 and 3 on gem, gemq4km and smol, prompts, chunks and
#      seeds no other check uses; soak x20 of gemq4km at N = 2 on one GPU, pipelined and
#      eager, --jitter-us 20 (gates.txt);
#  (e) D4B beside llama.cpp (built in this call from the anchors tarball) on the Gemma-3 270M
#      Q4_K_M mix twin and the SmolLM2 shape, eager and B=8 (bench/).
# Run: OUT=DIR bash receipts/decode-profile-cuda/head-units/d4b/call4.sh
set -u
OUT=${OUT:?}
B=.stage/bin
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
T0=$(date +%s)
mkdir -p /tmp/ab "$OUT/bench"
. scripts/shapes.sh
for m in gemq4km gem smol; do $B/ppn-gate-d4b synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done
wait
NCU=${NCU:-/usr/local/cuda/bin/ncu}
X="--section SpeedOfLight --section Occupancy --section LaunchStats --metrics dram__bytes_read.sum,smsp__inst_executed.sum"
for m in gemq4km gem smol; do
  for n in o d4b; do
    RUN="bench --backend cuda --model /tmp/ab/$m.gguf --graphs off --arms eager --steps 8"
    timeout 60 $NCU $X -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-$n $RUN 2>&1 \
      | grep -E "Duration|DRAM Throughput|Achieved Occupancy|Grid Size|smsp__inst_executed.sum" | sed "s/^/$m $n /"
  done
done > /tmp/ab/ncu.txt
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat /tmp/ab/ncu.txt; } > "$OUT/ncu.txt"
grep -E "Duration|Grid" "$OUT/ncu.txt"
OUT=$OUT/ab SAME="gemq4km:auto gem:auto smol:auto" SPEED="gemq4km gem smol" ROUNDS=2 \
  scripts/decode-ab.sh O=$B/ppn-gate-o D4B=$B/ppn-gate-d4b > /dev/null 2>&1
rm -f "$OUT/ab/prefill.txt"; cat "$OUT/ab/same.txt"; grep -v floor "$OUT/ab/speed.txt"
: > "$OUT/gates.txt"
for m in gem gemq4km smol; do
  for g in "--stages 1 --prompt-len 203 --chunk 64 --gen-len 13 --seed 17" \
           "--stages 3 --prompt-len 45 --chunk 19,6 --gen-len 21 --seed 58"; do
    $B/ppn-gate-d4b --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q > /tmp/ab/g.txt 2>&1
    echo "d4b $m $g: exit $? $(grep -c PASS /tmp/ab/g.txt) PASS lines, $(grep -c FAIL /tmp/ab/g.txt) FAIL" >> "$OUT/gates.txt"
  done
done
timeout 90 $B/ppn-gate-d4b soak --runs 20 --backend cuda --model /tmp/ab/gemq4km.gguf --stages 2 --arms pipelined,eager \
  --prompt-len 40 --gen-len 24 --jitter-us 20 --out /tmp/soak > /tmp/ab/soak.txt 2>&1
echo "soak exit $?: $(tail -2 /tmp/ab/soak.txt | tr '\n' ' ')" >> "$OUT/gates.txt"
cat "$OUT/gates.txt"
ROWS="gemma3-shape-q4_k_m smollm2-shape-q4_1" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lcb.log DEADLINE_S=$((580 - ($(date +%s) - T0))) \
  scripts/bench-vs-llamacpp.sh $B/ppn-gate-d4b .stage/llama.cpp.tgz "$OUT/bench" > /tmp/ab/bench.out 2>&1
echo "bench exit $?"; tail -5 /tmp/ab/bench.out; rm -f "$OUT/bench/raw.tar.gz"; ls "$OUT/bench"; cat "$OUT/bench/summary.txt"
