#!/usr/bin/env bash
# Issue 30 step 55 (PREPARED 2026-12-07, NOT YET RUN ON A GPU; README.md here): builds the two
# binaries call1.sh compares, on this machine (no GPU needed), into .stage/bin (gitignored),
# by scripts/build-variant.sh:
#   M = 49c6231 (main: the wgmma GEMM after step 53);
#   X = M + step55.patch (XG's sub-block sums and 2^E laid out by 4-column groups of 36 words).
# Fails before building anything if the patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/xs-groups/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" X 49c6231 "$here"/step55.patch
"$bv" M 49c6231
"$bv" X 49c6231 "$here"/step55.patch
