#!/usr/bin/env bash
# Issue 30, the multi-row attention pass's output loop, call 2 on one GPU: the same bits and
# the prefill speed of the change against main.
#   O = main 98c7633 (.stage/bin/M), N = O + attention_rows' output loop (p values four at a
#   time from one score origin, V addresses stepped; .stage/bin/A).
# Proves:
#  - same.txt: every arm and serve at N = 2 (chunk 64, B = 8) on the SmolLM2, Gemma-3 (Q5_0
#    and Q4_K_M mix), Qwen3-0.6B and Qwen2-0.5B shapes, and the prime arm at chunks of 512
#    and 37 on those with the 8B Q4_K slice: `diff` same against O (scripts/decode-ab.sh);
#  - prefill.txt: prefill512 tok/s, builds alternating, three rounds;
#  - ncu-O.txt / ncu-N.txt: one SmolLM2-shape attention_rows launch (layer 3 of a 512-row
#    chunk), clocks as they run: duration, instructions, issue slots;
#  - soak.txt: the prime arm at N = 2 with 50 us of jitter on the SmolLM2 shape, chunks of
#    100, x5.
set -u
OUT=${OUT:?}
B=.stage/bin
SAME="smol:off gem:off gemq4km:off q3:off qw05:off" SPEED= ROUNDS=3 \
  PREFILL="smol gem gemq4km q3 l8q4k" OUT=$OUT timeout 420 scripts/decode-ab.sh O=$B/M N=$B/A
SHAPE=smol KERNELS="attention_rows" COUNT=1 SKIP=2 CLOCKS=none \
  OUT=$OUT timeout 90 scripts/prefill-ncu.sh O=$B/M N=$B/A > $OUT/ncu-summary.txt 2>&1
cat $OUT/ncu-summary.txt
timeout 60 $B/A soak --runs 5 --backend cuda --model /tmp/ab/smol.gguf --stages 2 --arms prime \
  --chunk 100 --prompt-len 300 --jitter-us 50 --out /tmp/soak > $OUT/soak.txt 2>&1; echo "soak exit $?" >> $OUT/soak.txt
tail -3 $OUT/soak.txt
cat $OUT/same.txt; grep -E "prefill|tok/s" $OUT/prefill.txt | head -40
