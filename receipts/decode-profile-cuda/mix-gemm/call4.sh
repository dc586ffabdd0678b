#!/usr/bin/env bash
# Issue 30 step 33, call 4 (the same session): why the integer GEMM's register bound moved
# nothing (call 1: prefill512 22.4-22.6k tok/s for O, G1, G2 and M alike). Nsight Compute on
# one layer's four mma_gemm launches of a 512-row chunk of the 8B l8 Q4_K slice, for G1 (256
# threads, 241 registers, no spill, 8 warps an SM) and M (main's GEMM: 512 threads, 128
# registers, 104 bytes spilled); with DETAIL=1 the memory tables and stall reasons of G1's
# gate|up launch. ncu-G1.txt, ncu-M.txt, ncu-detail.txt, ncu-stalls.txt.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/mix-gemm/call4.sh, .stage carried.
set -u
nvidia-smi -L
DETAIL=1 OUT=$OUT timeout 380 scripts/prefill-ncu.sh G1=.stage/bin/G1 M=.stage/bin/M 2>&1 | tail -60
