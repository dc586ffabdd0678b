#!/usr/bin/env bash
# One GPU: `--fault shared-scratch` with its forced order (stage 0 writes the shared scratch
# only after stage 1 received the step before; hunt seed 197's blind spot on the CPU) on
# CUDA, where the same walk code runs. C = the fix's build (.stage/bin/C).
# Proves (gates.txt): on the built-in model at N = 2 on one GPU, the serve arm of one request
# FAILs under the fault in each of 3 runs whichever arm runs first (eager, verify, pipelined,
# none), and each control PASSes; no run hangs (each gate under a 60 s timeout); and
# selftest.txt: `selftest --backend cuda --runs 2` catches every fault in every run, the
# controls all PASS (shared-scratch among them, at its recipe --stages 4 --window 4).
set -u
OUT=${OUT:?}
B=.stage/bin/C
{
for arms in eager,serve verify,serve pipelined,serve serve; do
  timeout 60 $B --backend cuda --stages 2 --splits 2 --arms $arms --requests 1 -q; echo "$arms control exit $?"
  for r in 1 2 3; do
    timeout 60 $B --backend cuda --stages 2 --splits 2 --arms $arms --requests 1 --fault shared-scratch -q
    echo "$arms shared-scratch run $r exit $? (1 = FAIL expected)"
  done
done
} > $OUT/gates.txt 2>&1
grep exit $OUT/gates.txt
timeout 200 $B selftest --backend cuda --runs 2 > $OUT/selftest.txt 2>&1; echo "selftest exit $?"
grep -E "shared-scratch|selftest PASS|selftest FAIL" $OUT/selftest.txt
