#!/usr/bin/env bash
# Issue 30 step 32, call 2 (right after call 1, the same session): the whole table beside
# llama.cpp with M (the mixed Q4_K|Q6_K decode; its bits `same` as main's in call 1), every
# synthetic row of BENCH.md's table in ONE call, llama.cpp built from the anchors tarball in
# the same call: vs/vs-llamacpp.json, vs/summary.txt, vs/log.txt. The two real files are not
# carried; their shape twins stand in (scripts/shapes.sh smol and gemq4km). Proves where each
# of issue 30's bars stands after steps 30 to 32.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/mix-gemm/call2.sh, .stage carried.
set -u
nvidia-smi -L
ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m" \
  PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k" SERVE_ROWS= RECEIPTS= DEADLINE_S=570 \
  scripts/bench-vs-llamacpp.sh .stage/bin/M .stage/llama.cpp.tgz $OUT/vs > $OUT/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/vs/raw.tar.gz; cat $OUT/vs/summary.txt; tail -3 $OUT/bench.out
