#!/usr/bin/env bash
# Session 3, two H200s: the prime and verify arms of 961a50f (attention_rows) across the two
# GPUs on the real models: scripts/gpu-h13.sh with GPUS=2 (gates N=1,2,4,8, faults,
# soak x20, fingerprints), then 100-position primes (chunks up to 100 rows) at N=4 over 0,0,1,1.
set -u
OUT=$1; B=/tmp/bin/N; mkdir -p $OUT /tmp/x2/r; S=$OUT/summary.txt
bash .stage/calls/asm.sh | tee -a $S
GPUS=2 SECTIONS="gates faults soak fp" bash scripts/gpu-h13.sh $B models $OUT/h13 > /dev/null 2>&1
echo "gpu-h13 (GPUS=2) exit $?" >> $S; cat $OUT/h13/summary.txt >> $S
for f in smol:models/SmolLM2-135M-Instruct.Q4_1.gguf gemma:models/gemma-3-270m-q4_k_m.gguf; do
  $B --backend cuda -q --model ${f#*:} --stages 4 --devices 0,0,1,1 --arms prime,verify --prompt-len 100 --gen-len 24 --chunk 1,8,16,64,100 --receipt /tmp/x2/r/pv-${f%%:*}.json > /tmp/x2/pv-${f%%:*}.txt 2>&1
  printf '%-58s %s\n' "prime,verify ${f%%:*} N=4 0,0,1,1 prompt 100 exit $?" "$(grep -E '^(prime|verify)' /tmp/x2/pv-${f%%:*}.txt | cut -c1-40 | tr '\n' ' ')" >> $S
done
tar czf $OUT/x2.tgz -C /tmp/x2 .
cat $S
