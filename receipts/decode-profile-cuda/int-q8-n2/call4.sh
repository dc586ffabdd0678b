#!/usr/bin/env bash
# Issue 30, call 4 (right after call 3, the same warm H200): O (main a4e3c80, Q8_0 decode on
# FFMA) beside llama.cpp on the table's Q8_0 row, a minute after call 2's N2 row: the two
# builds' eager ratios from one machine and one llama.cpp build.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8-n2/call4.sh (.stage carried).
LLAMA_BIN=/root/lc/llama.cpp/build/bin SERVE_ROWS= RECEIPTS= ROWS="llama8b-l8-q8_0" PREFILL_ROWS= DEADLINE_S=100 timeout 110 scripts/bench-vs-llamacpp.sh .stage/bin/O none $OUT/vs > $OUT/vs.log 2>&1; echo "exit $?"; rm -f $OUT/vs/raw.tar.gz; cat $OUT/vs/summary.txt
