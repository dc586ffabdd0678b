#!/usr/bin/env bash
# A/B of engine builds on the GPU machine, in one call (issue 30's steps 2 to 6 were run so):
#
#   OUT=DIR scripts/decode-ab.sh O=BIN_OLD N=BIN_NEW [M=BIN ...]
#
# What it proves, for each build after the first against the first:
#  1. the same bits: `ppn-gate diff` of receipts of every arm and serve at N = 2 (a prime
#     chunk of 64 for the GEMM, B = 8), on each file of SAME (default: the 8192-wide 70B slice
#     and the 8B l8 Q4_K slice under --mma auto, a 4-layer Q4_K_M file under --mma on).
#     Under --mma auto that run's --batch 8, --chunk 64 and serve arm put every format the
#     tensor cores cover on them for the whole run, reference included, so a file under auto
#     gets a second line, eager and pipelined alone (prompt 70, 24 generated): the one-row
#     kernels that SPEED's decode-only eager times (FFMA for every matrix auto does not give
#     the tensor cores: all of a file below 4096 wide, Q8_0 at any width). Under on and off
#     the first run already runs every kernel the second would;
#     a line per pair in $OUT/same.txt, `same: ...` or what differs (placement.resident left
#     out: the engine's scratch bytes are the build's, not the bits; every other field and
#     every logits hash compared);
#  2. the speeds: `bench --arms batched --batch 8 --steps 128` (eager and B=8 aggregate
#     tok/s) on each file of SPEED (default: the 70B slice, the 8B l8 slice, the full-depth
#     8B Q4_K_M file), the builds alternating (O, N, ..., O, N, ...) ROUNDS times (default 2)
#     so that drift shows; $OUT/speed.txt;
#  3. with PROF=1: PPN_CUDA_PROF's per-op microseconds of the first and last builds on the
#     SPEED files (events around each launch, graphs off); $OUT/prof.txt;
#  4. with PREFILL ("name ..."): the prime arm's bits at chunks of 512 and 37 rows (several
#     GEMM n-blocks and a ragged last tile) against the first build's, in same.txt, then
#     `bench --arms prime --chunk 512 --prompt-len 512` (prefill512 tok/s, last position's
#     logits), the builds alternating ROUNDS times, in $OUT/prefill.txt.
# Environment: SAME ("name:mma ..."), SPEED ("name ..."; set but empty: none), ROUNDS, PROF,
# PREFILL, SPEED_ARGS (bench's flags in part 2, default `--arms batched --batch 8 --steps
# 128`; `--arms eager --steps 128` is the bench table's decode-only eager, whose --mma auto
# keeps a file's FFMA kernels where a --batch 8 run takes the tensor cores). Names are
# those of scripts/shapes.sh (l70, l8q4k, l32, l4m, l2q8: 70B and 8B slices; smol, qw05, q3:
# narrow shapes whose decode is launch-bound, BENCH.md steps 9 and 10; gem: Gemma-3-270M's
# shape; gemq4km: the same in its real file's Q4_K_M mix), all synthesized here into /tmp/ab
# by the last build named (synth's bytes for a shape both builds know are the same).
set -u
OUT=${OUT:?OUT: where the results go}
[ $# -ge 2 ] || { echo "usage: OUT=DIR $0 NAME=BIN NAME=BIN [...]" >&2; exit 2; }
names=() ; declare -A bin
for a in "$@"; do
  n=${a%%=*} b=${a#*=}
  [ -x "$b" ] || { echo "decode-ab: $n: $b is not an executable" >&2; exit 2; }
  names+=("$n"); bin[$n]=$b
done
SAME=${SAME-"l70:auto l8q4k:auto l4m:on"}
SPEED=${SPEED-"l70 l8q4k l32"}
ROUNDS=${ROUNDS:-2}
B0=${bin[${names[0]}]}
BL=${bin[${names[-1]}]}  # the newest build: it knows every synth flag the table names
mkdir -p /tmp/ab "$OUT"
. "$(dirname "$0")"/shapes.sh
PREFILL=${PREFILL:-}
need=$(for x in $SAME $SPEED $PREFILL; do echo "${x%%:*}"; done | sort -u)
for m in $need; do
  [ -n "${SHAPES[$m]:-}" ] || { echo "decode-ab: unknown file $m (known: ${!SHAPES[*]})" >&2; exit 2; }
  [ -f /tmp/ab/$m.gguf ] || $BL synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null &
done
wait
# One line of same.txt: the first build's receipt of the gate `$2` against every other
# build's, labelled `$1`.
same_bits() {
  local n a c
  $B0 $2 --receipt /tmp/ab/r0.json > /tmp/ab/r0.txt 2>&1; a=$?
  for n in "${names[@]:1}"; do
    ${bin[$n]} $2 --receipt /tmp/ab/r1.json > /tmp/ab/r1.txt 2>&1; c=$?
    echo "$1: exit ${names[0]} $a $n $c; $($B0 diff --ignore placement.resident /tmp/ab/r0.json /tmp/ab/r1.json 2>&1 | head -4)" >> "$OUT/same.txt"
  done
}
# `bench $2` on file $1, the builds alternating ROUNDS times; the lines matching $3.
alternate() {
  local r n
  for r in $(seq "$ROUNDS"); do
    for n in "${names[@]}"; do
      ${bin[$n]} bench --backend cuda --model /tmp/ab/$1.gguf $2 2>&1 | grep -E "$3" | sed "s/^/$1 $n: /"
    done
  done
}
: > "$OUT/same.txt"
for x in $SAME; do
  m=${x%%:*} mm=${x#*:}
  same_bits "$m --mma $mm" "--backend cuda --model /tmp/ab/$m.gguf --mma $mm --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  [ "$mm" != auto ] || same_bits "$m --mma $mm decode-only" "--backend cuda --model /tmp/ab/$m.gguf --mma $mm --stages 2 --arms eager,pipelined --prompt-len 70 --gen-len 24 -q"
done
for m in $PREFILL; do
  for ch in 512 37; do
    same_bits "$m prime --chunk $ch" "--backend cuda --model /tmp/ab/$m.gguf --stages 2 --arms prime --chunk $ch --prompt-len 520 -q"
  done
done
cat "$OUT/same.txt"
for m in $PREFILL; do
  alternate $m "--arms prime --chunk 512 --prompt-len 512" "prefill +\("
done | tee "$OUT/prefill.txt"
for m in $SPEED; do
  alternate $m "${SPEED_ARGS:---arms batched --batch 8 --steps 128}" "eager +\(|batched +\(|floor"
done | tee "$OUT/speed.txt" | grep -v floor
if [ "${PROF:-0}" = 1 ]; then
  for n in "${names[0]}" "${names[-1]}"; do
    for m in $SPEED; do
      echo "=== $n $m: PPN_CUDA_PROF=1 bench --steps 64"
      PPN_CUDA_PROF=1 ${bin[$n]} bench --backend cuda --model /tmp/ab/$m.gguf --arms pipelined --steps 64 2>&1 \
        | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -12
    done
  done > "$OUT/prof.txt"
fi
