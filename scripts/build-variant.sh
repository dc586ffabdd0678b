#!/usr/bin/env bash
# One build of an A/B on the GPU machine, made here (no GPU needed): ppn-gate at COMMIT with
# PATCHes applied in order (each a `git diff` against COMMIT or the patch before), stripped
# into .stage/bin/NAME (gitignored; a GPU call carries it). A patch that does not apply stops
# the script with git's message, exit 1, before anything is built; with CHECK_ONLY=1 it only
# checks that they apply. The worktree (/tmp/variant-wt) goes at the end, whatever happens.
# The receipts' build.sh scripts (receipts/prefill-cuda/*/build.sh) call it once a build.
# Proves nothing by itself: the patches apply to COMMIT and it builds.
#   scripts/build-variant.sh NAME COMMIT [PATCH ...]
set -eu
[ $# -ge 2 ] || { echo "usage: $0 NAME COMMIT [PATCH ...]" >&2; exit 2; }
name=$1 commit=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
wt=/tmp/variant-wt
patches=()
for p in "$@"; do
  [ -f "$p" ] || { echo "build-variant: $p: no such patch" >&2; exit 2; }
  patches+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
git -C "$repo" worktree add --detach "$wt" "$commit" > /dev/null
trap 'git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true' EXIT
for p in "${patches[@]}"; do git -C "$wt" apply "$p"; done
[ "${CHECK_ONLY:-}" = 1 ] && { echo "$name: ${#patches[@]} patches apply to $commit"; exit 0; }
mkdir -p "$repo/.stage/bin"
# One target directory for every variant: cargo rebuilds only what a patch changed.
(cd "$wt" && CARGO_TARGET_DIR=/tmp/variant-target cargo build --release -q)
strip -o "$repo/.stage/bin/$name" /tmp/variant-target/release/ppn-gate
echo "built $name ($commit${patches:+ + ${#patches[@]} patches})"
