#!/usr/bin/env bash
# Issue 30, step 19, call 3 (one H200): after call 1 (two or three units a lane at 2 blocks an
# SM: fewer instructions, lower occupancy, slower on the Q8_0 head), which of the two moves
# the head: D4 = one unit a lane at 4 blocks an SM (64 registers, 48-136 bytes spilled),
# U2B = two units a lane at 3 blocks (80 registers, 16-124 bytes spilled), against O (the
# kernels of units/tried.patch with MVD_UNITS 1 and launch bounds 4, or 2 and 3; the host's
# mvq_blocks_per_sm to match). Neither kept.
# Proves: (a) one head launch of each (Nsight Compute, graphs off: duration, DRAM, warp
# instructions, occupancy; ncu.txt) on gemq4km (Q8_0), gem (Q5_0) and smol (Q4_1);
# (b) the same bits (every arm and serve at N = 2) on gemq4km and gem (ab/same.txt);
# (c) eager and B=8, builds alternating twice (ab/speed.txt).
# Run: OUT=DIR bash receipts/decode-profile-cuda/head-units/occupancy/call3.sh
set -u
OUT=${OUT:?}
B=.stage/bin
mkdir -p /tmp/ab
. scripts/shapes.sh
for m in gemq4km gem smol; do [ -f /tmp/ab/$m.gguf ] || $B/ppn-gate-u2b synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done
wait
NCU=${NCU:-/usr/local/cuda/bin/ncu}
X="--section SpeedOfLight --section Occupancy --metrics dram__bytes_read.sum,smsp__inst_executed.sum"
for m in gemq4km gem smol; do
  for n in o d4 u2b; do
    RUN="bench --backend cuda --model /tmp/ab/$m.gguf --graphs off --arms eager --steps 8"
    timeout 60 $NCU $X -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-$n $RUN 2>&1 \
      | grep -E "Duration|DRAM Throughput|Achieved Occupancy|smsp__inst_executed.sum" | sed "s/^/$m $n /"
  done
done > "$OUT/ncu.txt"
grep -E "Duration|Occupancy" "$OUT/ncu.txt"
OUT=$OUT/ab SAME="gemq4km:auto gem:auto" SPEED="gemq4km gem smol" ROUNDS=2 \
  scripts/decode-ab.sh O=$B/ppn-gate-o D4=$B/ppn-gate-d4 U2B=$B/ppn-gate-u2b > /dev/null 2>&1
cat "$OUT/ab/same.txt"; grep -v floor "$OUT/ab/speed.txt" | grep eager
