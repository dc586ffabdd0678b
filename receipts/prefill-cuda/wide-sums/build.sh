#!/usr/bin/env bash
# Issue 30 steps 53 and 54 (README.md here): builds the three binaries call1.sh compares, on
# this machine (no GPU needed), into .stage/bin (gitignored), by scripts/build-variant.sh:
#   M = aca09de (step 51's wgmma GEMM, main after the review's mend);
#   D = M + ../desc-offset/step53.patch (each sub-block's wgmma descriptor by offset);
#   E = D + step54.patch (a sub-block's three products joined into one int32 D_s, S_sb summed
#       in int64: LEA, LEA, IMAD.WIDE an output a sub-block, rn_f32(S_sb) by one I2F.S64).
# Fails before building anything if a patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/wide-sums/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
p53=$here/../desc-offset/step53.patch
CHECK_ONLY=1 "$bv" E aca09de "$p53" "$here"/step54.patch
"$bv" M aca09de
"$bv" D aca09de "$p53"
"$bv" E aca09de "$p53" "$here"/step54.patch
