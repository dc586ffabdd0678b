#!/usr/bin/env bash
# Issue 30 steps 30 and 31, call 4 (after calls 1-3, the same session): the integer route's
# timing laws at more stages and full depth, with N6 (33efeab's build). Proves, in
# soak-gates.txt: soaks x20 of every arm (eager, pipelined, batched B=8, prime chunk 16,
# verify) on a 4-layer 4096-wide Q4_K_M file (its Q4_K and Q6_K matrices on the integer route
# under both settings) at N = 2 and 3 on one GPU, under --mma auto and on: 20/20 each; and
# every arm's gate on the full-depth 8B Q4_K_M file (32 layers, 4.4 GB) at N = 2 and 4 under
# both settings: exit 0 (the gate exits 1 on any FAIL; -q prints no verdict line, so the
# grep after each `exit` finds none). Run as OUT=$OUT receipts/.../call4.sh, .stage carried.
N=.stage/bin/N6; W=/tmp/s; mkdir -p $W; R=$OUT/extra.txt; : > $R; nvidia-smi -L >> $R
$N synth --preset llama8b --layers 4 --quant q4_k_m --seed 5 -o $W/l8b.gguf > /dev/null
( $N synth --preset llama8b --quant q4_k_m --seed 3 -o $W/l32.gguf > /dev/null 2>&1 ) &
for n in 2 3; do d=$(printf '0%.0s,' $(seq $n)); d=${d%,}; for md in auto on; do
$N soak --runs 20 --backend cuda -q --mma $md --model $W/l8b.gguf --stages $n --devices $d --arms eager,pipelined,batched,prime,verify --batch 8 --chunk 16 --prompt-len 40 --gen-len 24 --out $W/soak-$n-$md > $W/soak-$n-$md.txt 2>&1
echo "soak x20 l8b-q4km N=$n --mma $md: exit $? $(grep -E '^[0-9]+/20 ' $W/soak-$n-$md.txt | tail -1)" >> $R; done; done
wait
for n in 2 4; do d=$(printf '0%.0s,' $(seq $n)); d=${d%,}; for md in auto on; do
timeout 120 $N --backend cuda -q --mma $md --model $W/l32.gguf --stages $n --devices $d --arms eager,pipelined,batched,prime,verify --batch 8 --chunk 16 --prompt-len 40 --gen-len 16 > $W/g.txt 2>&1
echo "gate l32-q4km (full depth) N=$n --mma $md: exit $? $(grep -oE '(eager|pipelined|batched|prime|verify) (PASS|FAIL)' $W/g.txt | tr '\n' ' ')" >> $R; done; done
cat $R
