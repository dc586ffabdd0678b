#!/usr/bin/env bash
# One GPU: the committed build's fault holds (.stage/bin/C, main fda963b: the hold word in a
# OnceLock, one launch config), which stop 67 did not run on a GPU. Proves, with
# `scripts/gpu-validate.sh` (summary.txt, log.txt): selftest --runs RUNS catches every fault
# that opens on one GPU in every run and passes every clean control; the cli section (a pinned
# hunt's every opened trial caught); the one-rank NCCL check; the mma section's plant FAILs
# and gates PASS; the verdicts section with HF tapes made on the machine (no-rollback FAILs on
# an HF tape); the module cache. Sections run in that order under a deadline: a row the
# deadline cut is absent from summary.txt, not counted.
set -u
OUT=${OUT:?}
ORACLE_STAGE=.stage SECTIONS="selftest cli nccl mma verdicts cache" RUNS=${RUNS:-10} \
  timeout ${DEADLINE_S:-420} scripts/gpu-validate.sh .stage/bin/C $OUT/gv
echo "gpu-validate exit $? (124: the deadline)"
cat $OUT/gv/summary.txt
