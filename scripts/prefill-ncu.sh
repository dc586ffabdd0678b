#!/usr/bin/env bash
# Nsight Compute on the prefill GEMM (issue 30), in one call on the GPU machine:
#
#   OUT=DIR scripts/prefill-ncu.sh NAME=BIN [NAME=BIN ...]
#
# Synthesizes the 8B shape's 8-layer Q4_K slice with the first build, then for each build
# profiles four launches of mma_gemm (one layer's q|k|v, o, gate|up and down) in a
# `bench --arms prime --chunk 512 --prompt-len 512` run: Speed Of Light, memory, compute,
# occupancy, warp state and launch sections, plus L2/DRAM bytes, instructions and HMMA counts
# ($OUT/ncu-NAME.txt, and a summary on stdout). What it proves: what bounds the GEMM (DRAM,
# L2, L1, the issue slots or latency), and how a candidate build moves it. ncu locks the clocks
# at base (1.3-1.5 GHz): read its percentages and counts, not its durations
# (receipts/prefill-cuda/gemm-steps/ncu-gemm.txt is one such summary).
# SHAPE=NAME (scripts/shapes.sh; default l8q4k) profiles that file instead, and KERNELS=REGEX
# (default mma_gemm) with COUNT=N (default 4) launches after SKIP=N (default 8) other kernels
# than the GEMM: e.g. SHAPE=smol KERNELS="mma_gemm|mma_prep|attention" COUNT=10 SKIP=20, one
# SmolLM2 layer's ten prefill launches (prep and GEMM of q|k|v, the store pass, attention_rows,
# then prep and GEMM of o, gate|up and down) after two layers'. CLOCKS=none: the clocks as
# they run (durations then compare with a bench's wall time).
# DETAIL=1: also, for the first build's gate|up launch (the third of the four), the
# breakdowns behind the L1 and compute percentages (--print-details all, the memory tables:
# requests, wavefronts and sectors by access kind) into $OUT/ncu-detail.txt, and the warp
# stall reasons (issued-instruction latency by reason, as scripts/decode-ncu.sh) into
# $OUT/ncu-stalls.txt.
set -u
OUT=${OUT:?OUT: where the results go}
[ $# -ge 1 ] || { echo "usage: OUT=DIR $0 NAME=BIN [...]" >&2; exit 2; }
for nb in "$@"; do
  [ -x "${nb#*=}" ] || { echo "prefill-ncu: ${nb%%=*}: ${nb#*=} is not an executable" >&2; exit 2; }
done
mkdir -p /tmp/prefill-ncu "$OUT"
B0=${1#*=}
. "$(dirname "$0")"/shapes.sh
SHAPE=${SHAPE:-l8q4k}
[ -n "${SHAPES[$SHAPE]:-}" ] || { echo "prefill-ncu: unknown shape $SHAPE" >&2; exit 2; }
KERNELS=${KERNELS:-mma_gemm} COUNT=${COUNT:-4} SKIP=${SKIP:-8}
M=/tmp/prefill-ncu/$SHAPE.gguf
[ -f $M ] || $B0 synth ${SHAPES[$SHAPE]} -o $M > /dev/null || exit 1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis"
X="--metrics lts__t_bytes.sum,dram__bytes_read.sum,l1tex__t_bytes.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_hmma.sum"
RUN="bench --backend cuda --model $M --graphs off --arms prime --chunk 512 --prompt-len 512"  # a 512-row chunk
for nb in "$@"; do
  n=${nb%%=*} b=${nb#*=}
  timeout 200 $NCU ${CLOCKS:+--clock-control $CLOCKS} $S $X -k regex:"$KERNELS" --launch-skip $SKIP --launch-count $COUNT \
    $b $RUN \
    > "$OUT"/ncu-$n.txt 2>&1; echo "$n exit $?"
  grep -E "^  (mma_|attention)|Duration|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Grid Size|Block Size|Dynamic Shared|lts__t_bytes|dram__bytes_read|hmma|smsp__inst_executed.sum" \
    "$OUT"/ncu-$n.txt | sed "s/^/$n /"
done
[ "${DETAIL:-0}" = 1 ] || exit 0
timeout 200 $NCU --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
  --print-details all -k regex:"mma_gemm" --launch-skip 10 --launch-count 1 \
  $B0 $RUN \
  > "$OUT"/ncu-detail.txt 2>&1; echo "detail exit $?"
. "$(dirname "$0")"/ncu-stalls.sh
T=$(ncu_stall_metrics gpu__time_duration.sum)
timeout 200 $NCU $T -k regex:"mma_gemm" --launch-skip 10 --launch-count 1 \
  $B0 $RUN \
  > "$OUT"/ncu-stalls.txt 2>&1; echo "stalls exit $?"
grep -E "stalled|duration" "$OUT"/ncu-stalls.txt
grep -E "l1tex|lsu|Wavefronts|Shared|Global Load|Local|Bank" "$OUT"/ncu-detail.txt | head -60
