#!/usr/bin/env bash
# Issue 30 steps 57 and 58 (measured 2026-12-07, not kept: README.md here): builds
# the three binaries call1.sh compares, on this machine (no GPU needed), into .stage/bin (gitignored),
# by scripts/build-variant.sh:
#   M = cc9716e (main: steps 55 and 56 landed);
#   W = M + step57.patch (the staged score pass: dead warps skip the multiplies, and the
#       staging's stores off each other's banks);
#   W2 = W + step58.patch (the output walk's trips inside every row's range without per-row tests).
# Fails before building anything if a patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/warp-skip/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" W2 cc9716e "$here"/step57.patch "$here"/step58.patch
"$bv" M cc9716e
"$bv" W cc9716e "$here"/step57.patch
"$bv" W2 cc9716e "$here"/step57.patch "$here"/step58.patch
