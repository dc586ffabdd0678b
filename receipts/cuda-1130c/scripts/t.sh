#!/usr/bin/env bash
# Session 3, last call: T (tree32_split: the per-group warp sums by halving transposes,
# same pairwise sums as tree32) against N (961a50f): bits on three synthetic shapes (B=8, B=4
# and B=2 tiles, prime/verify chunks up to 150 rows), then eager / B=8 / prefill512.
set -u
OUT=$1; mkdir -p /tmp/bin /tmp/m /tmp/v/r $OUT; cp .stage/bin/N .stage/bin/T /tmp/bin/; chmod +x /tmp/bin/*
S=$OUT/summary.txt; W=/tmp/v; N=/tmp/bin/N
row() { printf '%-60s %s\n' "$1" "$2" | tee -a $S; }
$N synth --preset llama8b --layers 8 --quant q4_k -o /tmp/m/l8.gguf > /dev/null 2>&1 &
$N synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 4096 --quant q8_0 -o /tmp/m/sg.gguf > /dev/null 2>&1
$N synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o /tmp/m/sl.gguf > /dev/null 2>&1
$N synth --arch llama --layers 4 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 4096 --quant q4_1 -o /tmp/m/ss.gguf > /dev/null 2>&1
$N synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o /tmp/m/smol.gguf > /dev/null 2>&1
$N synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0 -o /tmp/m/gemma.gguf > /dev/null 2>&1
P="--backend cuda -q --stages 3 --devices 0,0,0 --arms prime,verify --chunk 1,8,13,64,100,150 --repeat 2 --prompt-len 150 --gen-len 40"
for m in sg sl ss; do
  for B in 8 4; do
    for b in N T; do
      /tmp/bin/$b --backend cuda -q --stages 3 --devices 0,0,0 --batch $B --window 4 --prompt-len 40 --gen-len 100 --model /tmp/m/$m.gguf --receipt $W/r/$m-$b-b$B.json > $W/$m-$b-b$B.txt 2>&1; echo "$m $b b$B $?" >> $W/exits.txt
    done
    $N diff $W/r/$m-N-b$B.json $W/r/$m-T-b$B.json > $W/diff-$m-b$B.txt 2>&1; row "diff $m B=$B N vs T (0 same)" "$? $(head -1 $W/diff-$m-b$B.txt | cut -c1-30)"
  done
  for b in N T; do /tmp/bin/$b $P --model /tmp/m/$m.gguf --receipt $W/r/$m-$b-p.json > $W/$m-$b-p.txt 2>&1; echo "$m $b p $?" >> $W/exits.txt; done
  $N diff $W/r/$m-N-p.json $W/r/$m-T-p.json > $W/diff-$m-p.txt 2>&1; row "diff $m prime,verify N vs T (0 same)" "$? $(head -1 $W/diff-$m-p.txt | cut -c1-30)"
done
row "gate exits (all 0?)" "$(awk '{print $4}' $W/exits.txt | sort | uniq -c | tr '\n' ' ')"
wait
for m in smol gemma l8; do
  for b in N T; do
    timeout 100 /tmp/bin/$b bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms batched,prime --batch 8 --chunk 512 --prompt-len 512 --steps 32 > $W/bench-$m-$b.txt 2>&1
    row "bench $m $b exit $?" "$(grep -E '^  (eager|batched|prefill)' $W/bench-$m-$b.txt | awk '{for(i=1;i<=NF;i++) if ($i=="tok/s") {printf "%s ", $(i-1); break}}')"
  done
done
tar czf $OUT/t.tgz -C $W . 2>/dev/null
cat $S
