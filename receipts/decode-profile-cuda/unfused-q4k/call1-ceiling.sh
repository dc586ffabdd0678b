#!/usr/bin/env bash
# Issue 30 step 23, call 1: how much of a one-row token is the activations' prep? Builds
# (.stage/bin): O = c50069c; probe = O with probe.patch (PPN_PROBE_UNFUSE / PPN_PROBE_NOPREP,
# masks of prof_op: 1 gate|up, 2 +residual, 4 q|k|v, 8 head, 16 store); U, NPq, NPg, NPr, NP =
# two-line wrappers running probe with PPN_PROBE_UNFUSE=31, PPN_PROBE_NOPREP=4, 1, 2, 31.
# U: every one-row mma launch as mma_prep then the unfused decode (the same bits). NP*: the
# unfused decode with no mma_prep at all (stale activations: wrong bits, timing only; the
# ceiling of a prep that cost nothing). Proves: eager tok/s of each (call1-speed.txt), per-op
# times of O and NP (call1-prof.txt).
set -u
nvidia-smi -L
SAME="" SPEED="l8q4k l32" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O U=.stage/bin/U NPq=.stage/bin/NPq NPg=.stage/bin/NPg NPr=.stage/bin/NPr NP=.stage/bin/NP
grep -v floor $OUT/speed.txt | grep eager; grep -E 'prof stage' $OUT/prof.txt
