#!/usr/bin/env bash
# Call 2: bit-identity of unpack4 + cursor loop (build u) against 78cc900 (old), and the
# new norm (build n): gates, CUDA vs CPU, bench old/u/n, prof.
set -u
OUT=$1; O=.stage/ppn-gate; U=.stage/ppn-gate-u; N=.stage/ppn-gate-n; M=/tmp/m; R=$OUT/r
mkdir -p $M $R
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=$OUT/summary.txt; L=$OUT/log.txt
row() { printf '%-58s %s\n' "$1" "$2" | tee -a $S; }
python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 2000 for i in range(20)]}))" > $OUT/tape.json
( $N synth --preset llama8b --layers 8 --quant q4_k -o $M/l8-q4_k.gguf
  $N synth --preset llama8b --layers 8 --quant q4_k_m -o $M/l8-q4_k_m.gguf
  $N synth --preset llama8b --layers 8 --quant q8_0 -o $M/l8-q8_0.gguf
  $N synth --preset llama70b --layers 2 --quant q4_k -o $M/l70-q4_k.gguf ) >> $L 2>&1 &
SP=$!
for q in q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k; do
  m=$M/w-$q.gguf
  $N synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant $q -o $m >> $L 2>&1
  for b in O U; do bin=${!b}
    $bin --backend cuda -q --model $m --stages 3 --splits 1,2 --batch 5 --window 4 --receipt $R/g-$q-$b.json >> $L 2>&1
  done
  $U diff $R/g-$q-O.json $R/g-$q-U.json >> $L 2>&1; du=$?
  $N --backend cuda -q --model $m --stages 3 --splits 1,2 --batch 5 --window 4 --receipt $R/g-$q-N.json >> $L 2>&1; gn=$?
  $N --backend cuda -q --model $m --stages 2 --batch 8 --arms batched --receipt $R/b8-$q-N.json >> $L 2>&1; bn=$?
  for be in cpu cuda; do
    $N --backend $be -q --model $m --stages 1 --arms eager --tape $OUT/tape.json --topk 20 --receipt $R/cmp-$q-$be.json >> $L 2>&1
  done
  c=$(python3 - $R $q <<'PY'
import json, sys
d, m = sys.argv[1], sys.argv[2]
try:
    a = json.load(open(f"{d}/cmp-{m}-cpu.json"))["reference"]["steps"]
    b = json.load(open(f"{d}/cmp-{m}-cuda.json"))["reference"]["steps"]
except Exception as e:
    print("ERR", e); sys.exit(0)
w, t1 = 0.0, 0
for sa, sb in zip(a, b):
    ta, tb = dict(map(tuple, sa["topk"])), dict(map(tuple, sb["topk"]))
    for tok, v in ta.items(): w = max(w, abs(v - tb[tok])) if tok in tb else float("inf")
    t1 += sa["topk"][0][0] == sb["topk"][0][0]
print(f"{w:.2e} top1 {t1}/{len(a)}")
PY
)
  row "$q: diff old-vs-u (0=same) / n N=3 B=5 / n N=2 B=8 / cpu-vs-cuda" "$du / $gn / $bn / $c"
done
wait $SP; row "synth done" "$(el) s"
for m in l8-q4_k l8-q4_k_m l8-q8_0 l70-q4_k; do
  for b in O U N; do bin=${!b}
    $bin bench --backend cuda --model $M/$m.gguf --stages 1 --arms batched --batch 8 --steps 64 > $OUT/bench-$m-$b.txt 2>&1
    row "bench $m $b" "$(grep -E '^  (eager|batched)' $OUT/bench-$m-$b.txt | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"
  done
done
PPN_CUDA_PROF=1 $N bench --backend cuda --model $M/l8-q4_k.gguf --stages 1 --arms batched --batch 8 --steps 32 2>&1 | grep -E "prof stage|tok/s" > $OUT/prof.txt
PPN_CUDA_PROF=1 $N bench --backend cuda --model $M/l70-q4_k.gguf --stages 1 --arms eager --steps 32 2>&1 | grep -E "prof stage|tok/s" >> $OUT/prof.txt
row "done" "$(el) s"
cat $OUT/bench-*.txt > $OUT/bench.txt; rm -f $OUT/bench-*.txt
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R
cat $S; cat $OUT/prof.txt
