#!/usr/bin/env bash
set -u
OUT=$1; mkdir -p $OUT; S=$OUT/summary.txt; B=/tmp/bin/F; W=/tmp/s0
ROWS="llama8b-l8-q4_k llama70b-l2-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama8b-l32-q4_k_m" PREFILL_ROWS="llama8b-l8-q4_k" \
  LLAMA_BIN=/tmp/lcb/llama.cpp/build/bin MODELS=models COMMIT=321a6bb DEADLINE_S=260 \
  bash scripts/bench-vs-llamacpp.sh $B none $OUT/b > $OUT/bench-stdout.txt 2>&1
echo "bench exit $?" | tee -a $S; tail -14 $OUT/b/summary.txt | tee -a $S
for spec in "w|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24" \
            "w-2gpu|--stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24"; do
  name=${spec%%|*}; args=${spec#*|}
  timeout 60 $B soak --backend cuda -q --runs 20 --model $W/w.gguf $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  printf '%-70s %s\n' "soak x20 $name (4096-wide Q4_K, 2 layers, auto: mma) ($args) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1)" | tee -a $S
done
tail -3 $W/soak-w.txt >> $S
