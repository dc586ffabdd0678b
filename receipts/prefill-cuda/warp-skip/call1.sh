#!/usr/bin/env bash
# Issue 30 steps 57 and 58 (run 2026-12-07 on one H100: README.md), call 1 on one H100 or
# H200: W and W2 against M (build.sh; G = W2, whose gates and soak run both steps' code), by
# scripts/prefill-ab.sh (its header says what each file proves: the same bits, prefill512
# alternating, gates and a soak, chunks 64 and 37), with Nsight Compute's source page of one
# attention_rows launch of each build (ar-M-*, ar-W-*, ar-W2-*: the warp instructions the
# score region and the output walk lost, the staging stores' excess wavefronts). About 360 s;
# one tarball, $OUT/ab.tgz.
#   OUT=DIR bash receipts/prefill-cuda/warp-skip/call1.sh     (.stage carried)
PROFILE=ar:attention_rows:2 DEADLINE=${DEADLINE:-230} exec scripts/prefill-ab.sh W W2
