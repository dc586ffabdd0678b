#!/usr/bin/env bash
# Where a model's one-row layer goes (issue 30; SmolLM2's shape by default), in one GPU call:
#
#   OUT=DIR [SHAPE=l8q8 SKIP=172] scripts/narrow-ncu.sh BIN
#
# SHAPE: a scripts/shapes.sh name (default smol); SKIP: launches of the kernels below to skip
# before the two layers measured (default 620: SmolLM2's fifth step; l8q8 takes 172);
# STALL_K, STALL_SKIP: the stall profile's kernels and skip (default attention|mvq_w1, 300).
# On the SmolLM2-135M shape (synthetic, Q4_1, 30 layers, 576 wide): `bench` (eager tok/s
# with graphs: the wall time of a layer), then Nsight Compute with the clocks left as they
# are (--clock-control none, so durations compare with the wall time) on two layers' ten
# launches (q|k|v, attention, o, gate|up, down): each kernel's own duration. What it proves:
# the wall time of a layer minus the sum of its kernels' durations is what the boundaries
# between launches cost (a kernel's duration already holds its own latency chain). Then the
# stall reasons of attention and of the q|k|v matvec (ncu-stalls.sh's list), which say what
# each kernel's chain waits on. Durations twice: with the caches as the run left them
# (--cache-control none: what a replay sees) and flushed before each kernel (ncu's default,
# every weight, activation and instruction from DRAM). Files: bench.txt,
# ncu-durations-warm.txt, ncu-durations-flushed.txt, ncu-stalls-narrow.txt (warm).
set -u
B=${1:?usage: OUT=DIR scripts/narrow-ncu.sh BIN}
OUT=${OUT:?OUT: where the results go}
mkdir -p /tmp/p "$OUT"
SHAPE=${SHAPE:-smol}
SKIP=${SKIP:-620}
M=/tmp/p/$SHAPE.gguf
. "$(dirname "$0")"/shapes.sh
[ -n "${SHAPES[$SHAPE]:-}" ] || { echo "narrow-ncu: unknown SHAPE $SHAPE (known: ${!SHAPES[*]})" >&2; exit 2; }
$B synth ${SHAPES[$SHAPE]} -o $M > /dev/null
NCU=/usr/local/cuda/bin/ncu
$B bench --backend cuda --model $M --steps 128 > "$OUT"/bench.txt 2>&1
G="--backend cuda --model $M --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q"
# Launches 0.. are the first step's embed and layers; skip into a later step's walk.
for cc in none all; do
  f=warm; [ $cc = all ] && f=flushed
  $NCU --clock-control none --cache-control $cc \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__bytes_read.sum \
    -k regex:"mvq|attention|mv_tile|embed|rowpos" --launch-skip $SKIP --launch-count 12 $B $G \
    > "$OUT"/ncu-durations-$f.txt 2>&1; echo "durations ($f) exit $?"
done
. "$(dirname "$0")"/ncu-stalls.sh
S=$(ncu_stall_metrics gpu__time_duration.sum)
$NCU --clock-control none --cache-control none $S -k regex:"${STALL_K:-attention|mvq_w1}" --launch-skip ${STALL_SKIP:-300} --launch-count 4 $B $G \
  > "$OUT"/ncu-stalls-narrow.txt 2>&1; echo "stalls exit $?"
grep -E "eager +\(" "$OUT"/bench.txt
for f in warm flushed; do
  echo "== $f"; grep -E "^  [a-z_]+.*\(|dram__bytes_read.sum|gpu__time_duration.sum" "$OUT"/ncu-durations-$f.txt | paste - - - | awk '{print $1, $(NF), "us;", $(NF-3), $(NF-4), "read"}' | head -12
done
echo "== stall reasons (warm), the six largest of each launch (cycles per issued instruction)"
awk '/^  [a-z_]+.*\(/{k=$1 "#" (++i)} /stalled_.*\.ratio/{n=$1; sub(/.*stalled_/,"",n); sub(/\.ratio/,"",n); v=$NF; gsub(",","",v); print k, n, v}' \
  "$OUT"/ncu-stalls-narrow.txt | sort -k1,1 -k3,3nr | awk '{c[$1]++; if (c[$1] <= 6) printf "%s %s %s\n", $1, $2, $3}'
