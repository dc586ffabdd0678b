#!/usr/bin/env bash
# Session 3 call 1: where a 512-row prime chunk's time goes (issue 13), one H200.
set -u
OUT=$1; B=/tmp/bin/H; mkdir -p /tmp/bin /tmp/m; cp .stage/bin/H $B; chmod +x $B
S=$OUT/summary.txt
which nsys ncu >> $S 2>&1; nvidia-smi -L >> $S
$B synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o /tmp/m/smol.gguf > /dev/null 2>&1
$B synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q4_k_m -o /tmp/m/gemma.gguf > /dev/null 2>&1
$B synth --preset llama8b --layers 8 --quant q4_k -o /tmp/m/l8.gguf > /dev/null 2>&1
ls -la /tmp/m >> $S
for m in smol gemma l8; do
  timeout 120 $B bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms prime --chunk 64,512 --prompt-len 512 --steps 8 > $OUT/bench-$m.txt 2>&1
  echo "== $m bench exit $?" >> $S; grep -i "prefill\|eager" $OUT/bench-$m.txt >> $S
  PPN_CUDA_PROF=1 timeout 120 $B bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms prime --chunk 512 --prompt-len 512 --steps 2 > $OUT/prof-$m.txt 2>&1
  echo "== $m prof exit $?" >> $S
done
tail -c 3000 $OUT/prof-smol.txt >> $S
cat $S
