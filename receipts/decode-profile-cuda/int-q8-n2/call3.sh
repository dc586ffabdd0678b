#!/usr/bin/env bash
# Issue 30, call 3 (right after call 2 on the same warm H200, llama.cpp built there by call
# 2's background build): main's build O (a4e3c80) beside llama.cpp on the two narrow twins
# (scripts/shapes.sh smol and gemq4km: the SmolLM2 shape in Q4_1, the Gemma-3-270M shape in
# its real file's Q4_K_M mix), eager, B=8 and prefill512 against pp512: where the SmolLM2
# prefill bar (1.5x) stands on the H200 the bar names, after steps 35 to 37.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8-n2/call3.sh (.stage carried).
LLAMA_BIN=/root/lc/llama.cpp/build/bin SERVE_ROWS= RECEIPTS= ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m" PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m" DEADLINE_S=150 timeout 170 scripts/bench-vs-llamacpp.sh .stage/bin/O none $OUT/vs > $OUT/vs.log 2>&1; echo "exit $?"; rm -f $OUT/vs/raw.tar.gz; cat $OUT/vs/summary.txt
