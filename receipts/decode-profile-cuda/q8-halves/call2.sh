#!/usr/bin/env bash
# One GPU, issue 30 step 43's second call: O = .stage/bin/O (main afb47ed), N = the halves
# layout's build. Proves:
#  - gemm/: scripts/ncu-sectors.sh on the prefill GEMM (its kernel filter, which the sweep of
#    call 1's second run lacked): how full the 8B slice's GEMM loads' sectors are;
#  - vs-O/, vs-N/: scripts/bench-vs-llamacpp.sh, O then N, beside llama.cpp built in this call
#    from the anchors tarball, on the Q8_0 row (llama8b-l8-q8_0) and the Gemma-3 Q4_K_M twin
#    (its Q8_0 head): eager (decode-only) and B=8 against tg128 and batched-bench, two rounds
#    each; what the step moves of the ratios on this card.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/q8-halves/call2.sh (.stage carried).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /root/lc
OUT=$OUT/gemm CASES="l8q4k:prime:8:mma_gemm" timeout 120 scripts/ncu-sectors.sh .stage/bin/N > /dev/null 2>&1
echo "gemm exit $?"; cat $OUT/gemm/sectors.txt
L="LLAMA_BIN=/root/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/root/lc.log SERVE_ROWS= RECEIPTS= PREFILL_ROWS= ROUNDS=2"
for b in O N; do
  env $L ROWS="llama8b-l8-q8_0 gemma3-shape-q4_k_m" DEADLINE_S=400 \
    timeout 420 scripts/bench-vs-llamacpp.sh .stage/bin/$b none $OUT/vs-$b > $OUT/vs-$b.log 2>&1
  echo "vs-$b exit $?"; rm -f $OUT/vs-$b/raw.tar.gz; cat $OUT/vs-$b/summary.txt
done
# At most 8 files come back: everything in one tarball, the summaries beside it.
cd $OUT && tar czf all.tgz gemm vs-O vs-N vs-O.log vs-N.log && cp vs-O/summary.txt summary-O.txt && \
  cp vs-N/summary.txt summary-N.txt && cp gemm/sectors.txt sectors-gemm.txt && rm -rf gemm vs-O vs-N vs-O.log vs-N.log
