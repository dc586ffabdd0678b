#!/usr/bin/env bash
# Issue 30, step 13 (the dense one-row walk, mvq_d8), call 1 of 2 on one H200. Proves that the
# new build (N) gives the bits of the one before (O, 26ea8e7) and how fast each decodes:
# llama.cpp's build starts in the background for call 2 (shared anchors' recipe); then
# scripts/decode-ab.sh on the narrow shapes the dense walk takes (scripts/shapes.sh gemq4km,
# gem, smol: rows 640 and 576 wide; qw05: 896): every arm and serve at N = 2 `diff` O against
# N (same.txt), eager and B=8 of both builds alternating twice (speed.txt), PPN_CUDA_PROF's
# per-op microseconds of both (prof.txt: the head's line is the dense walk's target).
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
SAME="gemq4km:auto gem:auto smol:auto qw05:auto" SPEED="gemq4km gem smol qw05" ROUNDS=2 PROF=1 \
  scripts/decode-ab.sh O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate
echo "decode-ab exit $?"
tail -3 /tmp/lcb.log
