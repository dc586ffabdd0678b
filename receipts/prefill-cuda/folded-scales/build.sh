#!/usr/bin/env bash
# Issue 30 step 49 (measured 2026-12-07 on one H100, not kept; README.md here): builds the four
# binaries call1.sh compares, on this machine (no GPU needed), from main 1f0e8dd:
#   M = 1f0e8dd as is; Q = M + step49.patch (the whole step: kernel, host constant, kernel
#   emulator); P = Q + q-to-p.patch (one m64n96k32 group a super-block, no column halves);
#   N = P + p-to-n.patch (no turns between the warpgroups).
# Each stripped into .stage/bin/{M,N,P,Q} by scripts/build-variant.sh. The three patches are
# checked to apply in order before anything is built. Proves nothing by itself.
#   bash receipts/prefill-cuda/folded-scales/build.sh        [BASE=commit, default 1f0e8dd]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
base=${BASE:-1f0e8dd}
CHECK_ONLY=1 "$bv" N "$base" "$here"/step49.patch "$here"/q-to-p.patch "$here"/p-to-n.patch
"$bv" M "$base"
"$bv" Q "$base" "$here"/step49.patch
"$bv" P "$base" "$here"/step49.patch "$here"/q-to-p.patch
"$bv" N "$base" "$here"/step49.patch "$here"/q-to-p.patch "$here"/p-to-n.patch
