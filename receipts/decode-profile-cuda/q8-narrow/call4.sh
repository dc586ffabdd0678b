#!/usr/bin/env bash
# One GPU: what a one-row Q8_0 launch's time is made of, if not its bytes (issue 30, after
# step 42). Timing only, wrong bits (probe-chain.patch, never landed): O = .stage/bin/C (main
# fda963b); NP = no prologue in one-row staged launches (x not staged: the walk reads the
# global row at the staged tile's slots; a first NP that read unwritten shared memory made
# NaN logits, and the gate refused the run at step 0, exit 2: call4/first-np.txt);
# NW = every Q8_0 load reads round 0 of its row again (the same instructions; DRAM reads
# 15-47 % of the bytes, the rest hit L2). Nsight Compute with the clocks as they run, warm
# caches, on the same two layers' launches of l8q8 as call1.sh (durations-*.txt). What it
# proves: how much of a launch's time is its prologue (O - NP) and how much is not streaming
# (NW: the launch with most of its DRAM traffic gone). BUILDS picks the builds (default C NP NW); the
# second call, BUILDS="NP C" with the fixed NP, could not start (the session's device time
# was spent): NP was never measured. call4/durations-C.txt and -NW.txt are the first call's.
# Later settings (../q8-halves/np/call.sh): SYN, the build that synthesizes the file (default
# .stage/bin/C); RUN=bench, the launches of `bench --arms eager --steps 8` (no verdict, so a
# probe with non-finite logits still runs) into bench-durations-$b.txt, instead of a gate's.
set -u
OUT=${OUT:?}
mkdir -p /tmp/p "$OUT"
. scripts/shapes.sh
${SYN:-.stage/bin/C} synth ${SHAPES[l8q8]} -o /tmp/p/l8q8.gguf > /dev/null
G="--backend cuda --model /tmp/p/l8q8.gguf --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q"
P=durations
if [ "${RUN:-gate}" = bench ]; then
  G="bench --backend cuda --model /tmp/p/l8q8.gguf --graphs off --arms eager --steps 8" P=bench-durations
fi
for b in ${BUILDS:-C NP NW}; do
  /usr/local/cuda/bin/ncu --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum -k regex:"mvq|attention" \
    --launch-skip 160 --launch-count 10 .stage/bin/$b $G > "$OUT/$P-$b.txt" 2>&1
  echo "== $b (exit $?)"
  grep -E "^  [a-z_0-9]+.*\(|dram__bytes_read.sum|gpu__time_duration.sum" "$OUT/$P-$b.txt" | paste - - - \
    | awk '{print $1, $(NF), "us;", $(NF-3), $(NF-4)}'
done
