#!/usr/bin/env bash
# Session 5, streak 2, validation of the chosen build (/tmp/bin/CHOICE) on the real models:
# what --mma auto's prime rule (d3e13e6) newly routes to the tensor cores: prime/verify at
# N = 1, 2, 4, 8 with chunks up to 100 rows (auto: mma), the mma kernels against HF's oracle
# (--mma on, eager), the three-fingerprints experiment on mma, mma-row-order on a real model,
# prime soaks x20 (one GPU, two GPUs); then the 8B shape's decode under auto (mma): every arm
# at N = 1, 2, 4, 8 with B = 8 and soaks, since a fused decode changes the mma decode kernel.
set -u
OUT=$1; B=$(cat /tmp/bin/CHOICE); W=/tmp/bv; mkdir -p $OUT $W/r
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-72s %s\n' "$1" "$2" | tee -a $S; }
row "BIN" "$B $($B --version)"
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
for m in smollm2-135m-q4_1:SmolLM2-135M-Instruct.Q4_1 gemma3-270m-q4_k_m:gemma-3-270m-q4_k_m; do
  for t in tapeA tapeT; do
    name=oracle-mma-on-${m%%:*}-$t
    $B --backend cuda -q --mma on --model models/${m#*:}.gguf --tape tests/data/oracle/${m%%:*}.$t.json --topk 20 --stages 1 --receipt $W/r/$name.json > $W/$name.txt 2>&1
    row "$name exit $?" "$(python3 scripts/oracle-compare.py --tol 1e-3 $W/r/$name.json tests/data/oracle/${m%%:*}.$t.json 2>&1 | tail -1 | sed 's/.*json: //' | cut -c1-80)"
  done
done
for f in smol:$SM gemma:$GM; do
  for n in 1 2 4 8; do
    d=$(python3 -c "print(','.join(['0']*$n))")
    $B --backend cuda -q --model ${f#*:} --stages $n --devices $d --arms prime,verify --prompt-len 100 --gen-len 16 --chunk 1,8,16,64,100 --receipt $W/r/pv-${f%%:*}-$n.json > $W/pv-${f%%:*}-$n.txt 2>&1
    row "prime,verify ${f%%:*} N=$n (auto) exit $?" "$(grep -E '^(prime|verify) ' $W/pv-${f%%:*}-$n.txt | awk '{print $1, $2}' | tr '\n' ' ') at $(el) s"
  done
  row "  receipt backend.mma" "$(grep -o '"mma": *"[^"]*"' $W/r/pv-${f%%:*}-2.json | head -1)"
  $B --backend cuda -q --model ${f#*:} --stages 2 --devices 0,1 --arms prime,verify --prompt-len 100 --gen-len 16 --chunk 1,8,64,100 --receipt $W/r/pv-${f%%:*}-2gpu.json > $W/pv-${f%%:*}-2gpu.txt 2>&1
  row "prime,verify ${f%%:*} N=2 on 0,1 (auto) exit $?" "$(grep -E '^(prime|verify) ' $W/pv-${f%%:*}-2gpu.txt | awk '{print $1, $2}' | tr '\n' ' ')"
  $B --backend cuda -q --mma on --model ${f#*:} --stages 2 --devices 0,0 --arms prime --prompt-len 64 --chunk 64 --gen-len 4 --fault mma-row-order > $W/f-${f%%:*}.txt 2>&1
  row "fault mma-row-order ${f%%:*} prime C=64 (want exit 1)" "$? $(grep -E '^prime ' $W/f-${f%%:*}.txt | awk '{print $1, $2}')"
  $B --backend cuda --mma on --model ${f#*:} --stages 4 --devices 0,0,0,0 --arms prime --prompt-len 24 --chunk 24 --repeat 11 --gen-len 4 --receipt $W/r/fp-${f%%:*}.json > $W/fp-${f%%:*}.txt 2>&1
  row "three-fingerprints ${f%%:*} (--mma on, 11 primes, N=4 one GPU) exit $?" "$(python3 -c "
import json,sys
r=json.load(open('$W/r/fp-${f%%:*}.json'))
a=[x for x in r['arms'] if x['name']=='prime'][0]
from collections import defaultdict
fp=defaultdict(list)
for s in a['steps']: fp[s['repeat']].append(s['logits_blake3'])
print(len(set(tuple(v) for v in fp.values())), 'fingerprint(s) over', len(fp), 'primes')
" 2>&1 | tail -1)"
done
for spec in "smol-1gpu|$SM|--stages 4 --devices 0,0,0,0" "smol-2gpu|$SM|--stages 2 --devices 0,1" \
            "gemma-1gpu|$GM|--stages 4 --devices 0,0,0,0" "gemma-2gpu|$GM|--stages 2 --devices 0,1"; do
  IFS='|' read -r name f pl <<< "$spec"
  timeout 100 $B soak --backend cuda -q --runs 20 --model $f $pl --arms prime --repeat 5 --chunk 8,64,100 --prompt-len 100 --gen-len 4 --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "prime soak x20 $name (auto: mma) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
  find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
timeout 110 $B battery gates/gpu-1.json --out $W/battery > $W/battery.txt 2>&1
row "battery gpu-1 (decode: auto keeps FFMA) exit $? at $(el) s" "$(grep -iE 'pass|fail|skip' $W/battery.txt | tail -1 | cut -c1-80)"
tar czf $OUT/bv.tgz -C $W r $(cd $W && ls *.txt) 2>/dev/null
cat $S
