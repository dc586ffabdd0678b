#!/usr/bin/env bash
# Final session, call main1: real models from the staged parts; oracle tapes on CUDA; the
# one-GPU battery; the fault matrix (selftest on two GPUs); soaks x20 same-device and over
# two GPUs on SmolLM2, Gemma-3 and the 8B shape.
set -u
OUT=$1; BIN=${BIN:-$(cat /tmp/bin/CHOICE 2>/dev/null || echo /tmp/bin/M)}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=$OUT/summary.txt; W=/tmp/f1; mkdir -p $OUT $W/r models
row() { printf '%-62s %s\n' "$1" "$2" | tee -a $S; }
row "BIN" "$BIN"
cat .stage/parts/blob.p* > /tmp/blob
head -c 98362432 /tmp/blob > models/SmolLM2-135M-Instruct.Q4_1.gguf
tail -c +98362433 /tmp/blob > models/gemma-3-270m-q4_k_m.gguf; rm /tmp/blob
( cd models && sha256sum -c ../.stage/parts/sha.txt 2>&1 ) | sed 's/^/sha /' | tee -a $S
# 1. oracle tapes (CUDA, one stage, top-20) against HF
for m in smollm2-135m-q4_1:SmolLM2-135M-Instruct.Q4_1 gemma3-270m-q4_k_m:gemma-3-270m-q4_k_m; do
  for t in tapeA tapeT; do
    name=oracle-${m%%:*}-$t
    $BIN --backend cuda -q --model models/${m#*:}.gguf --tape tests/data/oracle/${m%%:*}.$t.json --topk 20 --stages 1 --receipt $W/r/$name.json > $W/$name.txt 2>&1
    row "$name exit $?" "$(python3 scripts/oracle-compare.py $W/r/$name.json tests/data/oracle/${m%%:*}.$t.json 2>&1 | tail -1 | cut -c1-100)"
  done
done
# 2. the one-GPU battery
timeout 170 $BIN battery gates/gpu-1.json --out $W/battery > $W/battery.txt 2>&1
row "battery gpu-1 exit $? at $(el) s" "$(grep -iE 'pass|fail|skip' $W/battery.txt | tail -1 | cut -c1-80)"
# 3. the fault matrix on two GPUs
timeout ${SELF_T:-150} $BIN selftest --backend cuda --runs ${SELF_RUNS:-3} --out $W/selftest > $W/selftest.txt 2>&1
row "selftest (2 GPUs, ${SELF_RUNS:-3} runs) exit $? at $(el) s" "$(tail -1 $W/selftest.txt | cut -c1-80)"
cp $W/selftest/selftest.json $OUT/ 2>/dev/null
# 4. soaks x20, same device and over two GPUs
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
SM=models/SmolLM2-135M-Instruct.Q4_1.gguf; GM=models/gemma-3-270m-q4_k_m.gguf
for spec in "smol-1gpu|$SM|--stages 4 --arms pipelined,batched --window 4" \
            "smol-2gpu|$SM|--stages 4 --devices 0,0,1,1 --arms pipelined,batched --window 4" \
            "gemma-1gpu|$GM|--stages 3 --arms pipelined,batched --window 4" \
            "gemma-2gpu|$GM|--stages 2 --devices 0,1 --arms pipelined,batched --window 4" \
            "l8-1gpu|$L8|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24" \
            "l8-2gpu|$L8|--stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24"; do
  IFS='|' read -r name f args <<< "$spec"
  timeout ${SOAK_T:-60} $BIN soak --backend cuda -q --runs 20 --model $f $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "soak x20 $name ($args) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
  find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
tail -2 /tmp/sm/synth.log >> $S; tail -1 /tmp/lcb/build.log >> $S
tar czf $OUT/f1.tgz -C $W . 2>/dev/null
cat $S
