#!/usr/bin/env bash
# One GPU: the NP probe step 42 built and never ran (../../q8-narrow/call4.sh), on step 43's
# tree. Timing only, wrong bits (probe-np.patch, never landed): NP = the one-row staged
# launches skip their prologue (no norm, no x tile: the walk reads the global row at the
# tile's swizzled slots); N = step 43's build. Nsight Compute with the clocks as they run,
# warm caches, on two l8q8 layers' launches (durations-N.txt, durations-NP.txt). What it
# proves: how much of each one-row Q8_0 launch's time its prologue is (N - NP).
# As run (one H100, 2026-12-06): this script's NP runs were refused at step 0 (without the
# norm, the activations overflow: non-finite logits, exit 2, first-np-gate.txt); N's files
# are not kept. The call after it ran the same ncu command on `bench` (no verdict), once
# each, on the same warm machine (bench-durations-N.txt, bench-durations-NP.txt):
#   ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum
#     -k regex:"mvq|attention" --launch-skip 160 --launch-count 10 .stage/bin/$b bench --backend cuda
#     --model /tmp/p/l8q8.gguf --graphs off --arms eager --steps 8
set -u
OUT=${OUT:?}
mkdir -p /tmp/p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
. scripts/shapes.sh
.stage/bin/N synth ${SHAPES[l8q8]} -o /tmp/p/l8q8.gguf > /dev/null
G="--backend cuda --model /tmp/p/l8q8.gguf --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q"
for r in 1 2; do
  for b in N NP; do
    /usr/local/cuda/bin/ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum -k regex:"mvq|attention" \
      --launch-skip 160 --launch-count 10 .stage/bin/$b $G > "$OUT/durations-$b-$r.txt" 2>&1
    echo "== $b round $r (exit $?)"
    grep -E "^  [a-z_0-9]+.*\(|dram__bytes_read.sum|gpu__time_duration.sum" "$OUT/durations-$b-$r.txt" | paste - - - \
      | awk '{print $1, $(NF), "us;", $(NF-3), $(NF-4)}'
  done
done
