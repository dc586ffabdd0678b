#!/usr/bin/env bash
# Issue 30 step 51 (run on one H100 2026-12-07, landed; README.md here): builds the two
# binaries call1.sh compares, on this machine (no GPU needed), into .stage/bin (gitignored), by
# scripts/build-variant.sh:
#   M = cdb6db0 (step 50's wgmma GEMM: one wgmma a sub-block, each waited before its sums);
#   T = M + step51.patch (sub-block s + 1's wgmma in flight during s's sums).
# Fails before building anything if the patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/two-in-flight/build.sh        [BASE=commit, default cdb6db0]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
base=${BASE:-cdb6db0}
CHECK_ONLY=1 "$bv" T "$base" "$here"/step51.patch
"$bv" M "$base"
"$bv" T "$base" "$here"/step51.patch
