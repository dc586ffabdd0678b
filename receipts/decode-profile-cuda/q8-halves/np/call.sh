#!/usr/bin/env bash
# One GPU: the NP probe step 42 built and never ran, on step 43's tree. Timing only, wrong
# bits (probe-np.patch, never landed): NP = the one-row staged launches skip their prologue
# (no norm, no x tile: the walk reads the global row at the tile's swizzled slots); N = step
# 43's build. Nsight Compute with the clocks as they run, warm caches, on two l8q8 layers'
# launches, through ../../q8-narrow/call4.sh. What it proves: how much of each one-row Q8_0
# launch's time its prologue is (N - NP).
# As run (one H100, 2026-12-06), two calls on one warm machine:
#  1. through a gate (call4.sh's default): NP refused at step 0 (without the norm the
#     activations overflow: non-finite logits, exit 2, first-np-gate.txt); N's files not kept;
#  2. through bench (RUN=bench, no verdict): bench-durations-N.txt, bench-durations-NP.txt.
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SYN=.stage/bin/N BUILDS="N NP" RUN=${RUN:-bench} bash receipts/decode-profile-cuda/q8-narrow/call4.sh
