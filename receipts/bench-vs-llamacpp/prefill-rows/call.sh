#!/usr/bin/env bash
# Call 3: beside llama.cpp (built in this call) on the same files: the SmolLM2 and Gemma-3
# shapes (synthetic, the real files' shapes) and the 8B l8 Q4_K slice, eager, B=8, prefill512.
set -u
ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0 llama8b-l8-q4_k" PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q5_0 llama8b-l8-q4_k" \
  SERVE_ROWS= RECEIPTS= DEADLINE_S=490 scripts/bench-vs-llamacpp.sh .stage/bin/new3 .stage/llama.cpp.tgz $OUT > $OUT/run.txt 2>&1
echo "exit $?"; cat $OUT/summary.txt 2>/dev/null | tail -30
