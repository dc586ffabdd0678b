#!/usr/bin/env bash
# Session 5, after the review mends: R (bc95ceb) against Z2 (973b0f1, the measured build),
# --mma on, one GPU: every gate PASS, receipts equal (the mends change no bit), faults FAIL.
set -u
OUT=$1; mkdir -p /tmp/r1 $OUT; cp .stage/bin/Z2 /tmp/r1/Z2; cp .stage/bin/R /tmp/r1/R; chmod +x /tmp/r1/*
BENCH=0 timeout 280 bash .stage/calls5/ab.sh /tmp/r1/Z2 /tmp/r1/R /tmp/r1/m $OUT > /dev/null 2>&1
echo "ab.sh exit $?" >> $OUT/summary.txt
/tmp/r1/R --backend cuda -q --model /tmp/r1/m/smol2.gguf --stages 2 --devices 0,0 --arms prime --prompt-len 100 --chunk 100 --gen-len 4 --receipt /tmp/r1/auto.json > /dev/null 2>&1
echo "auto prime C=100 exit $? $(grep -o '"mma": *"[^"]*"' /tmp/r1/auto.json | head -1)" >> $OUT/summary.txt
cat $OUT/summary.txt
