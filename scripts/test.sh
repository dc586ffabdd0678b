#!/usr/bin/env bash
# The test command (README.md and .ci/run call this): every unit and integration test,
# release-optimised (the tests run real 30-layer models and soak loops), then the CPU gate
# battery (some of its models written by scripts/synth-models.sh) diffed against the committed
# golden receipts.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] && [ -f models/gemma-3-270m-q4_k_m.gguf ] || {
  echo "test.sh: models missing: run scripts/fetch-models.sh first" >&2
  exit 2
}
cargo build --release --locked
cargo test --release --locked
scripts/synth-models.sh target/release/ppn-gate target/synth
target/release/ppn-gate battery gates/cpu.json --out receipts/runs/battery-cpu --golden receipts/golden
