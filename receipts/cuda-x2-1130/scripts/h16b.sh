#!/usr/bin/env bash
# #16 on a realistic shape: the 8B-shaped 8-layer Q4_K model (synthesized here), N=4
# pipelined traced on one GPU and over two (0,0,1,1): trace-check, traced vs untraced diff, SVG.
set -u
OUT=$1; B=.stage/ppn-gate-f; M=/tmp/l8.gguf; W=/tmp/h16b; mkdir -p $OUT $W
S=$OUT/summary.txt
$B synth --preset llama8b --layers 8 --quant q4_k -o $M > /dev/null 2>&1
NG=$(nvidia-smi -L | wc -l); echo "GPUs $NG" >> $S
for devs in 0,0,0,0 0,0,1,1; do
  [ $devs = 0,0,1,1 ] && [ $NG -lt 2 ] && continue
  tag=n4-${devs//,/}
  $B --backend cuda -q --model $M --stages 4 --devices $devs --receipt $W/$tag-plain.json > $W/$tag-plain.txt 2>&1
  echo "$tag plain exit $?" >> $S
  $B --backend cuda -q --model $M --stages 4 --devices $devs --receipt $W/$tag-traced.json --trace $OUT/$tag.trace.json > $W/$tag-traced.txt 2>&1
  echo "$tag traced exit $?: $(grep trace: $W/$tag-traced.txt)" >> $S
  $B diff $W/$tag-plain.json $W/$tag-traced.json 2>&1 | head -1 >> $S
  for ph in pipelined batched eager; do
    echo "-- trace-check $tag $ph" >> $S
    $B trace-check $OUT/$tag.trace.json --phase $ph >> $S 2>&1; echo "exit $?" >> $S
  done
done
python3 scripts/trace-svg.py $OUT/n4-0000.trace.json $OUT/cuda-l8-n4-pipelined.svg --steps 4:10 --flows >> $S 2>&1
[ -f $OUT/n4-0011.trace.json ] && python3 scripts/trace-svg.py $OUT/n4-0011.trace.json $OUT/cuda-l8-n4-2gpu-pipelined.svg --steps 4:10 --flows >> $S 2>&1
cp $W/*-traced.json $OUT/ 2>/dev/null
ls -la $OUT; cat $S
