#!/usr/bin/env bash
# Session 4, validation call on one H200 (issue 12's and 13's bit bars on the build chosen by
# c0.sh, /tmp/bin/CHOICE): real models from the staged parts; oracle tapes; every arm at
# N = 1, 2, 3, 4, 8 (one GPU, one stream per stage) on SmolLM2, Gemma-3 and the 8B shape with
# B = 8 (each row against its own one-token reference); --pdl off and --graphs off against
# on (diff); soaks x20; the fault matrix; prime/verify N = 1, 2, 4, 8, prime soaks,
# the three-fingerprints experiment; the one-GPU battery.
set -u
OUT=$1; B=$(cat /tmp/bin/CHOICE 2>/dev/null || echo /tmp/bin/H); W=/tmp/v2; mkdir -p $OUT $W/r
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-70s %s\n' "$1" "$2" | tee -a $S; }
row "BIN" "$B $($B --version)"
bash .stage/calls4/asm.sh | tee -a $S
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
for spec in "smol|$SM|--stages 4 --arms pipelined,batched --window 4" \
            "gemma|$GM|--stages 3 --arms pipelined,batched --window 4" \
            "l8|$L8|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24" \
            "smol-2gpu|$SM|--stages 4 --devices 0,0,1,1 --arms pipelined,batched --window 4" \
            "gemma-2gpu|$GM|--stages 2 --devices 0,1 --arms pipelined,batched --window 4" \
            "l8-2gpu|$L8|--stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24"; do
  IFS='|' read -r name f args <<< "$spec"
  timeout 60 $B soak --backend cuda -q --runs 20 --model $f $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "soak x20 $name ($args) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
  find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
for f in smol:$SM gemma:$GM; do
  for n in 1 2 4 8; do
    d=$(python3 -c "print(','.join(['0']*$n))")
    $B --backend cuda -q --model ${f#*:} --stages $n --devices $d --arms prime,verify --prompt-len 100 --gen-len 24 --chunk 1,8,16,64,100 --receipt $W/r/pv-${f%%:*}-$n.json > $W/pv-${f%%:*}-$n.txt 2>&1
    row "prime,verify ${f%%:*} N=$n exit $?" "$(grep -E '^(prime|verify)' $W/pv-${f%%:*}-$n.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
  timeout 80 $B soak --backend cuda -q --runs 20 --model ${f#*:} --stages 4 --arms prime --repeat 5 --chunk 1,8,16,64 --prompt-len 64 --gen-len 8 --out $W/psoak-${f%%:*} > $W/psoak-${f%%:*}.txt 2>&1
  row "soak x20 ${f%%:*} prime N=4 exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/psoak-${f%%:*}.txt | head -1) at $(el) s"
  find $W/psoak-${f%%:*} -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
$B --backend cuda -q --model $SM --stages 4 --devices 0,0,0,0 --arms prime --repeat 11 --chunk 24 --prompt-len 24 --gen-len 8 --receipt $W/r/fp11.json > $W/fp11.txt 2>&1
row "three-fingerprints: 24 tokens primed x11, N=4 one GPU, exit $?" "$(grep -E '^prime' $W/fp11.txt | cut -c1-50)"
tar czf $OUT/v2.tgz -C $W . 2>/dev/null
cat $S
