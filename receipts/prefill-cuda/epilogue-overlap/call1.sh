#!/usr/bin/env bash
# Issue 30 step 52 (README.md here), call 1 on one H100 or H200: A2 (the next super-block's
# first wgmma over this one's epilogue, 2 blocks an SM) against T (main 5ab904b), builds from
# build.sh, through ../folded-scales/call1.sh with BUILDS="T A2" G=A2: the same bits at prime
# chunks 512 and 37 (same.txt), prefill512 alternating (prefill.txt), microseconds a launch
# (prof.txt), then as the deadline allows A2's arms at N = 2, gates, the planted fault and a
# soak (gates.txt, soak.txt).
#   OUT=DIR bash receipts/prefill-cuda/epilogue-overlap/call1.sh     [DEADLINE=seconds, default 300]
set -u
OUT=${OUT:?}
DEADLINE=${DEADLINE:-300} BUILDS="T A2" G=A2 OUT=$OUT bash receipts/prefill-cuda/folded-scales/call1.sh > /dev/null 2>&1
rm -f "$OUT/speed.txt"
cat "$OUT/prefill.txt" "$OUT/same.txt" "$OUT/prof.txt" "$OUT/gates.txt" 2>/dev/null; tail -3 "$OUT/soak.txt" 2>/dev/null
