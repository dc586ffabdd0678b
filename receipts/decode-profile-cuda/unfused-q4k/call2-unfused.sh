#!/usr/bin/env bash
# Issue 30 step 23, call 2: O against U (call1's builds). Proves: U's bits equal O's (every
# arm and serve at N = 2 on four files, call2-same.txt); eager on the 70B slice (control: all
# its one-row launches were unfused already) and the Q8_0 slice (call2-speed.txt); eager of
# the narrow shapes under --mma on, where the fused kernel was measured best (call2-narrow-on.txt).
set -u
SAME="l8q4k:auto l4m:on smol:on l2q8:auto" SPEED="l70 l2q8" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O U=.stage/bin/U
cat $OUT/same.txt; grep eager $OUT/speed.txt
for m in smol gem qw05 q3; do
  [ -f /tmp/ab/$m.gguf ] || .stage/bin/O synth $(. scripts/shapes.sh; echo ${SHAPES[$m]}) -o /tmp/ab/$m.gguf > /dev/null
done
for r in 1 2; do for m in smol gem qw05 q3; do for b in O U; do
  echo "$m $b --mma on: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/$m.gguf --mma on --arms batched --batch 8 --steps 128 2>&1 | grep -E 'eager +\(' )"
done; done; done | tee $OUT/narrow-on.txt
