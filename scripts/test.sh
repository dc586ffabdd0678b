#!/usr/bin/env bash
# The test command (README.md and .ci/run call this), the whole set-up on a fresh clone:
# fetches the two real models when they are missing (scripts/fetch-models.sh is idempotent
# and checks their sha256 either way), then runs every unit and integration test,
# release-optimised (the tests run real 30-layer models and soak loops), compiles every
# CUDA kernel module with NVRTC (scripts/nvrtc-check.py; no GPU needed), runs the tensor-core,
# attention and vectorized matvec kernels on the CPU in the kernel emulator
# (scripts/kernel-emu.sh: every kernel the host may pick gives the one-row path's bits, the
# planted faults caught), then the CPU gate
# battery (some of its models written by scripts/synth-models.sh) diffed against the
# committed golden receipts, and gates on 40 model shapes drawn by scripts/shape-sweep.py
# (each PASSes; each with a planted bit FAILs). Everything else a test reads is in the
# repository (tests/data/).
# First, clippy with warnings as errors over every target (installed with rustup if absent).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --version > /dev/null 2>&1 || rustup component add clippy
cargo clippy --locked --all-targets -- -D warnings
scripts/fetch-models.sh
cargo build --release --locked
# The binary cargo just built, wherever CARGO_TARGET_DIR (or a config) puts it: never a stale
# target/release/ppn-gate left in the checkout.
BIN="$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/ppn-gate"
cargo test --release --locked
python3 scripts/nvrtc-check.py
scripts/kernel-emu.sh
scripts/synth-models.sh "$BIN" target/synth
"$BIN" battery gates/cpu.json --out receipts/runs/battery-cpu --golden receipts/golden
python3 scripts/shape-sweep.py "$BIN" --out target/shape-sweep --models 40 --seed 1
