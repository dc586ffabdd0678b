#!/usr/bin/env bash
# Issue 30, step 19, call 1 (one H200): the dense head walk (mvq_d8) with two (U2) or three
# (U3) units a lane an item, 2 blocks an SM, against the build before (O, dcd57f1's tree):
# units/tried.patch (U2; U3 the same with MVD_UNITS 3), and matvec.rs mvq_blocks_per_sm 2 for
# the dense walk. Neither kept.
# Proves, in order:
#  (a) what one head launch costs (Nsight Compute, graphs off): duration, DRAM, warp
#      instructions, registers, occupancy, on the Gemma-3 Q8_0 head (gemq4km), its Q5_0 twin
#      (gem) and the SmolLM2 shape's Q4_1 head (smol) (ncu.txt);
#  (b) the same bits: every arm and serve at N = 2 (prime at chunks of 64) on the three files
#      (ab/same.txt);
#  (c) eager and B=8, builds alternating twice (ab/speed.txt).
# It also starts llama.cpp's build (from the anchors tarball); the comparison ran in call 4.
# Run: OUT=DIR bash receipts/decode-profile-cuda/head-units/units/call1.sh  (.stage carried: the
# builds in bin/, llama.cpp.tgz)
set -u
OUT=${OUT:?}
B=.stage/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
mkdir -p /tmp/ab
. scripts/shapes.sh
for m in gemq4km gem smol; do $B/ppn-gate-u2 synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done
wait
NCU=${NCU:-/usr/local/cuda/bin/ncu}
X="--section SpeedOfLight --section Occupancy --metrics dram__bytes_read.sum,smsp__inst_executed.sum"
for m in gemq4km gem smol; do
  for n in o u2 u3; do
    RUN="bench --backend cuda --model /tmp/ab/$m.gguf --graphs off --arms eager --steps 8"
    timeout 60 $NCU $X -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-$n $RUN 2>&1 \
      | grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|dram__bytes_read|smsp__inst_executed.sum" | sed "s/^/$m $n /"
  done
done > "$OUT/ncu.txt"
grep -E "Duration|inst_executed" "$OUT/ncu.txt"
OUT=$OUT/ab SAME="gemq4km:auto gem:auto smol:auto" SPEED="gemq4km gem smol" ROUNDS=2 \
  scripts/decode-ab.sh O=$B/ppn-gate-o U2=$B/ppn-gate-u2 U3=$B/ppn-gate-u3 > /dev/null 2>&1
cat "$OUT/ab/same.txt"; grep -v floor "$OUT/ab/speed.txt" | grep eager
