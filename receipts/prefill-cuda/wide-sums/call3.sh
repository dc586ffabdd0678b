#!/usr/bin/env bash
# Issue 30 after step 53, call 3 (PREPARED 2026-12-07, NOT YET RUN: the session's device time
# ran out), on one H100 or H200: where the next step's time is. Nsight
# Compute (--set full) of D's (main's) two largest prefill pieces on the 8B l8 slice at a
# 512-row chunk: one attention_rows launch (16 % of the prefill, call1/prof-all.txt) and one
# gate|up mma_gemm_wg launch (the GEMM's 36 % excess shared-memory wavefronts: which
# instructions); each launch's details page and its SASS source page (gzipped CSV), which
# scripts/ncu-source-mix.py reads here (no GPU needed); both by scripts/ncu-source.sh.
#   OUT=DIR bash receipts/prefill-cuda/wide-sums/call3.sh
set -u
B=.stage/bin/D
. scripts/shapes.sh
M=/tmp/l8q4k.gguf
$B synth ${SHAPES[l8q4k]} -o $M > /dev/null || exit 1
RUN="bench --backend cuda --model $M --graphs off --arms prime --chunk 512 --prompt-len 512"
scripts/ncu-source.sh ar attention_rows 2 $B $RUN
scripts/ncu-source.sh wg mma_gemm_wg 10 $B $RUN
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
