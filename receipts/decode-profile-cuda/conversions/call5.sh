#!/usr/bin/env bash
# Issue 30 step 26, call 5: O (main 03be331) against N (the kept build) on the eager-only
# decode run that bench-vs-llamacpp.sh's eager row uses (`bench --arms eager --steps 128`,
# --mma auto: the tensor cores for Q4_K only), builds alternating three times.
# Proves: eager.txt.
set -u
. scripts/shapes.sh
mkdir -p /tmp/ab
for m in l8q4k l32; do [ -f /tmp/ab/$m.gguf ] || .stage/bin/N synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null; done
for m in l8q4k l32; do for r in 1 2 3; do for b in O N; do
  echo "$m $b: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/$m.gguf --arms eager --steps 128 2>&1 | grep -E 'eager ')"
done; done; done | tee $OUT/eager.txt
