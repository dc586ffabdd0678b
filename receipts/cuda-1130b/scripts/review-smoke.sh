#!/usr/bin/env bash
# Review mends smoke: N2 (0a65103) against N1 on synthetic shapes: logits same, graphs on/off,
# a fault still caught with graphs on, eager speed unchanged.
set -u
OUT=$1; W=/tmp/w; mkdir -p $W/r
row() { printf '%-44s %s\n' "$1" "$2" | tee -a $OUT/summary.txt; }
B=.stage/bin
$B/N1 synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o $W/smol.gguf > /dev/null 2>&1
$B/N1 synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 4096 --quant q8_0 -o $W/g.gguf > /dev/null 2>&1
$B/N1 synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o $W/l.gguf > /dev/null 2>&1
for m in smol g l; do
  for v in "N1|N1|" "N2|N2|" "N2g0|N2|--graphs off"; do IFS='|' read -r name b extra <<< "$v"
    $B/$b --backend cuda -q --model $W/$m.gguf --stages 3 --batch 8 --window 4 --prompt-len 20 --gen-len 60 $extra --receipt $W/r/$m-$name.json > /dev/null 2>&1; echo -n "$m $name rc=$? " >> $W/rc.txt
  done
  for v in N2 N2g0; do row "diff $m N1 vs $v" "$($B/N2 diff $W/r/$m-N1.json $W/r/$m-$v.json 2>&1 | head -2 | tr '\n' ' ' | sed 's#/tmp/w/r/##g')"; done
done
row "gates" "$(cat $W/rc.txt)"
$B/N2 --backend cuda -q --model $W/smol.gguf --stages 4 --window 4 --jitter-us 300 --fault no-war-guard --arms pipelined > /dev/null 2>&1; row "fault no-war-guard (want exit 1)" "exit $?"
$B/N2 --backend cuda -q --model $W/smol.gguf --stages 4 --window 4 --jitter-us 300 --fault shared-scratch > /dev/null 2>&1; row "fault shared-scratch (want exit 1)" "exit $?"
for b in N1 N2 N1 N2; do row "bench smol eager $b" "$($B/$b bench --backend cuda --model $W/smol.gguf --stages 1 --arms eager --steps 128 2>&1 | grep -E '^  eager' | tr -s ' ' | cut -c1-60)"; done
cat $OUT/summary.txt
