#!/usr/bin/env bash
# Issue 30 steps 30 and 31, call 5: Nsight Compute on the prefill GEMM, N6 (33efeab's build,
# the integer route) against O (6378f70's, the f16 route): four mma_gemm launches each (one
# layer's q|k|v, o, gate|up, down) in a prime chunk of 512 rows on the 8B l8 Q4_K slice
# (scripts/prefill-ncu.sh). Proves, in ncu-gemm-N6.txt and ncu-gemm-O.txt, what the GEMM's
# -10 % (call 2's prefill.txt) comes from: durations at ncu's base clocks, instructions,
# issue, L1/TEX throughput and the local-memory spill requests of each launch.
set -u
OUT=$OUT timeout 330 scripts/prefill-ncu.sh N6=.stage/bin/N6 O=.stage/bin/O 2>&1 | tail -60
