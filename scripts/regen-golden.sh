#!/usr/bin/env bash
# Regenerate the golden receipts ON PURPOSE (a change that alters the deterministic parts of
# a receipt: model numerics, tape, schema). Review `git diff receipts/golden` before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
# The binary cargo just built, wherever CARGO_TARGET_DIR (or a config) puts it: never a stale
# target/release/ppn-gate left in the checkout.
BIN="$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/ppn-gate"
scripts/synth-models.sh "$BIN" target/synth
"$BIN" battery gates/cpu.json --out receipts/golden
