#!/usr/bin/env bash
# Issue 30 step 49 (measured 2026-12-07 on one H100, not kept; README.md here): builds the four
# binaries call1.sh compares, on this machine (no GPU needed), from main 1f0e8dd:
#   M = 1f0e8dd as is; Q = M + step49.patch (the whole step: kernel, host constant, kernel
#   emulator); P = Q + q-to-p.patch (one m64n96k32 group a super-block, no column halves);
#   N = P + p-to-n.patch (no turns between the warpgroups).
# Each stripped into .stage/bin/{M,N,P,Q} (gitignored; call1.sh carries it). Proves nothing by
# itself: the patches apply to 1f0e8dd and build.
#   bash receipts/prefill-cuda/folded-scales/build.sh        [BASE=commit, default 1f0e8dd]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
base=${BASE:-1f0e8dd}
wt=/tmp/step49-wt
mkdir -p "$repo/.stage/bin"
git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
git -C "$repo" worktree add --detach "$wt" "$base" > /dev/null
trap 'git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true' EXIT
# The three patches apply in order to $base, checked before anything is built: a patch that
# does not apply stops the script (set -e) with git's message, never a half set of binaries.
for p in step49 q-to-p p-to-n; do git -C "$wt" apply "$here/$p.patch"; done
git -C "$wt" checkout -q -- .
build() {  # $1: name
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/step49-target cargo build --release -q)
  strip -o "$repo/.stage/bin/$1" /tmp/step49-target/release/ppn-gate
  echo "built $1"
}
build M
git -C "$wt" apply "$here/step49.patch"
build Q
git -C "$wt" apply "$here/q-to-p.patch"
build P
git -C "$wt" apply "$here/p-to-n.patch"
build N
