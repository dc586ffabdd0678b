#!/usr/bin/env bash
# (Issue 30, step 16: SASS and Nsight Compute source counters of cfb742e's attention_early, SmolLM2 and Gemma-3 heads at position 128; one H200, 2026-12-03: sass-mix.txt.)
# One device call: SASS of the probe's attention and ncu source-level stall sampling.
set -u
cd "$(dirname "$0")/.."  # probe.cu, and att_src.cu made there by `python3 mksrc.py src/backend/cuda/kernels` of the tree measured
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/ap
NV="nvcc -O3 -arch=sm_90 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -std=c++17 -w -lineinfo"
$NV -DATT_HD=64 -o /tmp/ap/p64 probe.cu & $NV -DATT_HD=256 -o /tmp/ap/p256 probe.cu & wait
cuobjdump -sass -fun attention_early /tmp/ap/p64 > /tmp/ap/sass64.txt; cuobjdump -sass -fun attention_early /tmp/ap/p256 > /tmp/ap/sass256.txt
wc -l /tmp/ap/sass*.txt
NCU=/usr/local/cuda/bin/ncu
for c in "p64 smol 9 3 64 0 0 2350" "p256 gem 4 1 256 1 1 2350"; do
  set -- $c
  $NCU --clock-control none --set full --import-source yes -k attention_early --launch-skip $8 --launch-count 1 -f -o /tmp/ap/$2 /tmp/ap/$1 $2 $3 $4 $5 $6 $7 1 > /tmp/ap/$2-ncu.log 2>&1; echo "ncu $2 exit $?"; tail -3 /tmp/ap/$2-ncu.log
  $NCU -i /tmp/ap/$2.ncu-rep --page source --csv --print-source sass > /tmp/ap/$2-src.csv 2>&1; echo "src $?"; wc -l /tmp/ap/$2-src.csv
  $NCU -i /tmp/ap/$2.ncu-rep --page details > /tmp/ap/$2-details.txt 2>&1
done
cd /tmp/ap && tar czf $OUT/ap.tgz sass64.txt sass256.txt smol-src.csv gem-src.csv smol-details.txt gem-details.txt smol-ncu.log gem-ncu.log
ls -la $OUT
