#!/usr/bin/env bash
# Issue 30 step 60: builds the binaries call1.sh to call3.sh compare, on this machine (no
# GPU needed), into .stage/bin (gitignored), by scripts/build-variant.sh:
#   H  = 48713a7 (main's engine; calls 1 and 2 ran its `cargo build --release` made in the
#        main tree the session before, stripped);
#   C  = 295d31b + two-blocks.patch (the one-row vectorized kernels at 2 blocks an SM
#        instead of 3: up to 128 registers; W's control);
#   W  = 295d31b + warm.patch (C's bounds, and each one-row mvq launch walks its code once
#        dry before pdl_wait: weights as x, each warp's first group, no stores, no wait);
#   H2 = main (the engine of 48713a7 and 295d31b), built as C is; C2 = main +
#        two-blocks-not-q8.patch (2 blocks an SM for every one-row format but Q8_0).
# Fails before building anything if a patch does not apply. Proves nothing by itself.
#   bash receipts/decode-profile-cuda/warm-pass/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" W 295d31b "$here"/warm.patch
CHECK_ONLY=1 "$bv" C 295d31b "$here"/two-blocks.patch
CHECK_ONLY=1 "$bv" C2 HEAD "$here"/two-blocks-not-q8.patch
"$bv" H 48713a7
"$bv" C 295d31b "$here"/two-blocks.patch
"$bv" W 295d31b "$here"/warm.patch
"$bv" H2 HEAD
"$bv" C2 HEAD "$here"/two-blocks-not-q8.patch
