#!/usr/bin/env bash
# Issue 30 step 38, call 1 of a session: two reads that a launch waited on at once, moved
# (N), against main's build (O): (a) the Q8_0 and Q6_K FFMA units keep their f16 scale raw
# and widen it where the item computes (widened at the load, it stalled the warp a memory
# latency on the NEXT item's scale before the current one computed); (b) a +residual
# launch reads its output's addend before the dot's reduction (kernels/matvec.cu
# mv_res_load), not after it. Proves the same bits (scripts/decode-ab.sh: every arm and serve
# at N = 2 `diff` same) on the Q8_0 files l2q8, qw05, q3, the Gemma-3 Q4_K_M mix (Q8_0 head,
# Q6_K matrices), l4m under --mma off (Q6_K FFMA at 4096) and auto (the integer decode's
# +residual), and the SmolLM2 shape (Q4_1 FFMA +residual). Also starts llama.cpp's build in
# the background (scripts/llamacpp-bg.sh) and keeps the real models' last chunk for the table
# call (shared DEVICE.md: chunks over back-to-back calls).
# Run as OUT=$OUT bash receipts/decode-profile-cuda/late-reads/call1.sh, carrying .stage/bin/O,
# .stage/bin/N, .stage/llama.cpp.tgz and .stage/parts/m.07.
set -u
nvidia-smi -L
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /root/lc
mkdir -p /root/parts && cp .stage/parts/m.* /root/parts/ && ls -l /root/parts
SAME="l2q8:auto qw05:auto q3:auto gemq4km:auto l4m:off l4m:auto smol:auto" SPEED= \
  timeout 540 scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N > $OUT/ab.log 2>&1
echo "decode-ab exit $?"
tail -2 /root/lc.log
cat $OUT/same.txt
