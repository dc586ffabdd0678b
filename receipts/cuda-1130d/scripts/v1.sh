#!/usr/bin/env bash
# Session 4, validation call on one H200 (issue 12's and 13's bit bars on the build chosen by
# c0.sh, /tmp/bin/CHOICE): real models from the staged parts; oracle tapes; every arm at
# N = 1, 2, 3, 4, 8 (one GPU, one stream per stage) on SmolLM2, Gemma-3 and the 8B shape with
# B = 8 (each row against its own one-token reference); --pdl off and --graphs off against
# on (diff); soaks x20; the fault matrix; prime/verify N = 1, 2, 4, 8, prime soaks,
# the three-fingerprints experiment; the one-GPU battery.
set -u
OUT=$1; B=$(cat /tmp/bin/CHOICE 2>/dev/null || echo /tmp/bin/H); W=/tmp/v1; mkdir -p $OUT $W/r
S=$OUT/summary.txt; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
row() { printf '%-70s %s\n' "$1" "$2" | tee -a $S; }
row "BIN" "$B $($B --version)"
bash .stage/calls4/asm.sh | tee -a $S
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
for m in smollm2-135m-q4_1:SmolLM2-135M-Instruct.Q4_1 gemma3-270m-q4_k_m:gemma-3-270m-q4_k_m; do
  for t in tapeA tapeT; do
    name=oracle-${m%%:*}-$t
    $B --backend cuda -q --model models/${m#*:}.gguf --tape tests/data/oracle/${m%%:*}.$t.json --topk 20 --stages 1 --receipt $W/r/$name.json > $W/$name.txt 2>&1
    row "$name exit $?" "$(python3 scripts/oracle-compare.py $W/r/$name.json tests/data/oracle/${m%%:*}.$t.json 2>&1 | tail -1 | sed 's/.*json: //' | cut -c1-80)"
  done
done
# Every arm at N = 1, 2, 3, 4, 8 with B = 8; then --pdl off and --graphs off at N = 4 (diff).
for f in smol:$SM gemma:$GM l8:$L8; do
  for n in 1 2 3 4 8; do
    d=$(python3 -c "print(','.join(['0']*$n))")
    $B --backend cuda -q --model ${f#*:} --stages $n --devices $d --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --receipt $W/r/g-${f%%:*}-$n.json > $W/g-${f%%:*}-$n.txt 2>&1
    row "gate ${f%%:*} N=$n B=8 exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/g-${f%%:*}-$n.txt | awk '{print $1, $2}' | tr '\n' ' ') at $(el) s"
  done
  for o in "pdl off" "graphs off"; do
    t=${o// /-}
    $B --backend cuda -q --model ${f#*:} --stages 4 --devices 0,0,0,0 --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --${o% *} ${o#* } --receipt $W/r/g-${f%%:*}-4-$t.json > /dev/null 2>&1
    $B diff $W/r/g-${f%%:*}-4.json $W/r/g-${f%%:*}-4-$t.json > $W/diff-${f%%:*}-$t.txt 2>&1
    row "diff ${f%%:*} N=4: --$o vs on (exit 0 = same logits)" "$? $(grep -iE 'same|differ|first' $W/diff-${f%%:*}-$t.txt | head -1 | cut -c1-60)"
  done
done
timeout 130 $B selftest --backend cuda --runs 3 --out $W/selftest > $W/selftest.txt 2>&1
row "selftest (1 GPU, 3 runs) exit $? at $(el) s" "$(tail -1 $W/selftest.txt | cut -c1-80)"
cp $W/selftest/selftest.json $OUT/ 2>/dev/null
timeout 100 $B battery gates/gpu-1.json --out $W/battery > $W/battery.txt 2>&1
row "battery gpu-1 exit $? at $(el) s" "$(grep -iE 'pass|fail|skip' $W/battery.txt | tail -1 | cut -c1-80)"
tar czf $OUT/v1.tgz -C $W . 2>/dev/null
cat $S
