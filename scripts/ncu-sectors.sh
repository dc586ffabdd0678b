#!/usr/bin/env bash
# How full each launch's global loads and shared loads are (issue 30, step 43), in one GPU
# call:
#
#   OUT=DIR [CASES="smol:eager:620 ..."] scripts/ncu-sectors.sh BIN
#
# CASES: shape:arm:skip[:regex] (a scripts/shapes.sh name; eager (a gate's one-row steps),
# batched (bench, B = 8) or prime (bench, chunks of 64); launches to skip before the 16
# profiled; regex: only kernels it matches count and are profiled, e.g. mma_gemm for prime,
# since bench walks one-row steps first and a plain skip lands in them). For each,
# Nsight Compute (clocks as they run, warm caches) gives every profiled launch's duration,
# its global load requests and 32-byte sectors, the bytes of each sector its loads use (ncu's
# smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct: 100 % = every sector byte
# read once a request) and its shared-memory bank conflicts (loads; stores in brackets). What
# it proves: which kernels move sectors they half use (step 43 found the one-row Q8_0 walk at
# 50 %: two 16-byte loads a lane, 32 bytes apart), so a layout change is worth measuring there
# and nowhere else; and which conflict in shared memory (step 44: the dense head walk).
# Files: $OUT/sectors-<shape>-<arm>.txt (ncu's output) and the table printed (and in
# $OUT/sectors.txt): case, kernel, us, requests, sectors, % of sector bytes used, shared
# load conflicts (and store conflicts).
set -u
B=${1:?usage: OUT=DIR scripts/ncu-sectors.sh BIN}
OUT=${OUT:?OUT: where the results go}
[ -x "$B" ] || { echo "ncu-sectors: $B is not an executable" >&2; exit 2; }
mkdir -p /tmp/p "$OUT"
. "$(dirname "$0")"/shapes.sh
CASES=${CASES:-"smol:eager:620 gemq4km:eager:400 l8q4k:eager:172 l8q8:eager:172 l8q4k:prime:8:mma_gemm"}
NCU=${NCU:-/usr/local/cuda/bin/ncu}
[ -x "$NCU" ] || { echo "ncu-sectors: no Nsight Compute at $NCU (set NCU)" >&2; exit 2; }
M=gpu__time_duration.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
: > "$OUT"/sectors.txt
for c in $CASES; do
  IFS=: read -r shape arm skip rx <<< "$c"
  [ -n "${SHAPES[$shape]:-}" ] || { echo "ncu-sectors: unknown shape $shape (known: ${!SHAPES[*]})" >&2; exit 2; }
  [[ "$skip" =~ ^[0-9]+$ ]] || { echo "ncu-sectors: case $c: skip '$skip' is not a whole number" >&2; exit 2; }
  # eager: a gate's decode steps (narrow-ncu.sh's skips); batched and prime: bench's.
  case $arm in
    eager) C= R="--graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q" ;;
    batched) C=bench R="--graphs off --arms batched --batch 8 --steps 16" ;;
    prime) C=bench R="--graphs off --arms prime --chunk 64 --prompt-len 512" ;;
    *) echo "ncu-sectors: unknown arm $arm (eager, batched, prime)" >&2; exit 2 ;;
  esac
  [ -f /tmp/p/$shape.gguf ] || $B synth ${SHAPES[$shape]} -o /tmp/p/$shape.gguf > /dev/null
  f="$OUT"/sectors-$shape-$arm.txt
  timeout 150 $NCU --clock-control none --cache-control none --metrics $M ${rx:+-k regex:"$rx"} --launch-skip "$skip" --launch-count 16 \
    $B $C --backend cuda --model /tmp/p/$shape.gguf $R > "$f" 2>&1
  echo "$c: ncu exit $?" | tee -a "$OUT"/sectors.txt
  awk -v c="$shape:$arm" '
    /^  [A-Za-z_0-9]+.*\(/ {k = $1}
    /gpu__time_duration.sum/ {t = $NF}
    /l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum/ {rq = $NF}
    /l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum/ {se = $NF}
    /l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum/ {bc = $NF}
    /l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum/ {bs = $NF}
    # ncu prints the metrics of a launch in name order: this one (smsp__) is its last.
    /smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct/ {printf "%s %s %s us, %s requests, %s sectors, %s %% used, %s conflicts (stores %s)\n", c, k, t, rq, se, $NF, bc, bs}
  ' "$f" | tee -a "$OUT"/sectors.txt
done
