#!/usr/bin/env bash
# Issue 30: the Q8_0 row (B=8 under the batch rule) and the 8B l8 Q4_K prefill row beside
# llama.cpp built in the same call, on main 37f17f4.
set -u
ROWS="llama8b-l8-q8_0 llama8b-l8-q4_k" PREFILL_ROWS="llama8b-l8-q4_k" SERVE_ROWS= RECEIPTS= DEADLINE_S=540 \
  scripts/bench-vs-llamacpp.sh .stage/bin/o .stage/llama.cpp.tgz $OUT/bench > /tmp/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/bench/raw.tar.gz; tail -14 /tmp/bench.out
