#!/usr/bin/env bash
# Issue 30 step 38, call 2 (right after call 1, the machine warm): the speeds of N against O
# (call1.sh says what N changes): eager and B=8 tok/s (scripts/decode-ab.sh, builds
# alternating, two rounds) on l8q8 (the table's Q8_0 row: FFMA, both changes), smol (the
# SmolLM2 shape: Q4_1 FFMA +residual launches, 60 a token), l8q4k (the integer decode's
# +residual) and gemq4km (Q8_0 head, Q6_K FFMA); then PPN_CUDA_PROF's per-op microseconds of
# O and N (PROF=1). Also keeps one more chunk of the real models.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/late-reads/call2.sh, carrying .stage/parts/m.00.
set -u
mkdir -p /root/parts && cp .stage/parts/m.* /root/parts/
SAME= SPEED="l8q8 smol l8q4k gemq4km" ROUNDS=2 PROF=1 \
  timeout 550 scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N > $OUT/ab.log 2>&1
echo "decode-ab exit $?"
tail -1 /root/lc.log
cat $OUT/speed.txt
