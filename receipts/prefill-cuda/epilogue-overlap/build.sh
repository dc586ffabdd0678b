#!/usr/bin/env bash
# Issue 30 step 52 (README.md here): builds the two binaries call1.sh compares, on this
# machine (no GPU needed), into .stage/bin (gitignored), by scripts/build-variant.sh:
#   T  = 5ab904b (step 51 landed: two wgmma in flight within a super-block);
#   A2 = T + step52-a2-minb2.patch (the next super-block's first wgmma issued before this
#        one's epilogue, waited before the block barrier; registers bounded for 2 blocks an
#        SM, 214, because at 3 blocks, 168, ptxas serializes the wgmma: static.txt).
# Proves nothing by itself.
#   bash receipts/prefill-cuda/epilogue-overlap/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" A2 5ab904b "$here"/step52-a2-minb2.patch
"$bv" T 5ab904b
"$bv" A2 5ab904b "$here"/step52-a2-minb2.patch
