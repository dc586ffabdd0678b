#!/usr/bin/env bash
# Where the Q8_0 row's one-row layer goes (issue 30: its eager is 1.26-1.30x llama.cpp, bar
# 1.5x). One GPU, .stage/bin/C (main fda963b's build). `scripts/narrow-ncu.sh` on the 8B
# shape's 8-layer Q8_0 slice (l8q8): eager tok/s with graphs, then Nsight Compute with the
# clocks as they run on two layers' launches, each launch's own duration and DRAM bytes
# (warm and flushed caches), and the stall reasons of four mvq_w2 launches. What it proves:
# which launch of a layer is furthest from the bandwidth (bytes / duration against the copy),
# the target of the next step.
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OUT=$OUT/ncu SHAPE=l8q8 SKIP=172 STALL_K=mvq_w2 STALL_SKIP=70 timeout 180 scripts/narrow-ncu.sh .stage/bin/C 2>&1 | tee $OUT/ncu-summary.txt
tar czf $OUT/ncu.tgz -C $OUT ncu && rm -rf $OUT/ncu
