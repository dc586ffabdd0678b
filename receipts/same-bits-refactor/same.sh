#!/usr/bin/env bash
# Before/after: the receipts of one set of CUDA gates made by the build before this session's
# changes (OLD) and after them (NEW) must `diff` same. Usage: same.sh OLD NEW OUTDIR
set -u
OLD=$1 NEW=$2 OUT=$3; mkdir -p "$OUT/r" /tmp/sm; S="$OUT/summary.txt"; : >"$S"; bad=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$S"
echo "old: $($OLD --version)  new: $($NEW --version)" >>"$S"
$NEW synth --preset llama8b --layers 4 --quant q4_k_m --seed 5 -o /tmp/sm/l8b.gguf >/dev/null 2>&1
Q=.stage/synth-qwen2-L4-E256
A=eager,pipelined,batched,prime,verify
i=0
while IFS= read -r g; do
  i=$((i+1))
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    $bin --backend cuda -q $g --receipt "$OUT/r/g$i-$b.json" >"$OUT/r/g$i-$b.log" 2>&1; echo $? >"$OUT/r/g$i-$b.rc"
  done
  ro=$(cat "$OUT/r/g$i-old.rc") rn=$(cat "$OUT/r/g$i-new.rc")
  d=$($NEW diff "$OUT/r/g$i-old.json" "$OUT/r/g$i-new.json" 2>&1 | head -3 | tr '\n' ' '); dr=$?
  v=same; [[ $d == same* ]] || { v="DIFFERS: $d"; bad=1; }
  [ "$ro$rn" = 00 ] || { v="$v (rc old $ro new $rn)"; bad=1; }
  printf 'g%-2s %-100s %s\n' $i "$g" "$v" >>"$S"
done <<GATES
--stages 1 --arms $A
--stages 2 --arms $A --batch 4
--stages 4 --arms $A --window 4
--stages 3 --transport host --arms eager,pipelined,batched
--model $Q.gguf --tape $Q.tapeA.json --stages 2 --arms $A --topk 20
--model $Q.gguf --stages 4 --splits 1,2,3 --arms $A --batch 3
--model /tmp/sm/l8b.gguf --stages 2 --arms $A --mma on
--model /tmp/sm/l8b.gguf --stages 2 --arms $A --mma auto --chunk 64 --prompt-len 70 --gen-len 8
--model /tmp/sm/l8b.gguf --stages 3 --arms eager,pipelined --graphs off --pdl off
GATES
echo "overall: $([ $bad = 0 ] && echo same || echo DIFFERS)" >>"$S"
cat "$S"
