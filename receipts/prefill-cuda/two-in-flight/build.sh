#!/usr/bin/env bash
# Issue 30 step 51 (prepared 2026-12-07, NOT yet run on a GPU; README.md here): builds the two
# binaries call1.sh compares, on this machine (no GPU needed), into .stage/bin (gitignored):
#   M = cdb6db0 (step 50's wgmma GEMM: one wgmma a sub-block, each waited before its sums);
#   T = M + step51.patch (sub-block s + 1's wgmma in flight during s's sums).
# Fails before building anything if the patch does not apply. Proves nothing by itself.
#   bash receipts/prefill-cuda/two-in-flight/build.sh        [BASE=commit, default cdb6db0]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
wt=/tmp/step51-wt
mkdir -p "$repo/.stage/bin"
git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
git -C "$repo" worktree add --detach "$wt" "${BASE:-cdb6db0}" > /dev/null
trap 'git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true' EXIT
git -C "$wt" apply --check "$here/step51.patch"
build() {  # $1: name
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/step51-target cargo build --release -q)
  strip -o "$repo/.stage/bin/$1" /tmp/step51-target/release/ppn-gate
  echo "built $1"
}
build M
git -C "$wt" apply "$here/step51.patch"
build T
