#!/usr/bin/env bash
# Issue 30 step 56 (BENCH.md "k rows through shared memory, and XG's sums by column groups"):
# builds the binaries call1.sh and call2.sh compare, on this machine (no GPU needed), into
# .stage/bin (gitignored), by scripts/build-variant.sh:
#   M = 49c6231 (main's engine before steps 55 and 56; ../xs-groups/build.sh builds it too);
#   S = 18c8d44 + step56.patch (attention_rows' scores with k staged in shared memory);
#   XS = 18c8d44 + ../xs-groups/step55.patch + step56.patch (both steps: what main landed).
# Fails before building anything if a patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/k-tiles/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" XS 18c8d44 "$here"/../xs-groups/step55.patch "$here"/step56.patch
"$bv" M 49c6231
"$bv" S 18c8d44 "$here"/step56.patch
"$bv" XS 18c8d44 "$here"/../xs-groups/step55.patch "$here"/step56.patch
