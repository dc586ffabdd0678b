#!/usr/bin/env bash
# Issue 30 step 59 (a timing probe, WRONG BITS, never to land): builds the three binaries
# call1.sh and call2.sh compare, on this machine (no GPU needed), into .stage/bin (gitignored),
# by scripts/build-variant.sh:
#   H = 48713a7 (main: THE ORDER's three digit pieces h, m, l of every activation);
#   P2 = H + pieces.patch (WG_PIECES 2: the wgmma GEMM's m64n64k32 takes h and m only, the
#        sums drop D_l);
#   P1 = the same patch at WG_PIECES 1 (m64n32k32, h only; the sums one IMAD a sub-block).
# The copies still move all three pieces (XG's bytes unchanged): the probe bounds what fewer
# tensor products and integer sums buy, not a smaller tile. Proves nothing by itself.
#   bash receipts/prefill-cuda/fewer-pieces/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
p1=$(mktemp --suffix=.patch)
trap 'rm -f "$p1"' EXIT
sed 's/^+#define WG_PIECES 2$/+#define WG_PIECES 1/' "$here"/pieces.patch > "$p1"
grep -q '^+#define WG_PIECES 1$' "$p1" || { echo "build.sh: pieces.patch has no WG_PIECES 2 line" >&2; exit 1; }
"$bv" H 48713a7
"$bv" P2 48713a7 "$here"/pieces.patch
"$bv" P1 48713a7 "$p1"
