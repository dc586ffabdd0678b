#!/usr/bin/env bash
# Issue 30 step 53 (prepared 2026-12-07, NOT yet run on a GPU; README.md here): builds the two
# binaries call1.sh compares, on this machine (no GPU needed), into .stage/bin (gitignored),
# by scripts/build-variant.sh:
#   M = aca09de (step 51's wgmma GEMM, main after the review's mend);
#   D = M + step53.patch (each sub-block's wgmma descriptor by offset from the ring's).
# Fails before building anything if the patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/desc-offset/build.sh        [BASE=commit, default aca09de]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
base=${BASE:-aca09de}
CHECK_ONLY=1 "$bv" D "$base" "$here"/step53.patch
"$bv" M "$base"
"$bv" D "$base" "$here"/step53.patch
