#!/usr/bin/env bash
# One GPU, the same warm machine as call.sh, N = the holds' build (.stage/bin/N2). Proves:
#  hunt.txt      `hunt --fault F --trials 12` for every fault a hold forces (rx-no-wait,
#                no-war-guard, single-slot, slot-first-use, shared-scratch, no-exit-publish,
#                no-reverse-publish) on the built-in model: no blind spot, no hang, no crash
#                (each F's "opened in K trials (K caught)" line)
#  selftest20.txt `selftest --backend cuda --runs 20`: every fault caught 20/20, every control
#                passes 20/20 (the README's measured claim, on the built-in model)
set -u
OUT=${OUT:?}
N=.stage/bin/N2
s=700
for f in rx-no-wait no-war-guard single-slot slot-first-use shared-scratch no-exit-publish no-reverse-publish; do
  s=$((s + 1))
  timeout 150 $N hunt --backend cuda --trials 12 --seed $s --fault $f --out /tmp/hunt-$f > /tmp/h.txt 2>&1
  echo "hunt --fault $f --trials 12 --seed $s: exit $? :: $(grep -E '^hunt:|^fault ' /tmp/h.txt | tr '\n' ' ')"
  grep -E '^finding' -A2 /tmp/h.txt
done | tee $OUT/hunt.txt
timeout 300 $N selftest --backend cuda --runs 20 > $OUT/selftest20.txt 2>&1; echo "selftest x20 exit $?"
grep -E 'caught|passed|selftest' $OUT/selftest20.txt | sed 's/  */ /g' | cut -c1-160
