#!/usr/bin/env bash
# Issue 30 steps 30 and 31, call 3: N6 (the tree of both steps, 33efeab) beside llama.cpp built
# from the anchors tarball in the same call, on the two 8B rows they change. Proves: vs/
# (summary, JSON).
set -u
nvidia-smi -L
ROWS="llama8b-l8-q4_k llama8b-l32-q4_k_m" PREFILL_ROWS=llama8b-l8-q4_k SERVE_ROWS= RECEIPTS= scripts/bench-vs-llamacpp.sh .stage/bin/N6 .stage/llama.cpp.tgz $OUT/vs 2>&1 | tail -14
rm -f $OUT/vs/raw.tar.gz
