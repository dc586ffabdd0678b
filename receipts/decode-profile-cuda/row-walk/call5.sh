#!/usr/bin/env bash
# Issue 30 step 29, call 5: what the integer tensor cores would buy the Q4_K decode
# (a probe: wrong bits, timing only). Builds (.stage/bin): O = b655698; P = O + imma.patch;
# I = P with PPN_IMMA (NVRTC -DPPN_IMMA: mma_q4k_sb, the Q4_K decode of every row count,
# runs per sub-block two IMMA m16n8k32 on u8 nibbles (one LOP3 a half word) and int8 pieces,
# then sc * (128 D_hi + D_lo) into an int32 per super-block; the GEMM is unchanged).
# Proves: eager and B=8 of O and I (speed.txt).
set -u
nvidia-smi -L
SAME="" SPEED="l8q4k l32" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O I=.stage/bin/I

