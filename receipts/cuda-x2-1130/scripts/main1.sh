#!/usr/bin/env bash
# Final session, main call 1: the real models assembled from the staged parts; build F
# (this commit) against build N (call 2's measured kernels) on synthetic gates (decode bits
# unchanged); the oracle tapes on CUDA and their agreement with HF; the one-GPU battery;
# soaks x20; the CUDA traces (#16); the one-GPU NCCL smoke (#17).
set -u
OUT=$1; F=.stage/ppn-gate-f; N=.stage/ppn-gate-n
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=$OUT/summary.txt; W=/tmp/f1; mkdir -p $OUT $W/r models
row() { printf '%-62s %s\n' "$1" "$2" | tee -a $S; }
cat .stage/parts/blob.p* > /tmp/blob
head -c 98362432 /tmp/blob > models/SmolLM2-135M-Instruct.Q4_1.gguf
tail -c +98362433 /tmp/blob > models/gemma-3-270m-q4_k_m.gguf; rm /tmp/blob
( cd models && sha256sum -c ../.stage/parts/sha.txt 2>&1 ) | sed 's/^/sha /' | tee -a $S
# 1. F vs N: decode bits (gemma3-like 256-wide heads at 130 positions, llama Q4_K, B=5, all arms)
$N synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 4096 --quant q8_0 -o /tmp/sm-g.gguf > /dev/null 2>&1
$N synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o /tmp/sm-l.gguf > /dev/null 2>&1
BIN=$F
for m in g l; do
  for b in N F; do bin=${!b}
    $bin --backend cuda -q --model /tmp/sm-$m.gguf --stages 3 --batch 5 --window 4 --prompt-len 40 --gen-len 90 --receipt $W/r/sane-$m-$b.json > $W/sane-$m-$b.txt 2>&1
    echo "gate $m $b exit $?" >> $W/sane.txt
  done
  $F diff $W/r/sane-$m-N.json $W/r/sane-$m-F.json > $W/diff-$m.txt 2>&1; rc=$?
  row "F vs N diff $m (0 = same)" "$rc $(head -1 $W/diff-$m.txt | cut -c1-50)"
  [ $rc = 0 ] || BIN=$N
done
row "gates" "$(tr '\n' ' ' < $W/sane.txt)"
row "BIN for the rest" "$BIN (at $(el) s)"
# 2. oracle tapes (CUDA, one stage, top-20) and their agreement with HF
for m in smollm2-135m-q4_1:SmolLM2-135M-Instruct.Q4_1 gemma3-270m-q4_k_m:gemma-3-270m-q4_k_m; do
  for t in tapeA tapeT; do
    name=oracle-${m%%:*}-$t
    $BIN --backend cuda -q --model models/${m#*:}.gguf --tape tests/data/oracle/${m%%:*}.$t.json --topk 20 --stages 1 --receipt $W/r/$name.json > $W/$name.txt 2>&1
    row "$name exit $?" "$(python3 scripts/oracle-compare.py $W/r/$name.json tests/data/oracle/${m%%:*}.$t.json 2>&1 | tail -1 | cut -c1-90)"
  done
done
# 3. the one-GPU battery
timeout 170 $BIN battery gates/gpu-1.json --out $W/battery > $W/battery.txt 2>&1
row "battery gpu-1 exit $? at $(el) s" "$(grep -iE 'pass|fail|skip' $W/battery.txt | tail -1 | cut -c1-80)"
# 4. soaks x20 (same device): SmolLM2 N=4 pipelined, the 8B shape N=2 pipelined+batched B=8
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf
[ -f $L8.flags ] || { row "8B file" "not synthesized yet: $(tail -1 /tmp/sm/synth.log)"; }
for spec in "smol|models/SmolLM2-135M-Instruct.Q4_1.gguf|--stages 4 --arms pipelined --window 4" \
            "l8|$L8|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24"; do
  IFS='|' read -r name f args <<< "$spec"
  timeout 110 $BIN soak --backend cuda -q --runs 20 --model $f $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "soak x20 $name ($args) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
  find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
# 5. CUDA traces (#16)
timeout 170 bash scripts/gpu-h16.sh $BIN models $W/h16 > /dev/null 2>&1
row "gpu-h16 exit $? at $(el) s" ""
cat $W/h16/summary.txt >> $S 2>/dev/null
cp $W/h16/cuda-n4-pipelined.svg $OUT/ 2>/dev/null
# 6. NCCL (#17): with two GPUs the two-process gate over NCCL (SmolLM2: gate, same bits as
# one process, speed, four faults, a killed member), else the one-GPU smoke
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  H17_MODELS=smol H17_SOAK_RUNS=${H17_SOAK:-0} timeout ${H17_T:-150} bash scripts/gpu-h17.sh $BIN models $W/h17 > /dev/null 2>&1
  row "gpu-h17 (2 GPUs, smol) exit $? at $(el) s" ""
else
  timeout 60 bash scripts/gpu-h17-smoke.sh $BIN models $W/h17 > /dev/null 2>&1
  row "gpu-h17-smoke exit $? at $(el) s" ""
fi
cat $W/h17/summary.txt >> $S 2>/dev/null
tail -3 /tmp/sm/synth.log >> $S; tail -1 /tmp/lcb/build.log >> $S
cp $W/h16/traces.tar.gz $OUT/h16-traces.tgz 2>/dev/null; cp $W/h16/log.txt $OUT/h16-log.txt 2>/dev/null
tar czf $OUT/f1.tgz -C $W --exclude=./h16 . 2>/dev/null
ls -la $OUT; cat $S
