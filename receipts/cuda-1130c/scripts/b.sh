#!/usr/bin/env bash
# Session 3 call 2: N (one attention launch per kv pass, matvec grids of many row tiles
# share residency, last-row prefill) against H (fe04a20): bits on three synthetic shapes
# (decode arms and prime/verify with chunks past 8 and 64 rows), prefill profile, eager ncu.
set -u
OUT=$1; mkdir -p /tmp/bin /tmp/m /tmp/v/r; cp .stage/bin/H .stage/bin/N /tmp/bin/; chmod +x /tmp/bin/*
S=$OUT/summary.txt; W=/tmp/v
row() { printf '%-60s %s\n' "$1" "$2" | tee -a $S; }
H=/tmp/bin/H; N=/tmp/bin/N
$H synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 4096 --quant q8_0 -o /tmp/m/sg.gguf > /dev/null 2>&1
$H synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o /tmp/m/sl.gguf > /dev/null 2>&1
$H synth --arch llama --layers 4 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 4096 --quant q4_1 -o /tmp/m/ss.gguf > /dev/null 2>&1
$H synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o /tmp/m/smol.gguf > /dev/null 2>&1
$H synth --preset llama8b --layers 8 --quant q4_k -o /tmp/m/l8.gguf > /dev/null 2>&1 &
$H synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0 -o /tmp/m/gemma.gguf > /dev/null 2>&1 &
G="--backend cuda -q --stages 3 --devices 0,0,0 --batch 5 --window 4 --prompt-len 40 --gen-len 230"
P="--backend cuda -q --stages 3 --devices 0,0,0 --arms prime,verify --chunk 1,8,13,64,100,150 --repeat 2 --prompt-len 150 --gen-len 40"
for m in sg sl ss; do
  for b in H N; do
    /tmp/bin/$b $G --model /tmp/m/$m.gguf --receipt $W/r/$m-$b.json > $W/$m-$b.txt 2>&1; e1=$?
    /tmp/bin/$b $P --model /tmp/m/$m.gguf --receipt $W/r/$m-$b-p.json > $W/$m-$b-p.txt 2>&1; e2=$?
    row "$m $b gate / prime,verify gate exit" "$e1 / $e2"
  done
  $H diff $W/r/$m-H.json $W/r/$m-N.json > $W/diff-$m.txt 2>&1; row "diff $m H vs N decode arms (0 same)" "$? $(head -1 $W/diff-$m.txt | cut -c1-50)"
  $H diff $W/r/$m-H-p.json $W/r/$m-N-p.json > $W/diff-$m-p.txt 2>&1; row "diff $m H vs N prime,verify (0 same)" "$? $(head -1 $W/diff-$m-p.txt | cut -c1-50)"
done
for m in sg ss; do
  $N $P --graphs off --model /tmp/m/$m.gguf --receipt $W/r/$m-Ng0-p.json > $W/$m-Ng0-p.txt 2>&1; e=$?
  $H diff $W/r/$m-H-p.json $W/r/$m-Ng0-p.json > $W/diff-$m-g0.txt 2>&1; row "N graphs off prime,verify $m exit / diff vs H" "$e / $? $(head -1 $W/diff-$m-g0.txt | cut -c1-30)"
done
# the fault the one-launch attention could hide: chunk-kv-order on a 100-row chunk
$N --backend cuda -q --model /tmp/m/ss.gguf --stages 2 --arms prime --chunk 100 --repeat 1 --prompt-len 100 --gen-len 8 --fault chunk-kv-order > $W/fault.txt 2>&1; row "N --fault chunk-kv-order C=100 (want 1)" "$?"
wait
for m in smol gemma; do
  bs=N
  for b in $bs; do
    timeout 150 /tmp/bin/$b bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms prime --chunk 64,512 --prompt-len 512 --steps 32 > $W/bench-$m-$b.txt 2>&1
    row "bench $m $b exit" "$?"; grep -E "eager|prefill|prime " $W/bench-$m-$b.txt | tee -a $S
  done
  PPN_CUDA_PROF=1 timeout 120 $N bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms prime --chunk 512 --prompt-len 512 --steps 2 > $W/prof-$m.txt 2>&1
  grep "cuda prof stage" $W/prof-$m.txt | head -14 >> $S
done
tar czf $OUT/v.tgz -C $W .
cat $S
