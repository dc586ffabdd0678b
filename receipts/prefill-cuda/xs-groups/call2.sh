#!/usr/bin/env bash
# Issue 30 step 55, call 2 on one H100 or H200 (ran 2026-12-07 on the warm H100 of
# ../k-tiles/call1.sh, after call1.sh here made /tmp/ab/l8q4k.gguf): Nsight Compute's full set
# and SASS source page of one gate|up wgmma GEMM launch (skip 10) of M and of X, by
# scripts/ncu-source.sh (wg{M,X}-details.txt, wg{M,X}-sass.csv.gz; read here by
# scripts/ncu-source-mix.py: wg{M,X}-mix.txt). Proves what step 55 did to the GEMM's excess
# shared-memory wavefronts and short-scoreboard waits.
#   OUT=DIR bash receipts/prefill-cuda/xs-groups/call2.sh
set -u
R=${OUT:?}
O=/tmp/w; mkdir -p $O
RUN="bench --backend cuda --model /tmp/ab/l8q4k.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
OUT=$O scripts/ncu-source.sh wgM mma_gemm_wg 10 .stage/bin/M $RUN
OUT=$O scripts/ncu-source.sh wgX mma_gemm_wg 10 .stage/bin/X $RUN
tar czf "$R/w.tgz" -C $O .
