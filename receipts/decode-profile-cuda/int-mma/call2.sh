#!/usr/bin/env bash
# Issue 30 step 30, call 2: the integer Q4_K path's speed against the f16 route, builds
# alternating in one call (O: main's build at 6378f70; N1: the integer route as first built,
# 0aa6c2f, three mma a sub-block on every launch; N: the step's tree, the one-row decode on one
# mma a sub-block). Proves:
# same.txt (the f16 formats' bits unchanged: the Q8_0 slice under --mma on, every arm and
# serve at N = 2, `diff` same against O; the 8B l8 Q4_K slice's listed as it differs, the new
# ORDER, N1's and N's lines alike since their S are the same integers);
# speed.txt (eager and B=8 on the 8B l8 Q4_K slice and the full-depth Q4_K_M file, two rounds);
# prefill.txt (prefill512 on the 8B l8 slice; the chunk bits are N's own, gated in call 1);
# prof.txt (per op, O and N). N1 is left out when .stage/bin/N1 is absent.
set -u
nvidia-smi -L
B="O=.stage/bin/O"
[ -x .stage/bin/N1 ] && B="$B N1=.stage/bin/N1"
SAME="l2q8:on l8q4k:auto" SPEED="l8q4k l32" ROUNDS=2 PROF=1 PREFILL=l8q4k OUT=$OUT scripts/decode-ab.sh $B N=.stage/bin/N
