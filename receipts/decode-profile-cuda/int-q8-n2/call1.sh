#!/usr/bin/env bash
# Issue 30 step 39's open question, call 1: N2 on a GPU. N2 = 62472de (Q8_0 on the integer
# tensor cores, rn_f32(D_b) from two exact magic-number floats and one FADD: no I2F); N = the
# same tree with mma_q8_f32 as `(float)((long long)(dh * 256 + dm) * 256 + dl)` (step 39's
# first build, measured in ../int-q8); O = main's build (a4e3c80: Q8_0 decode on FFMA under
# --mma auto, its tensor-core route the f16 one). Proves:
#  bits/same.txt  N2 gives N's bits (f32-check.cpp's claim, on the GPU): `diff` same of every
#                 arm and serve at N = 2 on the 4096-wide Q8_0 slice (auto and on) and the narrow
#                 Q8_0 shapes qw05 and q3 (on), and of the prime arm at chunks 512 and 37;
#  speed/         O against N2, builds alternating, two rounds: eager and B=8 (`--batch 8`:
#                 auto takes the tensor cores for every format in both) on l8q8, qw05, q3;
#                 prefill512 on l8q8 and gemq4km (speed.txt, prefill.txt);
#  eager.txt      the decode-only eager the table reads (`bench --arms eager`, --mma auto: O's
#                 FFMA against N2's integer route), two rounds.
# On an H200 (the card issue 30's bars name) the call runs instead: bits/ as above on l8q8 and
# qw05; speed/ on l8q8 alone; then, beside llama.cpp built in the same call, vs/ (O: the
# table's Q8_0 row and the two narrow twins, smollm2-shape-q4_1 and gemma3-shape-q4_k_m, with
# their prefill512) and vs-n2/ (N2 on the Q8_0 row: the eager bar's question).
# Staged in .stage (ignored): bin/O, bin/N, bin/N2 (stripped release builds), llama.cpp.tgz.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8-n2/call1.sh
set -u
O=.stage/bin/O N=.stage/bin/N N2=.stage/bin/N2
nvidia-smi -L
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /root/lc
if nvidia-smi -L | grep -q H200; then
  SAME="l8q8:auto qw05:on" SPEED= PREFILL="l8q8" ROUNDS=1 OUT=$OUT/bits \
    timeout 120 scripts/decode-ab.sh N=$N N2=$N2 > $OUT/bits.log 2>&1
  echo "bits exit $?"; cat $OUT/bits/same.txt
  SAME= SPEED="l8q8" PREFILL="l8q8" ROUNDS=2 OUT=$OUT/speed \
    timeout 120 scripts/decode-ab.sh O=$O N2=$N2 > $OUT/speed.log 2>&1
  echo "speed exit $?"
  L="LLAMA_BIN=/root/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/root/lc.log SERVE_ROWS= RECEIPTS="
  env $L ROWS="llama8b-l8-q8_0 smollm2-shape-q4_1 gemma3-shape-q4_k_m" \
    PREFILL_ROWS="smollm2-shape-q4_1 gemma3-shape-q4_k_m" DEADLINE_S=300 \
    scripts/bench-vs-llamacpp.sh $O none $OUT/vs > $OUT/vs.log 2>&1
  echo "vs exit $?"
  env $L ROWS="llama8b-l8-q8_0" PREFILL_ROWS= DEADLINE_S=110 \
    scripts/bench-vs-llamacpp.sh $N2 none $OUT/vs-n2 > $OUT/vs-n2.log 2>&1
  echo "vs-n2 exit $?"
  rm -f $OUT/vs*/raw.tar.gz
  cat $OUT/speed/speed.txt $OUT/speed/prefill.txt $OUT/vs/summary.txt $OUT/vs-n2/summary.txt
  exit 0
fi
SAME="l8q8:auto l8q8:on qw05:on q3:on" SPEED= PREFILL="l8q8" ROUNDS=1 OUT=$OUT/bits \
  timeout 200 scripts/decode-ab.sh N=$N N2=$N2 > $OUT/bits.log 2>&1
echo "bits exit $?"; cat $OUT/bits/same.txt
SAME= SPEED="l8q8 qw05 q3" PREFILL="l8q8 gemq4km" ROUNDS=2 OUT=$OUT/speed \
  timeout 280 scripts/decode-ab.sh O=$O N2=$N2 > $OUT/speed.log 2>&1
echo "speed exit $?"
E=$OUT/eager.txt; : > $E
for r in 1 2; do
  for b in O N2; do
    echo "l8q8 $b auto: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/l8q8.gguf --arms eager --steps 128 2>&1 | grep -E 'tok/s' | head -1)" >> $E
  done
done
cat $OUT/speed/speed.txt $OUT/speed/prefill.txt $E
tail -1 /root/lc.log
