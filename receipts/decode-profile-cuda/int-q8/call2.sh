#!/usr/bin/env bash
# Issue 30 step 39, call 2 (after call 1, the machine warm): the speeds of N against O (call1.sh
# names them), builds alternating, two rounds (scripts/decode-ab.sh: `bench --arms batched
# --batch 8 --steps 128`, eager and B=8 aggregate tok/s; --batch 8 turns --mma auto on for
# every format, so its eager line is O's f16 route against N's integer one), on l8q8 (the
# table's Q8_0 row), qw05 and q3 (narrow Q8_0 shapes) and gemq4km (the Gemma-3 Q4_K_M mix:
# Q8_0 fallbacks and head); prefill512 of l8q8 and gemq4km (PREFILL: their prime bits at
# chunks 512 and 37 too, which differ by design where Q8_0 matrices are: same.txt); then
# eager.txt, the decode-only eager the table reads (`bench --arms eager --steps 128`, --mma
# auto: O's FFMA against N's integer route), and PPN_CUDA_PROF's per-op microseconds of both.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8/call2.sh
set -u
O=.stage/bin/O N=.stage/bin/N
SAME= SPEED="l8q8 qw05 q3 gemq4km" PREFILL="l8q8 gemq4km" ROUNDS=2 \
  timeout 400 scripts/decode-ab.sh O=$O N=$N > $OUT/ab.log 2>&1
echo "decode-ab exit $?"
E=$OUT/eager.txt; : > $E
for r in 1 2; do
  for b in O N; do
    for md in auto on; do
      echo "l8q8 $b --mma $md: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/l8q8.gguf --mma $md --arms eager --steps 128 2>&1 | grep -E 'tok/s' | head -2 | tr '\n' ' ')" >> $E
    done
  done
done
for b in O N; do
  echo "== $b" >> $OUT/prof.txt
  PPN_CUDA_PROF=1 .stage/bin/$b bench --backend cuda --model /tmp/ab/l8q8.gguf --arms pipelined --steps 64 2>&1 \
    | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -14 >> $OUT/prof.txt
done
tail -1 /root/lc.log
cat $OUT/speed.txt $OUT/prefill.txt $E $OUT/same.txt
