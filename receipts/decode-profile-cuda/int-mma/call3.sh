#!/usr/bin/env bash
# Issue 30 step 30, call 3: N (the step's tree) beside llama.cpp built from the anchors
# tarball in the same call, on the two 8B rows it changes. Proves: vs/ (summary, JSON).
set -u
nvidia-smi -L
ROWS="llama8b-l8-q4_k llama8b-l32-q4_k_m" PREFILL_ROWS=llama8b-l8-q4_k SERVE_ROWS= RECEIPTS= scripts/bench-vs-llamacpp.sh .stage/bin/N .stage/llama.cpp.tgz $OUT/vs 2>&1 | tail -14
rm -f $OUT/vs/raw.tar.gz
