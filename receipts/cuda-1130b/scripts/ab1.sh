#!/usr/bin/env bash
# A/B: N1 (one-trip prologue also for 1-row tiles of 32-element formats) vs M (77d877a):
# bits (gates, diff) and SmolLM2-shape eager; then SmolLM2-shape N=4 traced with graphs.
set -u
OUT=$1; M=.stage/bin/M; N=.stage/bin/N1; W=/tmp/w; mkdir -p $W/r
row() { printf '%-50s %s\n' "$1" "$2" | tee -a $OUT/summary.txt; }
$M synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o $W/smol.gguf > /dev/null 2>&1
$M synth --arch llama --layers 4 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q8_0 -o $W/q8.gguf > /dev/null 2>&1
$M synth --arch llama --layers 4 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 4096 --quant q4_0 -o $W/q40.gguf > /dev/null 2>&1
for m in smol q8 q40; do
  for b in M N; do
    ${!b} --backend cuda -q --model $W/$m.gguf --stages 3 --batch 5 --window 4 --prompt-len 20 --gen-len 60 --receipt $W/r/$m-$b.json > /dev/null 2>&1; echo -n "$m $b rc=$? " >> $W/rc.txt
  done
  python3 - $W/r/$m-M.json $W/r/$m-N.json <<'PY' | while read l; do row "bits $m M vs N1" "$l"; done
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
h = lambda r: ([s["logits_blake3"] for s in r["reference"]["steps"]], [[s["logits_blake3"] for s in x["steps"]] for x in r["arms"]])
print("logits same" if h(a) == h(b) else "LOGITS DIFFER", sum(len(x["steps"]) for x in a["arms"]), "arm steps")
PY
done
row "gates" "$(cat $W/rc.txt)"
for i in 1 2; do for b in M N; do
  row "bench smol eager $b (round $i)" "$(${!b} bench --backend cuda --model $W/smol.gguf --stages 1 --arms eager --steps 128 2>&1 | grep -E '^  eager|host enqueue' | tr -s ' ' | tr '\n' ' ' | cut -c1-150)"
done; done
$N --backend cuda -q --model $W/smol.gguf --stages 4 --arms eager,pipelined --gen-len 40 --trace $OUT/smol-n4-graphs.trace.json --receipt $W/r/trace.json > /dev/null 2>&1
row "traced gate smol N=4 (graphs on)" "rc=$?"
for ph in pipelined eager; do row "trace-check $ph" "$($N trace-check $OUT/smol-n4-graphs.trace.json --phase $ph 2>&1 | grep -E '^(PASS|FAIL)' | cut -c1-110 | tr '\n' '|')"; done
row "bench smol N=4" "$($N bench --backend cuda --model $W/smol.gguf --stages 4 --arms pipelined --steps 64 2>&1 | grep -E 'busy|pipelined|eager ' | tr -s ' ' | tr '\n' '|' | cut -c1-300)"
gzip -f $OUT/smol-n4-graphs.trace.json
cat $OUT/summary.txt
