#!/usr/bin/env bash
# ab.sh BASE CAND MODELDIR OUT: a candidate build against its base on one GPU, --mma on:
# every arm of decode (B=8) and chunks (prime/verify, chunks 1..100: the decode kernel, the
# GEMM at narrow and wide tilings) on a 576-wide Q4_1, a 640-wide Q5_0 (gemma3, head_dim
# 256), a 4096-wide Q4_K and a Q4_K_M-mix llama, both builds; `diff` of their receipts (the
# candidates change no bits); then prefill512 / eager / B=8 interleaved on the SmolLM2 and
# Gemma-3 shapes. Rows: "gate NAME BIN rc=..", "diff NAME same|different", "bench ..".
set -u
A=$1; Z=$2; M=$3; OUT=$4; R=$M/r-$(basename $Z); mkdir -p $M $OUT $R; S=$OUT/summary.txt
row() { printf '%-66s %s\n' "$1" "$2" | tee -a $S >/dev/null; }
syn() { [ -f "$M/$1.gguf" ] || $A synth "${@:2}" -o $M/$1.gguf > /dev/null 2>&1 || row "synth $1 FAILED" ""; }
syn smol2 --arch llama --layers 2 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 2048 --quant q4_1 --tied
syn gemma2 --arch gemma3 --layers 2 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 2048 --quant q5_0
syn w2 --preset llama8b --layers 2 --vocab 8192 --quant q4_k
syn q6 --arch llama --layers 2 --embd 512 --heads 8 --kv-heads 2 --ff 1536 --vocab 2048 --quant q6_k
syn km2 --arch llama --layers 2 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k_m
syn smol --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied
syn gemma --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q5_0
for m in smol2 gemma2 w2 km2 q6; do
  for k in "dec|--arms eager,pipelined,batched --batch 8 --gen-len 16" "chk|--arms prime,verify --prompt-len 100 --chunk 1,8,16,40,100 --gen-len 4"; do
    for b in A Z; do
      bin=$A; [ $b = Z ] && bin=$Z
      timeout 120 $bin --backend cuda -q --mma on --model $M/$m.gguf --stages 2 --devices 0,0 ${k#*|} --receipt $R/$m-${k%%|*}-$b.json > $R/$m-${k%%|*}-$b.txt 2>&1
      row "gate $m ${k%%|*} $b rc=$?" "$(grep -E '^[a-z]+ +(PASS|FAIL) ' $R/$m-${k%%|*}-$b.txt | awk '{print $1"="$2}' | tr '\n' ' ')"
    done
    $A diff $R/$m-${k%%|*}-A.json $R/$m-${k%%|*}-Z.json > /dev/null 2>&1
    r=$([ $? = 0 ] && echo same || echo different)
    # km2 has Q6_K matrices: a candidate with Q6_K on the tensor cores changes their order.
    [ $m = km2 ] || [ $m = q6 ] && r="$r (info: Q6_K may move to mma)"
    row "diff $m ${k%%|*} A vs Z" "$r"
  done
done
timeout 60 $Z --backend cuda -q --mma on --model $M/smol2.gguf --stages 2 --devices 0,0 --arms prime --prompt-len 64 --chunk 64 --gen-len 4 --fault mma-row-order > /dev/null 2>&1
row "fault mma-row-order smol2 prime Z (want rc=1)" "rc=$?"
timeout 60 $Z --backend cuda -q --mma on --model $M/smol2.gguf --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order > /dev/null 2>&1
row "fault mma-row-order smol2 batched B=8 Z (want rc=1; fused decode)" "rc=$?"
if [ "${SKIPQ6:-0}" != 1 ]; then
  timeout 60 $Z --backend cuda -q --mma on --model $M/q6.gguf --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order > /dev/null 2>&1
  row "fault mma-row-order q6 batched Z (want rc=1: Q6_K took the tensor cores)" "rc=$?"
fi
[ "${BENCH:-1}" = 1 ] && for m in smol gemma; do
  for b in A Z A Z; do
    bin=$A; [ $b = Z ] && bin=$Z
    o=$(timeout 90 $bin bench --backend cuda --mma on --model $M/$m.gguf --stages 1 --arms prime,batched --batch 8 --chunk 512 --prompt-len 512 --repeat 2 --steps 32 2>&1)
    row "bench $m $b --mma on" "$(echo "$o" | awk '/^  eager/{e=$4} /^  batched/{bb=$4} /^  prefill/{p=$5} END{print "eager", e, "B8", bb, "prefill512", p}')"
  done
done
tar czf $OUT/receipts.tgz -C $R . 2>/dev/null
cat $S
