#!/usr/bin/env bash
# Issue 30 step 23, call 3: O against N (O with Q4_K one-row launches of >= 4096 inputs
# unfused, the first form of the rule). Proves: the same bits (call3-same.txt), eager and B=8
# (call3-speed.txt), per-op times (call3-prof.txt); and on two narrow all-Q4_K files under
# --mma on, O / N / U (N = O there), whether the rule should take every width
# (call3-narrow-q4k.txt: it should).
set -u
SAME="l8q4k:auto l4m:on l2q8:auto" SPEED="l8q4k l32 l2q8" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N
cat $OUT/same.txt; grep eager $OUT/speed.txt
.stage/bin/N synth --arch qwen3 --layers 28 --embd 1024 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --vocab 32000 --tied --quant q4_k -o /tmp/ab/q3k.gguf > /dev/null &
.stage/bin/N synth --layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --quant q4_k -o /tmp/ab/l1b.gguf > /dev/null &
wait
for r in 1 2; do for m in q3k l1b; do for b in O N U; do
  echo "$m $b --mma on: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/$m.gguf --mma on --arms batched --batch 8 --steps 128 2>&1 | grep -E 'eager +\(' )"
done; done; done | tee $OUT/narrow-q4k.txt
