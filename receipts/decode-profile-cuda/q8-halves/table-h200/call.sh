#!/usr/bin/env bash
# Issue 30's whole table on one H200 (`nvidia-h200`, 2026-12-06) for step 43's build N (main
# afb47ed plus the Q8_0 halves layout, the tree this folder lands with), in calls back to back
# on one warm machine after ../call2.sh, which built llama.cpp from the anchors tarball there
# (/root/lc). Proves: each row's eager, B=8 and prefill512 beside llama.cpp on the same file in
# the same call (summary.txt, vs-llamacpp.json, log.txt in each folder), the figures of
# BENCH.md's current table. The calls, as run (OUT the call's $OUT):
#  1. the default synthetic rows (this folder):
#     LLAMA_BIN=/root/lc/llama.cpp/build/bin SERVE_ROWS= RECEIPTS= DEADLINE_S=540 \
#       scripts/bench-vs-llamacpp.sh .stage/bin/N none $OUT/t
#  2. the narrow twins and the deep 70B row (narrow-deep/):
#     LLAMA_BIN=... SERVE_ROWS= RECEIPTS= ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m
#       llama70b-l21-q4_k" PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m" DEADLINE_S=500 \
#       scripts/bench-vs-llamacpp.sh .stage/bin/N none $OUT/t2
#  3. the real files (real/): carried as eight chunks of one stream, as
#     ../../../faults-cuda/forced-holds/committed/battery.sh start / chunk .stage/q0..q5 say
#     (seven calls of under a second), then one call: q6 moved in, the files reassembled into
#     models/, sha256 checked (real/sha256.txt: scripts/fetch-models.sh's sums), then
#     ROWS="smollm2-q4_1 gemma3-270m-q4_k_m" PREFILL_ROWS=(the same) ROUNDS=2 with N
#     (real.tgz: real-N/), and the Gemma-3 file's eager and B=8 with O = main afb47ed's build,
#     ROUNDS=2 (real-O/: the step's effect on its Q8_0 head);
#  4. ../oracle/: SECTIONS=oracle scripts/gpu-validate.sh .stage/bin/N with the real files in
#     place: CPU against CUDA per format (Q8_0 1.4e-6) and on both real files, the committed
#     HF tapes, prime/verify and fingerprint gates; overall ok.
echo "a record of the commands above; run each as its own call" >&2
exit 2
