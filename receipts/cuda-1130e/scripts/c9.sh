#!/usr/bin/env bash
# Session 5, last call (one H200): Z2 (973b0f1) against B (bb8bfd3) and against itself.
# 1. The FFMA path (what auto runs for the narrow models' decode) keeps its bits: --mma off
#    receipts of B and Z2 equal (the fuse branch refactored sumsq256 in common.cu).
# 2. --pdl off and --graphs off against on, Z2, on the tensor-core paths (fused eager,
#    B=8 decode, prime GEMM): diff same.
# 3. A 3-stage gate of a 4096-wide Q4_K model under auto.
set -u
OUT=$1; mkdir -p $OUT /tmp/c9/r /tmp/c9/m; S=$OUT/summary.txt; W=/tmp/c9
cp .stage/bin/B8 /tmp/c9/B; cp .stage/bin/Z2 /tmp/c9/Z; chmod +x /tmp/c9/B /tmp/c9/Z
row() { printf '%-70s %s\n' "$1" "$2" | tee -a $S; }
B=/tmp/c9/B; Z=/tmp/c9/Z
$Z synth --arch llama --layers 4 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 2048 --quant q4_1 --tied -o $W/m/smol.gguf > /dev/null
$Z synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 2048 --quant q5_0 -o $W/m/gemma.gguf > /dev/null
$Z synth --preset llama8b --layers 4 --vocab 8192 --quant q4_k -o $W/m/w4.gguf > /dev/null
g() { local bin=$1 name=$2; shift 2; timeout 120 $bin --backend cuda -q "$@" --receipt $W/r/$name.json > $W/r/$name.txt 2>&1; echo "rc=$? $(grep -E '^[a-z]+ +(PASS|FAIL) ' $W/r/$name.txt | awk '{print $1"="$2}' | tr '\n' ' ')"; }
d() { $Z diff $W/r/$1.json $W/r/$2.json > /dev/null 2>&1 && echo same || echo different; }
for m in smol gemma; do
  for k in "dec|--arms eager,pipelined,batched --batch 8 --gen-len 16" "chk|--arms prime,verify --prompt-len 40 --chunk 1,8,40 --gen-len 4"; do
    for b in B Z; do bin=$B; [ $b = Z ] && bin=$Z; row "ffma $m ${k%%|*} $b" "$(g $bin ffma-$m-${k%%|*}-$b --mma off --model $W/m/$m.gguf --stages 2 --devices 0,0 ${k#*|})"; done
    row "diff ffma $m ${k%%|*} B vs Z2" "$(d ffma-$m-${k%%|*}-B ffma-$m-${k%%|*}-Z)"
  done
done
for spec in "w4|--model $W/m/w4.gguf --stages 4 --devices 0,0,0,0 --arms eager,pipelined,batched --batch 8 --window 4 --gen-len 24" \
            "smolprime|--mma on --model $W/m/smol.gguf --stages 2 --devices 0,0 --arms prime,verify --prompt-len 100 --chunk 1,8,64,100 --gen-len 4"; do
  n=${spec%%|*}; a=${spec#*|}
  row "gate $n on" "$(g $Z $n-on $a)"
  for o in "pdl off" "graphs off"; do t=${o// /-}; row "gate $n --$o" "$(g $Z $n-$t $a --$o)"; row "diff $n --$o vs on" "$(d $n-on $n-$t)"; done
done
row "gate w4 (auto) N=3 B=8" "$(g $Z w4-n3 --model $W/m/w4.gguf --stages 3 --devices 0,0,0 --arms eager,pipelined,batched --batch 8 --window 4 --gen-len 24)"
row "receipt backend.mma (w4 N=3)" "$(grep -o '"mma": *"[^"]*"' $W/r/w4-n3.json | head -1)"
tar czf $OUT/c9.tgz -C $W r 2>/dev/null
cat $S
