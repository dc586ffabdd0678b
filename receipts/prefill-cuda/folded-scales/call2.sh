#!/usr/bin/env bash
# Issue 30 step 49 (BENCH.md), call 2, right after call 1 on the same warm machine (llama.cpp
# built in the background by call 1): scripts/bench-vs-llamacpp.sh for each build of BUILDS
# (default "Q M", call1.sh's builds) on the 8B l8 Q4_K slice and the Gemma-3 shape in its real
# file's Q4_K_M mix: eager, B=8 and prefill512 beside llama.cpp's tg128, B=8 and pp512 on the
# same files, in the same call ($n.txt: each run's log and table; $n/vs-llamacpp.json).
#   OUT=DIR bash receipts/prefill-cuda/folded-scales/call2.sh     [BUILDS="Q M"]
set -u
OUT=${OUT:?}
for n in ${BUILDS:-Q M}; do
  ROWS="llama8b-l8-q4_k gemma3-shape-q4_k_m" PREFILL_ROWS="llama8b-l8-q4_k gemma3-shape-q4_k_m" \
    SERVE_ROWS= RECEIPTS= LLAMA_BIN=/tmp/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/tmp/lc.log \
    DEADLINE_S=250 WORK=/tmp/bvl scripts/bench-vs-llamacpp.sh .stage/bin/$n .stage/llama.cpp.tgz $OUT/$n \
    > $OUT/$n.txt 2>&1
  tail -12 $OUT/$n.txt
done
