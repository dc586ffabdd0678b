#!/usr/bin/env bash
# Issue 30 after step 53, call 3 (PREPARED 2026-12-07, NOT YET RUN: the session's device time
# ran out), on one H100 or H200: where the next step's time is. Nsight
# Compute (--set full) of D's (main's) two largest prefill pieces on the 8B l8 slice at a
# 512-row chunk: one attention_rows launch (16 % of the prefill, call1/prof-all.txt) and one
# gate|up mma_gemm_wg launch (the GEMM's 36 % excess shared-memory wavefronts: which
# instructions); each launch's details page and its SASS source page (gzipped CSV), which
# scripts/ncu-source-mix.py reads here (no GPU needed).
#   OUT=DIR bash receipts/prefill-cuda/wide-sums/call3.sh
set -u
B=.stage/bin/D
. scripts/shapes.sh
M=/tmp/l8q4k.gguf
$B synth ${SHAPES[l8q4k]} -o $M > /dev/null || exit 1
NCU=/usr/local/cuda/bin/ncu
RUN="bench --backend cuda --model $M --graphs off --arms prime --chunk 512 --prompt-len 512"
prof() {  # name regex skip
  timeout 100 $NCU --set full --import-source no -k regex:"$2" --launch-skip $3 --launch-count 1 \
    -o /tmp/$1 -f $B $RUN > /tmp/$1.log 2>&1; echo "$1 ncu exit $?"; tail -2 /tmp/$1.log
  $NCU -i /tmp/$1.ncu-rep --page source --csv --print-source sass | gzip > $OUT/$1-sass.csv.gz
  $NCU -i /tmp/$1.ncu-rep --page details > $OUT/$1-details.txt 2>&1
}
prof ar attention_rows 2
prof wg mma_gemm_wg 10
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
