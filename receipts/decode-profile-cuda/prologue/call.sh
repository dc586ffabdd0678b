#!/usr/bin/env bash
# The call of BENCH.md step 10 (tried.patch applied on 6a83e73 as N, d53919d built as O): the one-row prologue with one barrier fewer and the run sums from registers
# (kernels/mvq.cu mvq_stage_fast) against the build before: bits and speeds.
cd "$(dirname "$0")/../.."
export OUT
SAME="smol:off qw05:off smol:auto" SPEED="smol qw05" ROUNDS=2 \
  timeout 280 scripts/decode-ab.sh O=$(pwd)/.stage/bin/ppn-gate-old N=$(pwd)/.stage/bin/ppn-gate > $OUT/ab.log 2>&1
echo "rc=$?"; cat $OUT/same.txt; grep -v floor $OUT/speed.txt
