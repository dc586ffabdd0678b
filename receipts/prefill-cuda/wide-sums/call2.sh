#!/usr/bin/env bash
# Issue 30 steps 53 and 54, call 2, on the H200 call 1 left warm (run as this one command line):
# Nsight Compute's warp-stall reasons of M's gate|up launch (the baseline beside call 1's
# ncu-stalls-E.txt: where E's extra cycles went), then prefill512 of M and D alternating, two
# more rounds (D's +0.5 % seen again).
#   OUT=DIR bash receipts/prefill-cuda/wide-sums/call2.sh     [after call1.sh: /tmp/ab/l8q4k.gguf]
set -u
. scripts/ncu-stalls.sh
M8=/tmp/ab/l8q4k.gguf
timeout 120 /usr/local/cuda/bin/ncu $(ncu_stall_metrics gpu__time_duration.sum) --section WarpStateStats \
  --section SourceCounters -k regex:mma_gemm_wg --launch-skip 10 --launch-count 1 .stage/bin/M bench \
  --backend cuda --model $M8 --graphs off --arms prime --chunk 512 --prompt-len 512 > $OUT/ncu-stalls-M.txt 2>&1
echo "ncu $?"
for r in 1 2; do
  for n in M D; do
    timeout 30 .stage/bin/$n bench --backend cuda --model $M8 --arms prime --chunk 512 --prompt-len 512 2>&1 |
      grep -E 'prefill +\(' | sed "s/^/round $r $n: /"
  done
done | tee $OUT/prefill-more.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
