#!/usr/bin/env bash
# Issue 30 step 34, PREPARED AND NOT YET RUN (no device machine was lent on 2026-12-05): the
# integer form's B fragments in 8-column tiles, whole sectors. Build N first, here:
#   git apply receipts/decode-profile-cuda/xf-tiles/untried.patch && cargo build --release
#   && strip -o .stage/bin/N target/release/ppn-gate; O = main's build, stripped the same.
# What this call proves, one H200, via scripts/decode-ab.sh (O = main, N = step 34: mma_prep's
# Q4_K/Q6_K words of a super-block per 8-column tile, chunk by chunk, the columns' h|m words
# then their l words, so a warp's B-fragment loads read 512 and 256 contiguous bytes; O
# gives each lane a 32-byte slot, 14 bytes of each sector used):
# same.txt: every arm and serve at N = 2 (B = 8, prime chunk 64) on the 8B l8 Q4_K slice
# (--mma auto) and a 4-layer Q4_K_M file (--mma auto and on: Q6_K v, the mixed launch), and
# the prime arm at chunks 512 and 37 on the 8B l8 Q4_K slice: `diff` same against O;
# speed.txt: eager and B=8 on the full-depth 8B Q4_K_M file, alternating, two rounds;
# prefill.txt: prefill512 on the 8B l8 Q4_K slice and Gemma-3's Q4_K_M shape, alternating,
# two rounds;
# soak.txt: N's soak x10 of every arm at N = 2 (auto) and N = 3 (on) on the 4-layer file, with
# 50 us of jitter.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/xf-tiles/call1.sh, .stage carried.
set -u
nvidia-smi -L
SAME="l8q4k:auto l4m:auto l4m:on" SPEED="l32" ROUNDS=2 PREFILL="l8q4k gemq4km" OUT=$OUT timeout 440 scripts/decode-ab.sh \
  O=.stage/bin/O N=.stage/bin/N
R=$OUT/soak.txt; : > $R
for nm in "2 auto 0,0" "3 on 0,0,0"; do set -- $nm
timeout 60 .stage/bin/N soak --runs 10 --backend cuda -q --mma $2 --model /tmp/ab/l4m.gguf --stages $1 --devices $3 --jitter-us 50 --arms eager,pipelined,batched,prime,verify --batch 8 --chunk 16 --prompt-len 40 --gen-len 24 --out /tmp/soak-$1 > /tmp/soak-$1.txt 2>&1
echo "soak x10 l4m N=$1 --mma $2 jitter 50: exit $? $(grep -E '^[0-9]+/10 ' /tmp/soak-$1.txt | tail -1)" >> $R; done
cat $R
