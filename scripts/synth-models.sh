#!/usr/bin/env bash
# Writes the synthetic models that gates/cpu.json gates besides the
# committed oracle files (tests/data/oracle/synth): deeper than those (6 layers, so that 4
# stages can split unevenly), each exercising one thing the oracle files do not:
#   qwen2-L6-tied.gguf      qwen2, q/k/v biases, tied head, 6 layers
#   qwen3-L6-hd64.gguf      qwen3, q/k head norms, head_dim 64 on embd 128 (q twice as wide)
#   llama-L6-ropefreqs.gguf llama with seeded rope_freqs.weight factors
# `ppn-gate synth` is byte-identical for the same flags, so nothing binary of ours is committed
# and the golden receipts pin these bytes (the receipt records the file's blake3).
#
#   scripts/synth-models.sh BIN OUTDIR
set -euo pipefail
BIN=$1
OUT=$2
mkdir -p "$OUT"
S="--layers 6 --embd 128 --heads 4 --kv-heads 2 --ff 256 --vocab 512"
"$BIN" synth --arch qwen2 $S --tied --seed 21 -o "$OUT/qwen2-L6-tied.gguf"
"$BIN" synth --arch qwen3 $S --head-dim 64 --seed 22 -o "$OUT/qwen3-L6-hd64.gguf"
"$BIN" synth --arch llama $S --rope-freqs --seed 23 -o "$OUT/llama-L6-ropefreqs.gguf"
