#!/usr/bin/env bash
# Issue 30 steps 53 and 54, call 1 on one H100 or H200 (README.md here): D and E against M,
# builds from build.sh. Proves, through ../folded-scales/call1.sh with BUILDS="M D E" G=E:
#  - the same bits as M at prime chunks 512 and 37 for D and E, and E's every arm and serve
#    at N = 2 (same.txt); prefill512 M, D, E alternating (prefill.txt); microseconds a launch
#    (prof.txt); E's gates at N = 1..8 with chunks 512 and 37, the planted fault, a soak
#    (gates.txt, soak.txt);
#  - chunked prefill at 64 and 37 rows, M, D, E alternating, two rounds (chunks.txt);
#  - every op's microseconds in E's 512-row prefill, attention and norms too (prof-all.txt);
#  - E's GEMM warp stalls by reason and source line, one gate|up launch (ncu-stalls-E.txt).
# Everything lands in one tarball, $OUT/d.tgz (the device returns at most 8 files), written
# again after each part, so a call cut off by its time limit keeps what finished.
#   OUT=DIR bash receipts/prefill-cuda/wide-sums/call1.sh     [DEADLINE=seconds, default 300]
set -u
R=${OUT:?}
O=/tmp/d; mkdir -p $O
B=.stage/bin
M8=/tmp/ab/l8q4k.gguf
DEADLINE=${DEADLINE:-300} BUILDS="M D E" G=E OUT=$O bash receipts/prefill-cuda/folded-scales/call1.sh > $O/call1.out 2>&1
rm -f "$O/speed.txt" "$O/llama-build-tail.txt"
keep() { tar czf "$R/d.tgz" -C $O .; }
keep
scripts/prefill-chunks.sh M D E > "$O/chunks.txt"
keep
PPN_CUDA_PROF=1 timeout 40 $B/E bench --backend cuda --model $M8 --arms prime --chunk 512 \
  --prompt-len 512 > "$O/prof-all.txt" 2>&1
keep
. scripts/ncu-stalls.sh
timeout 150 /usr/local/cuda/bin/ncu $(ncu_stall_metrics gpu__time_duration.sum) --section WarpStateStats \
  --section SourceCounters -k regex:mma_gemm_wg --launch-skip 10 --launch-count 1 $B/E bench --backend cuda \
  --model $M8 --graphs off --arms prime --chunk 512 --prompt-len 512 > "$O/ncu-stalls-E.txt" 2>&1
echo "ncu exit $?" >> $O/call1.out
keep
cat "$O/prefill.txt" "$O/same.txt" "$O/gates.txt" "$O/chunks.txt"; tail -3 "$O/soak.txt"; tail -2 $O/call1.out
