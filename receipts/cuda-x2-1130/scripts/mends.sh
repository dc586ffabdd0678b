#!/usr/bin/env bash
# The review mends (6883a9b) on two H200s, synthetic models only: decode bits vs build F,
# the CUDA trace (8B shape N=4, trace-check), prime/verify (store-first passes), NCCL across
# two processes (gate, a fault, a killed member).
set -u
OUT=$1; G=.stage/ppn-gate-g; F=.stage/ppn-gate-f; S=$OUT/summary.txt; W=/tmp/m4; mkdir -p $OUT $W
row() { printf '%-58s %s\n' "$1" "$2" | tee -a $S; }
$G synth --arch llama --layers 4 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o $W/l.gguf > /dev/null 2>&1
$G synth --preset llama8b --layers 8 --quant q4_k -o $W/l8.gguf > /dev/null 2>&1
for b in F G; do bin=${!b}; $bin --backend cuda -q --model $W/l.gguf --stages 3 --batch 5 --window 4 --prompt-len 30 --gen-len 60 --receipt $W/d-$b.json > /dev/null 2>&1; echo -n "$b:$? " >> $W/rc; done
row "G vs F gates (exit)" "$(cat $W/rc)"
row "G vs F diff" "$($G diff $W/d-F.json $W/d-G.json 2>&1 | head -1 | cut -c1-60)"
$G --backend cuda -q --model $W/l8.gguf --stages 4 --receipt $W/t.json --trace $W/t.trace.json > $W/t.txt 2>&1
row "l8 N=4 traced gate exit $?" "$(grep trace: $W/t.txt | cut -c1-120)"
for ph in pipelined batched; do $G trace-check $W/t.trace.json --phase $ph > $W/tc-$ph.txt 2>&1; row "trace-check $ph exit $?" "$(grep -c ^PASS $W/tc-$ph.txt)/3 PASS"; done
$G --backend cuda -q --model $W/l.gguf --stages 4 --arms prime,verify --prompt-len 23 --gen-len 16 --receipt $W/pv.json > $W/pv.txt 2>&1
row "prime,verify N=4 exit $?" "$(grep -E '^(prime|verify)' $W/pv.txt | awk '{print $1"="$2}' | tr '\n' ' ')"
$G --backend cuda -q --model $W/l.gguf --stages 2 --arms verify --fault no-rollback --receipt $W/nr.json > /dev/null 2>&1
row "no-rollback (want exit 1)" "exit $?"
NL=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
NC=(--backend cuda --stages 2 --devices 0,1 --transport nccl --nccl-lib "$NL" -q)
timeout 120 $G launch --procs 2 --model $W/l.gguf "${NC[@]}" --receipt $W/nccl.json > $W/nccl.txt 2>&1
row "nccl 2 procs all arms exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/nccl.txt | awk '{print $1"="$2}' | tr '\n' ' ')"
timeout 120 $G launch --procs 2 --model $W/l.gguf "${NC[@]}" --fault no-exit-publish --arms eager > $W/nf.txt 2>&1
row "nccl no-exit-publish (want exit 1)" "exit $?"
$G launch --procs 2 --model $W/l.gguf "${NC[@]}" --gen-len 3000 --prompt-len 8 --peer-timeout 10 > $W/kill.txt 2>&1 &
LP=$!; sleep 4; K=$(awk '/^ppn-gate launch: rank 1 /{print $NF}' $W/kill.txt); t0=$(date +%s); kill -STOP $K 2>/dev/null
timeout 60 tail --pid=$LP -f /dev/null; wait $LP; rc=$?; kill -9 $K 2>/dev/null
row "nccl rank 1 stopped (hang): launch exit" "$rc after $(( $(date +%s) - t0 )) s: $(grep -oE 'no (progress|heartbeat)[^;]*' $W/kill.txt | head -1 | cut -c1-70)"
cat $S
