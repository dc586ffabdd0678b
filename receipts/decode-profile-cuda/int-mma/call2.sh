#!/usr/bin/env bash
# Issue 30 steps 30 and 31, call 2: the integer tensor-core routes' speed against the f16 route
# and the FFMA kernels, builds alternating in one call (O: main's build at 6378f70, the f16
# route, auto's Q6_K on FFMA; N: step 30, 76429e7, Q4_K on the integer route with its one-row
# decode on one mma a sub-block, auto's Q6_K still on FFMA; N6: step 31, 33efeab, Q6_K on the
# integer route too and under auto at 4096 wide). Proves:
# same.txt (the f16 formats' bits unchanged: the Q8_0 slice under --mma on, every arm and
# serve at N = 2, `diff` same against O; the 8B l8 Q4_K slice's listed as it differs, the new
# ORDER, N's and N6's lines alike: the same Q4_K bits);
# speed.txt (eager and B=8 on the 8B l8 Q4_K slice and the full-depth Q4_K_M file, two rounds:
# N6 against N on the full-depth file is step 31's Q6_K alone);
# prefill.txt (prefill512 on the 8B l8 slice; the chunk bits are N6's own, gated in call 1);
# prof.txt (per op, O and N6).
set -u
nvidia-smi -L
SAME="l2q8:on l8q4k:auto" SPEED="l8q4k l32" ROUNDS=2 PROF=1 PREFILL=l8q4k OUT=$OUT scripts/decode-ab.sh \
  O=.stage/bin/O N=.stage/bin/N N6=.stage/bin/N6
