#!/usr/bin/env bash
# Issue 30 step 34 (BENCH.md): the short form of a fuller call (bits, speeds, soaks) for a
# session with under 900 s of device time left (2026-12-05: ten failed starts had spent the
# rest). O = main, N = main + patch, both stripped into .stage/bin; one H100 or H200
# (compare only O against N from this one call). What it proves, via scripts/decode-ab.sh:
# same.txt: every arm and serve at N = 2 (B = 8, prime chunk 64) on a 4-layer Q4_K_M file
# under --mma on (Q4_K and Q6_K integer-form kernels, the mixed launch), and the prime arm at
# chunks 512 and 37 on the 8B l8 Q4_K slice and Gemma-3's Q4_K_M shape: `diff` same against O;
# prefill.txt: prefill512 on those two files, O and N alternating, two rounds;
# speed.txt: eager and B=8 on the full-depth 8B Q4_K_M file, alternating, two rounds.
# No soak: N would land only after one in a later call (it lost, so none ran).
# Run as OUT=$OUT bash receipts/decode-profile-cuda/xf-tiles/call2.sh, .stage/bin carried.
set -u
nvidia-smi -L
SAME="l4m:on" SPEED="l32" ROUNDS=2 PREFILL="l8q4k gemq4km" OUT=$OUT timeout 420 scripts/decode-ab.sh \
  O=.stage/bin/O N=.stage/bin/N
