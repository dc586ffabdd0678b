#!/usr/bin/env bash
# Session 4, last call (fresh machine, no llama.cpp): soaks of the tensor-core path under
# --mma auto (F = 321a6bb) and F's own bench on the 8B/70B Q4_K shapes.
set -u
OUT=$1; mkdir -p $OUT /tmp/bin /tmp/c6; cp .stage/bin/F /tmp/bin/F; chmod +x /tmp/bin/F
S=$OUT/summary.txt; B=/tmp/bin/F; W=/tmp/c6; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-72s %s\n' "$1" "$2" | tee -a $S; }
$B synth --preset llama8b --layers 2 --vocab 8192 --quant q4_k -o $W/w.gguf > /dev/null 2>&1
$B synth --preset llama8b --layers 8 --quant q4_k -o $W/l8.gguf > /dev/null 2>&1 &
for spec in "w|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24" \
            "w-2gpu|--stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24" \
            "w-prime|--stages 2 --arms prime --repeat 5 --chunk 1,8,16,64 --prompt-len 64 --gen-len 8"; do
  name=${spec%%|*}; args=${spec#*|}
  timeout 70 $B soak --backend cuda -q --runs 20 --model $W/w.gguf $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "soak x20 $name (4096-wide Q4_K, 2 layers, auto: mma) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
done
wait
timeout 150 $B soak --backend cuda -q --runs 20 --model $W/l8.gguf --stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24 --out $W/soak-l8-2gpu > $W/soak-l8-2gpu.txt 2>&1
row "soak x20 l8-2gpu (8B shape Q4_K, auto: mma, 0,1, B=8) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-l8-2gpu.txt | head -1) at $(el) s"
timeout 60 $B bench --backend cuda --model $W/l8.gguf --stages 1 --arms batched --batch 8 --steps 64 > $W/bench-l8.txt 2>&1
row "bench l8 (auto) exit $?" "$(grep -E '^\s+(eager|batched)' $W/bench-l8.txt | tr -s ' ' | tr '\n' ' ')"
tar czf $OUT/c6.tgz -C $W $(cd $W && ls *.txt) 2>/dev/null
cat $S
