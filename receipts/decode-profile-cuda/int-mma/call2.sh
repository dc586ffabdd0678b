#!/usr/bin/env bash
# Issue 30 step 30, call 2: the integer Q4_K path's speed against the f16 route, builds
# alternating in one call (O: main's build at 6378f70; N: the step's tree). Proves:
# same.txt (the f16 formats' bits unchanged: the Q8_0 slice under --mma on, every arm and
# serve at N = 2, `diff` same; the 8B l8 Q4_K slice's listed as it differs, the new ORDER);
# speed.txt
# (eager and B=8 on the 8B l8 Q4_K slice and the full-depth Q4_K_M file, two rounds);
# prefill.txt (prefill512 on the 8B l8 slice; the chunk bits are N's own, gated in call 1);
# prof.txt (per op, O and N).
set -u
nvidia-smi -L
SAME="l2q8:on l8q4k:auto" SPEED="l8q4k l32" ROUNDS=2 PROF=1 PREFILL=l8q4k OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N
