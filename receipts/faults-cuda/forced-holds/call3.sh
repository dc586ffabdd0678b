#!/usr/bin/env bash
# One GPU: the build as committed (.stage/bin/H: the holds, and 32 hardware queues a device
# set by the process itself under --fault, selftest and battery). Proves (hunt-final.txt):
# `--stages 8 --fault single-slot` and no-war-guard's hunt finding (call2.sh: PASS with the
# driver's 8 queues) FAIL; `hunt --fault F --trials 12` with call2.sh's seeds for single-slot
# and no-war-guard: every trial that opens F catches it, no finding.
set -u
OUT=${OUT:?}
H=.stage/bin/H
{
for a in "--stages 8 --fault single-slot" "--stages 8 --arms pipelined,batched,prime,verify --repeat 1 --draft 1 --window 10 --batch 3 --prompt-len 7 --gen-len 2 --pdl on --mma off --fault no-war-guard"; do
  t0=$(date +%s%N); timeout 100 $H --backend cuda -q $a > /tmp/o.txt 2>&1; rc=$?
  echo "exit $rc (1 = FAIL wanted) $(( ($(date +%s%N)-t0)/1000000 )) ms : $a :: $(grep -E 'FAIL|PASS' /tmp/o.txt | tr -s ' ' | cut -c1-60 | tr '\n' '|')"
done
for fs in no-war-guard:702 single-slot:703; do
  f=${fs%%:*}; s=${fs##*:}
  timeout 200 $H hunt --backend cuda --trials 12 --seed $s --fault $f --out /tmp/hunt3-$f > /tmp/h.txt 2>&1
  echo "hunt --fault $f --trials 12 --seed $s: exit $? :: $(grep -E '^hunt:|^fault ' /tmp/h.txt | tr '\n' ' ')"
  grep -E '^finding' -A2 /tmp/h.txt
done
} 2>&1 | tee $OUT/hunt-final.txt
