#!/usr/bin/env bash
# Issue 30, the multi-row attention pass's output loop, call 3 on one GPU: a second step
# (the rows' add chains interleaved on trips inside every row's range) against the first and
# main.
#   O = main 98c7633 (.stage/bin/M), A = O + p values four at a time and stepped V addresses
#   (call 2's N), B = A + four rows' chains interleaved (launch bound 2 blocks, 128
#   registers; ptxas: 108 bytes of spills).
# Proves:
#  - same.txt: every arm and serve at N = 2 on the SmolLM2, Gemma-3 and Qwen3-0.6B shapes,
#    and the prime arm at chunks of 512 and 37 on five files: A and B `diff` same against O;
#  - prefill.txt: prefill512 tok/s, builds alternating, two rounds;
#  - ncu-summary.txt: one SmolLM2-shape attention_rows launch of each build, clocks as they
#    run; b-sass.csv: B's per-instruction counts and stalls (Nsight Compute's source page;
#    committed as call3/b-mix.txt, scripts/ncu-source-mix.py's summary of it).
set -u
OUT=${OUT:?}
B=.stage/bin
SAME="smol:off gem:off q3:off" SPEED= ROUNDS=2 \
  PREFILL="smol gem gemq4km q3 l8q4k" OUT=$OUT timeout 400 scripts/decode-ab.sh O=$B/M A=$B/A B=$B/B
SHAPE=smol KERNELS="attention_rows" COUNT=1 SKIP=2 CLOCKS=none \
  OUT=$OUT/ncu timeout 100 scripts/prefill-ncu.sh O=$B/M A=$B/A B=$B/B > $OUT/ncu-summary.txt 2>&1
grep -E "Duration|smsp__inst|Issue Slots|Registers" $OUT/ncu-summary.txt
RUN="bench --backend cuda --model /tmp/ab/smol.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
timeout 90 /usr/local/cuda/bin/ncu --set full --import-source no -k regex:attention_rows --launch-skip 2 \
  --launch-count 1 -o /tmp/b -f $B/B $RUN > /tmp/b.log 2>&1; echo "ncu exit $?"
/usr/local/cuda/bin/ncu -i /tmp/b.ncu-rep --page source --csv --print-source sass > $OUT/b-sass.csv 2>&1
grep -v "agree on every" $OUT/same.txt; grep -c "agree on every" $OUT/same.txt
grep -E "prefill" $OUT/prefill.txt
