#!/usr/bin/env bash
# One GPU: the CUDA backend's forced fault holds (Backend::hold_until_next on CUDA: the
# `hold_wait` / `hold_put` kernels of sched.cu). O = main 9e5d253's build (.stage/bin/M, no
# hold on CUDA), N = the holds' build with the write-after-read rows' selftest placement on
# the built-in model (.stage/bin/N2). Proves, on the machine it runs on:
#  gates.txt  small-model-h100.txt's part 2 (boundary races the rule admits that PASSed on the
#             built-in model) and the two that gpu-validate's cli hunt found: O PASSes them as
#             then, N FAILs every run; the selftest placements of no-war-guard, single-slot and
#             slot-first-use on the built-in model FAIL every run with N (5 each); clean
#             controls PASS with N and their receipts `diff` same against O's; each gate's
#             seconds (a hold that waits out its 200 ms limit shows there)
#  cli/       gpu-validate's cli section with N (hunt pinned to single-slot: every trial
#             that opens it catches it)
#  selftest.txt  `selftest --backend cuda --runs 3` with N: every fault caught every run,
#             every control PASS, no 2.5 GB model built
set -u
OUT=${OUT:?}
O=.stage/bin/M N=.stage/bin/N2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
g() { # g BIN WANT ARGS...: one gate: its exit, the exit wanted, its milliseconds, first verdict
  local b=$1 want=$2; shift 2
  local t0=$(date +%s%N) rc ms
  timeout 120 $b --backend cuda -q "$@" --receipt /tmp/fh.json > /tmp/g.out 2>&1; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s exit %s want %s %6d ms : %s :: %s\n' "$(basename $b)" $rc $want $ms "$*" \
    "$(grep -E 'PASS|FAIL|error' /tmp/g.out | head -1 | cut -c1-110)"
}
{
for b in $O $N; do
  w=$([ $b = $N ] && echo 1 || echo any)
  for r in 1 2 3; do
    g $b $w --stages 2 --arms pipelined --prompt-len 1 --gen-len 2 --fault single-slot
    g $b $w --stages 2 --arms pipelined --prompt-len 1 --gen-len 3 --fault no-war-guard
    g $b $w --stages 2 --arms prime --chunk 8 --prompt-len 8 --gen-len 8 --repeat 1 --window 8 --fault single-slot
    g $b $w --stages 2 --fault single-slot
    g $b $w --stages 2 --arms serve --fault single-slot
  done
done
for f in no-war-guard single-slot slot-first-use; do
  for r in 1 2 3 4 5; do g $N 1 --stages 2 --splits 1 --window 8 --arms pipelined --fault $f; done
done
for a in "--stages 2" "--stages 2 --splits 1 --window 8 --arms pipelined" "--stages 4 --window 4"; do
  $O --backend cuda -q $a --receipt /tmp/o.json >/dev/null 2>&1
  g $N 0 $a
  cp /tmp/fh.json /tmp/n.json
  echo "diff O N ($a): $($N diff /tmp/o.json /tmp/n.json 2>&1 | tail -1)"
done
} > $OUT/gates.txt 2>&1
cat $OUT/gates.txt | cut -c1-150
SECTIONS=cli scripts/gpu-validate.sh $N $OUT/cli 2>&1 | grep -E 'cli|total|opened'
timeout 400 $N selftest --backend cuda --runs 3 > $OUT/selftest.txt 2>&1; echo "selftest exit $?"
tail -30 $OUT/selftest.txt
