#!/usr/bin/env bash
# Nsight Compute on the one-row decode kernels (issue 30, step 0), in one call:
#
#   OUT=DIR scripts/decode-ncu.sh BIN
#
# A 4-layer slice of the 8B shape (Q4_K) decoding one row: twelve launches of the FFMA path
# (--mma off: the vectorized matvec mvq_* and attention) and ten of the tensor-core decode
# (--mma auto), each with Speed Of Light, memory, occupancy, warp state and launch sections.
# What it proves: whether each kernel is bound by DRAM, by its SM pipes, or by neither
# (latency: too few bytes in flight). ncu locks the clocks at base (1.3-1.5 GHz): read its
# percentages, not its durations. Then each kernel's stall reasons (ncu-stalls-*.txt).
set -u
B=${1:?usage: OUT=DIR scripts/decode-ncu.sh BIN}
OUT=${OUT:?OUT: where the results go}
mkdir -p /tmp/p "$OUT"
$B synth --preset llama8b --layers 4 --quant q4_k -o /tmp/p/l4q4k.gguf > /dev/null
NCU=/usr/local/cuda/bin/ncu
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
# FFMA path: q|k|v, attention, o, gate|up, down of one layer (and the head), one row each.
$NCU $S -k regex:"mvq|attention" --launch-skip 40 --launch-count 12 \
  $B --backend cuda --model /tmp/p/l4q4k.gguf --mma off --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q \
  > "$OUT"/ncu-ffma.txt 2>&1; echo "ffma exit $?"
# Tensor-core decode (--mma auto on this width).
$NCU $S -k regex:"mma_decode|mma_prep|attention" --launch-skip 40 --launch-count 10 \
  $B --backend cuda --model /tmp/p/l4q4k.gguf --mma auto --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q \
  > "$OUT"/ncu-mma.txt 2>&1; echo "mma exit $?"
grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit Reg" "$OUT"/ncu-ffma.txt | head -80

# Stall reasons (issued-instruction latency by reason) of four launches each: the FFMA matvec
# and the tensor-core decode, with DRAM bytes and duration beside them.
. "$(dirname "$0")"/ncu-stalls.sh
M=$(ncu_stall_metrics gpu__time_duration.sum,dram__bytes_read.sum)
$NCU $M -k regex:"mvq_w2" --launch-skip 10 --launch-count 4 \
  $B --backend cuda --model /tmp/p/l4q4k.gguf --mma off --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q \
  > "$OUT"/ncu-stalls-ffma.txt 2>&1; echo "ffma stalls exit $?"
$NCU $M -k regex:"mma_decode_[fk]" --launch-skip 10 --launch-count 4 \
  $B --backend cuda --model /tmp/p/l4q4k.gguf --mma auto --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q \
  > "$OUT"/ncu-stalls-mma.txt 2>&1; echo "mma stalls exit $?"
