#!/usr/bin/env bash
# Tried: --mma auto's batch rule at every width for the b32 formats (Q4_K stays FFMA on narrow
# files): eager and B=8 against bc0cd0f's rule on the Gemma mix and the SmolLM2 shape.
set -u
. scripts/shapes.sh
mkdir -p /tmp/t
for m in gemq4km smol; do .stage/bin/ppn-gate synth ${SHAPES[$m]} -o /tmp/t/$m.gguf > /dev/null & done; wait
for m in gemq4km smol; do for b in ppn-gate ppn-gate-exp; do
  .stage/bin/$b bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(" | sed "s|^|$m $b: |"
done; done | tee $OUT/exp.txt
