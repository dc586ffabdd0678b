#!/usr/bin/env bash
# Issue 30 step 59, call 1 on one H100 or H200 (run 2026-12-07 on one H100): what fewer of
# THE ORDER's digit pieces would buy the 512-row prefill, timing only (build.sh: H = main,
# P2 = two pieces, P1 = one). Proves:
#  - the probes really change the arithmetic: scripts/decode-ab.sh's prime-arm receipts at
#    chunks 512 and 37 differ from H's (same.txt), and P2's own gate FAILs at step 0
#    (gate-P2.txt), so no figure here is of a build that could land;
#  - prefill512 of H, P2, P1 alternating, three rounds (prefill.txt);
#  - PPN_CUDA_PROF's microseconds a wgmma launch, per op (prof.txt);
#  - chunks 64 and 37 (chunks.txt, scripts/prefill-chunks.sh).
# About 160 s; one tarball, $OUT/p4.tgz (call1/ here).
#   OUT=DIR bash receipts/prefill-cuda/fewer-pieces/call1.sh     (.stage carried)
set -u
O=/tmp/p4; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $O/gpu.txt
SAME= SPEED= PREFILL="l8q4k" ROUNDS=3 OUT=$O timeout 300 scripts/decode-ab.sh H=.stage/bin/H P2=.stage/bin/P2 P1=.stage/bin/P1 > $O/ab.out 2>&1
for n in H P2 P1; do
  PPN_CUDA_PROF=1 timeout 40 .stage/bin/$n bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime --chunk 512 \
    --prompt-len 512 2>&1 | grep -E 'stage 0: mma (gemm|prep)|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"
done > $O/prof.txt
scripts/prefill-chunks.sh H P2 P1 > $O/chunks.txt 2>&1
timeout 60 .stage/bin/P2 --backend cuda --model /tmp/ab/l8q4k.gguf --mma on --arms prime --chunk 512 --prompt-len 600 --gen-len 8 > $O/gate-P2.txt 2>&1; echo "exit $?" >> $O/gate-P2.txt
tar czf $OUT/p4.tgz -C /tmp p4
cat $O/same.txt $O/prefill.txt $O/prof.txt $O/chunks.txt; tail -4 $O/gate-P2.txt
