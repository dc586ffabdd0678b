#!/usr/bin/env bash
# Session 3 final, call f9: the real models under the new prefill path: oracle tapes (CUDA),
# prime and verify at N = 1, 2, 4, 8 on one H200, the seeds' three-fingerprints experiment,
# prime soaks x20, the one-GPU battery.
set -u
OUT=$1; B=/tmp/bin/N; W=/tmp/f9; mkdir -p $OUT $W/r
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-66s %s\n' "$1" "$2" | tee -a $S; }
bash .stage/calls/asm.sh | tee -a $S
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
for m in smollm2-135m-q4_1:SmolLM2-135M-Instruct.Q4_1 gemma3-270m-q4_k_m:gemma-3-270m-q4_k_m; do
  for t in tapeA tapeT; do
    name=oracle-${m%%:*}-$t
    $B --backend cuda -q --model models/${m#*:}.gguf --tape tests/data/oracle/${m%%:*}.$t.json --topk 20 --stages 1 --receipt $W/r/$name.json > $W/$name.txt 2>&1
    row "$name exit $?" "$(python3 scripts/oracle-compare.py $W/r/$name.json tests/data/oracle/${m%%:*}.$t.json 2>&1 | tail -1 | cut -c1-90)"
  done
done
for f in smol:$SM gemma:$GM; do
  for n in 1 2 4 8; do
    d=$(python3 -c "print(','.join(['0']*$n))")
    $B --backend cuda -q --model ${f#*:} --stages $n --devices $d --arms prime,verify --prompt-len 100 --gen-len 24 --chunk 1,8,16,64,100 --receipt $W/r/pv-${f%%:*}-$n.json > $W/pv-${f%%:*}-$n.txt 2>&1
    row "prime,verify ${f%%:*} N=$n (one GPU) exit $?" "$(grep -E '^(prime|verify)' $W/pv-${f%%:*}-$n.txt | cut -c1-40 | tr '\n' ' ')"
  done
done
# The seeds' experiment: a 24-token prompt primed 11 times in one process, one stream per stage.
$B --backend cuda -q --model $SM --stages 4 --devices 0,0,0,0 --arms prime --repeat 11 --chunk 24 --prompt-len 24 --gen-len 8 --receipt $W/r/fp11.json > $W/fp11.txt 2>&1
row "three-fingerprints: prime 24 tokens x11, N=4 one GPU, exit $?" "$(grep -E '^prime' $W/fp11.txt | cut -c1-50)"
for f in smol:$SM gemma:$GM; do
  timeout 100 $B soak --backend cuda -q --runs 20 --model ${f#*:} --stages 4 --arms prime --repeat 5 --chunk 1,8,16,64 --prompt-len 64 --gen-len 8 --out $W/soak-${f%%:*} > $W/soak-${f%%:*}.txt 2>&1
  row "soak x20 ${f%%:*} prime N=4 one GPU exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-${f%%:*}.txt | head -1) at $(el) s"
  find $W/soak-${f%%:*} -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
timeout 150 $B battery gates/gpu-1.json --out $W/battery > $W/battery.txt 2>&1
row "battery gpu-1 exit $? at $(el) s" "$(grep -iE 'pass|fail|skip' $W/battery.txt | tail -1 | cut -c1-80)"
tar czf $OUT/f9.tgz -C $W . 2>/dev/null
cat $S
