#!/usr/bin/env bash
# Session 5, streak 1 (nvidia-h200-x2). B = bb8bfd3 (main), M = mma32 (81ee045+6136b9b).
# 1. Q4_K bit equality M vs B under --mma on (mma32 restructures the Q4_K kernels);
# 2. gpu-mma32.sh with M: gates, faults, bench (prefill512 / B=8 / eager, off vs on), acc;
# 3. the fault matrix on the tensor-core engine: selftest on a 4-layer 4096-wide Q4_K file (B, auto).
set -u
OUT=$1; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/bin /tmp/a1/r /tmp/a1/m $OUT
cp .stage/bin/B8 /tmp/bin/B; cp .stage/bin/M32 /tmp/bin/M; chmod +x /tmp/bin/*
B=/tmp/bin/B; M=/tmp/bin/M; W=/tmp/a1
S=$OUT/summary.txt; row() { printf '%-70s %s\n' "$1" "$2" | tee -a $S; }
nvidia-smi -L >> $S
$B synth --preset llama8b --layers 2 --vocab 8192 --quant q4_k -o $W/m/w2.gguf > /dev/null 2>&1
( $B synth --preset llama8b --layers 4 --vocab 8192 --quant q4_k -o $W/m/w4.gguf > /dev/null 2>&1 ) &
SP=$!
for bin in B M; do
  $W/../bin/$bin --backend cuda -q --model $W/m/w2.gguf --mma on --stages 2 --devices 0,0 --arms eager,pipelined,batched --batch 8 --gen-len 24 --receipt $W/r/dec-$bin.json > $W/dec-$bin.txt 2>&1
  row "q4k decode N=2 B=8 --mma on bin $bin exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/dec-$bin.txt | awk '{print $1, $2}' | tr '\n' ' ')"
  $W/../bin/$bin --backend cuda -q --model $W/m/w2.gguf --mma on --stages 2 --devices 0,0 --arms prime,verify --prompt-len 40 --chunk 1,8,16,40 --gen-len 8 --receipt $W/r/pv-$bin.json > $W/pv-$bin.txt 2>&1
  row "q4k prime,verify N=2 --mma on bin $bin exit $?" "$(grep -E '^(prime|verify) ' $W/pv-$bin.txt | awk '{print $1, $2}' | tr '\n' ' ')"
done
for k in dec pv; do $B diff $W/r/$k-B.json $W/r/$k-M.json > $W/diff-$k.txt 2>&1; row "diff q4k $k: main vs mma32 (exit 0 = same)" "$? $(head -1 $W/diff-$k.txt | cut -c1-50)"; done
row "part 1 done" "$(el) s"
WORK=/tmp/gpu-mma32 timeout 300 .stage/calls5/scripts/gpu-mma32.sh $M /tmp/a1/m32 $OUT/m32 > /dev/null 2>&1
row "gpu-mma32.sh exit $?" "$(el) s"
cat $OUT/m32/summary.txt >> $S
wait $SP
timeout $(( 560 - $(el) )) $B selftest --backend cuda --model $W/m/w4.gguf --runs 2 --out $W/selftest > $W/selftest.txt 2>&1
row "selftest 4-layer 4096-wide Q4_K (auto: mma), 2 GPUs, 2 runs, exit $?" "$(el) s"
cp $W/selftest.txt $OUT/selftest.txt; cp $W/selftest/selftest.json $OUT/selftest-mma.json 2>/dev/null
tar czf $OUT/a1r.tgz -C $W r 2>/dev/null
cat $S
