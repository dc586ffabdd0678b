#!/usr/bin/env bash
# Regenerate the golden receipts ON PURPOSE (a change that alters the deterministic parts of
# a receipt: model numerics, tape, schema). Review `git diff receipts/golden` before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
scripts/synth-models.sh target/release/ppn-gate target/synth
target/release/ppn-gate battery gates/cpu.json --out receipts/golden
