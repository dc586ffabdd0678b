#!/usr/bin/env bash
# Issue 30 step 26, call 1: where the one-row Q4_K decode's compute goes, by ablation.
# Builds (.stage/bin): O = main 03be331; P = O with probe.patch (kernels/mma.cu PPN_PROBE,
# passed by NVRTC -D from the env; wrong bits, timing only); C, L, D, A = P with PPN_PROBE=1
# (the decode's one chain of 32 dependent mma a super-block split into 4 chains of 8), 2 (no
# lo mma: half the tensor work), 4 (no dequant: A = the raw nibble words), 7 (all three).
# Proves: eager tok/s of each (speed.txt), per-op times of O and A (prof.txt).
set -u
nvidia-smi -L
SAME="" SPEED="l8q4k l32" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O C=.stage/bin/C L=.stage/bin/L D=.stage/bin/D A=.stage/bin/A
grep -v floor $OUT/speed.txt | grep eager; grep -E 'prof stage' $OUT/prof.txt | head -40
