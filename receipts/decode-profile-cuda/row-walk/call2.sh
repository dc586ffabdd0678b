#!/usr/bin/env bash
# Issue 30 step 27, call 2: the one-row decode's activations staged in shared memory (one L2
# trip a super-block, not one every few k-steps of the mma chain), alone and with the walk.
# Builds (.stage/bin): O = b655698; W = O + probe.patch (walk and staging); S = W with PPN_STAGE1
# (NVRTC -DPPN_STAGE1: k8/k16 one-row launches read XF/XS/XE from a per-warp shared slot);
# SW1, SW2, SW4 = S with the walk for gate|up; + head (2 m-tiles); + q|k|v, o, head (1 m-tile).
# Proves: same bits (same.txt), eager and B=8 (speed.txt), per-op times of O and S (prof.txt).
set -u
nvidia-smi -L
SAME="l8q4k:auto l4m:on" SPEED="" OUT=$OUT/same scripts/decode-ab.sh O=.stage/bin/O S=.stage/bin/S SW4=.stage/bin/SW4
cat $OUT/same/same.txt
SAME="" SPEED="l8q4k l32" ROUNDS=2 PROF=1 OUT=$OUT/speed scripts/decode-ab.sh O=.stage/bin/O SW1=.stage/bin/SW1 SW2=.stage/bin/SW2 SW4=.stage/bin/SW4 S=.stage/bin/S
grep -v floor $OUT/speed/speed.txt | grep eager; grep -E 'prof stage' $OUT/speed/prof.txt | head -40
