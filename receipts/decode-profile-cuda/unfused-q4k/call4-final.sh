#!/usr/bin/env bash
# Issue 30 step 23, call 4: N2 (the landed rule: Q4_K never fused) against O. Proves: the
# same bits on the narrow Q4_K files the widened rule changes (call4-same.txt); N2 beside
# llama.cpp built in the same call on the two 8B rows (call4-vs-llamacpp.*, call4-log.txt).
set -u
SAME="q3k:on l1b:on" SPEED="" ROUNDS=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N2=.stage/bin/N2
cat $OUT/same.txt
ROWS="llama8b-l8-q4_k llama8b-l32-q4_k_m" PREFILL_ROWS= SERVE_ROWS= RECEIPTS= scripts/bench-vs-llamacpp.sh .stage/bin/N2 .stage/llama.cpp.tgz $OUT/vs 2>&1 | tail -12
rm -f $OUT/vs/raw.tar.gz
