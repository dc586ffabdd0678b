#!/usr/bin/env bash
# One GPU: the Q8_0 quant plane laid out by 16-byte halves (issue 30, step 43). O =
# .stage/bin/O (main afb47ed), N = the step's tree (repack::q8_half_at, mvq.cu
# Unit<FMT_Q8_0>). Proves:
#  - ncu-O.txt, ncu-N.txt (and the summary printed): on two layers of the l8q8 shape, each
#    launch's duration (warm caches, clocks as they run), DRAM bytes, the sectors L1 asked of
#    L2 and its global load requests and sectors. Whether the whole-block layout moved twice
#    the weight bytes from L2 (O) and the halves move them once (N);
#  - same.txt (scripts/decode-ab.sh): N's receipts `diff` same as O's on every arm and serve
#    at N = 2, on l8q8 under --mma off and auto, and on the narrow Q8_0 shapes (qw05, q3:
#    partial and whole rounds) and the Gemma-3 Q4_K_M mix (its Q8_0 head on the dense walk,
#    20 units a row) under off;
#  - speed.txt: decode-only eager tok/s (the bench table's eager), builds alternating twice;
#    prof.txt: per-op microseconds of O and N (events around each launch, graphs off).
set -u
OUT=${OUT:?}
mkdir -p "$OUT" /tmp/p
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
. scripts/shapes.sh
.stage/bin/N synth ${SHAPES[l8q8]} -o /tmp/p/l8q8.gguf > /dev/null
G="--backend cuda --model /tmp/p/l8q8.gguf --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
for b in O N; do
  timeout 120 /usr/local/cuda/bin/ncu --clock-control none --cache-control none --metrics $M \
    -k regex:"mvq|attention" --launch-skip 172 --launch-count 10 .stage/bin/$b $G > "$OUT"/ncu-$b.txt 2>&1
  echo "ncu $b exit $?"
  awk -v b=$b '/^  [a-z_0-9]+.*\(/{k=$1} /gpu__time_duration.sum|dram__bytes_read.sum|lts__t_sectors_srcunit|l1tex__t_requests|l1tex__t_sectors/{printf "%s %s %s %s %s\n", b, k, $1, $(NF-1), $NF}' "$OUT"/ncu-$b.txt
done
SAME="l8q8:off l8q8:auto qw05:off q3:off gemq4km:off" SPEED="l8q8 qw05 q3" SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 PROF=1 timeout ${DEADLINE_S:-420} scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N
echo "decode-ab exit $?"
