#!/usr/bin/env bash
# Session 5, streak 2: the chosen build's fault matrix (selftest on both GPUs, the default
# models: its new mma-row-order row on the built-in Q8_0 model with --mma on) and, when the
# build changed the tensor-core decode kernel (the fused prep), the 8B shape's decode under
# auto (mma): every arm at N = 1, 2, 4, 8 with B = 8, soaks x20 on one GPU and over two.
set -u
OUT=$1; B=$(cat /tmp/bin/CHOICE); W=/tmp/bl; mkdir -p $OUT $W/r
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-72s %s\n' "$1" "$2" | tee -a $S; }
row "BIN" "$B $($B --version)"
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
timeout 200 $B selftest --backend cuda --runs 2 --out $W/selftest > $W/selftest.txt 2>&1
row "selftest (2 GPUs, 2 runs) exit $? at $(el) s" "$(tail -2 $W/selftest.txt | head -1 | cut -c1-100)"
grep -E "mma-row-order|clean-" $W/selftest.txt | cut -c1-200 >> $S
cp $W/selftest/selftest.json $OUT/ 2>/dev/null
if [ -f $L8 ] && [ "${L8VAL:-1}" = 1 ]; then
  for n in 1 2 4 8; do
    d=$(python3 -c "print(','.join(['0']*$n))")
    $B --backend cuda -q --model $L8 --stages $n --devices $d --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --receipt $W/r/g-l8-$n.json > $W/g-l8-$n.txt 2>&1
    row "gate l8 (auto: mma) N=$n B=8 exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/g-l8-$n.txt | awk '{print $1, $2}' | tr '\n' ' ') at $(el) s"
  done
  for spec in "l8-1gpu|--stages 2 --devices 0,0" "l8-2gpu|--stages 2 --devices 0,1"; do
    IFS='|' read -r name pl <<< "$spec"
    timeout 120 $B soak --backend cuda -q --runs 20 --model $L8 $pl --arms pipelined,batched --batch 8 --gen-len 24 --out $W/soak-$name > $W/soak-$name.txt 2>&1
    row "soak x20 $name (auto: mma) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
    find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
  done
fi
tar czf $OUT/bl.tgz -C $W r $(cd $W && ls *.txt) 2>/dev/null
cat $S
