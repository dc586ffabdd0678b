#!/usr/bin/env bash
# (Issue 30, step 16, the phase probe: ../probe.cu of its first form, PSTOP builds; one H200, 2026-12-03: probe-phases.txt.)
# One device call: build the attention probe's variants with nvcc, run them.
set -u
cd "$(dirname "$0")/.."  # probe.cu, and att_src.cu made there by `python3 mksrc.py src/backend/cuda/kernels` of the tree measured
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/ap
NV="nvcc -O3 -arch=sm_90 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -std=c++17 -w"
for hd in 64 128 256; do
  for st in 0 1 2 3 X; do
    d=""; [ $st != X ] && d="-DPSTOP=$st"
    ( $NV -DATT_HD=$hd $d -o /tmp/ap/p$hd$st probe.cu -lcuda > /tmp/ap/b$hd$st.log 2>&1 || echo "build $hd $st failed: $(head -5 /tmp/ap/b$hd$st.log)" ) &
  done
done
wait
run() { # name nh nkv hd style norm
  for st in 0 1 2 3 X; do echo "== PSTOP $st"; /tmp/ap/p$4$st $1 $2 $3 $4 $5 $6 1; done
  echo "== plain"; /tmp/ap/p$4X $1 $2 $3 $4 $5 $6 0
}
{ run smol 9 3 64 0 0; run gem 4 1 256 1 1; run l8 32 8 128 0 0; } 2>&1 | tee "$OUT"/probe.txt
