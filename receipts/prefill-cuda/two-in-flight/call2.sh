#!/usr/bin/env bash
# Issue 30 step 51, call 2, on one H100 or H200 (asked as `nvidia-h200`; the 2026-12-07 run
# got the warm H100 of call 1, which such a call keeps): BENCH.md's whole synthetic table
# beside llama.cpp with T (cdb6db0 + step51.patch: the engine main landed, whose later commits
# change comments only), every row in ONE call, llama.cpp built from the anchors tarball in the
# same call (call2/: vs-llamacpp.json, summary.txt, log.txt). The two real files are not
# carried; their shape twins stand in (scripts/shapes.sh smol and gemq4km). Proves where each
# of issue 30's bars stands after steps 45 to 51, on the card it ran on.
#   OUT=DIR bash receipts/prefill-cuda/two-in-flight/call2.sh    [.stage carried; BIN=another build]
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m" \
  PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k" SERVE_ROWS= RECEIPTS= DEADLINE_S=570 \
  scripts/bench-vs-llamacpp.sh "${BIN:-.stage/bin/T}" .stage/llama.cpp.tgz "$OUT/vs" > "$OUT/bench.out" 2>&1
echo "bench exit $?"; rm -f "$OUT/vs/raw.tar.gz"; cat "$OUT/vs/summary.txt"; tail -3 "$OUT/bench.out"
