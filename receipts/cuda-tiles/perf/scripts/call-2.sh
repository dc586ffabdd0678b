#!/usr/bin/env bash
set -u
D=$(dirname "$0"); OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
SMOL=/tmp/smolshape.gguf
$D/v0 synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $SMOL >/dev/null
for v in v0 v6; do
  $D/$v --backend cuda -q --model $SMOL --stages 2 --receipt $OUT/r/n2-$v.json >>$OUT/log.txt 2>&1; echo "$v n2 exit $?"
  $D/$v --backend cuda -q --model $SMOL --stages 1 --arms batched --batch 8 --receipt $OUT/r/b8-$v.json >>$OUT/log.txt 2>&1; echo "$v b8 exit $?"
done
echo "v6 diff: $($D/v0 diff $OUT/r/n2-v0.json $OUT/r/n2-v6.json 2>&1 | head -1 | cut -c1-30) / $($D/v0 diff $OUT/r/b8-v0.json $OUT/r/b8-v6.json 2>&1 | head -1 | cut -c1-30)"
for rep in 1 2; do for v in v0 v4 v6; do
  $D/$v bench --backend cuda --model $SMOL --stages 1 --arms eager,pipelined,batched --batch 8 --steps 64 > $OUT/bench-$v-$rep.txt 2>&1
  echo "$rep $v $(grep -E 'host enqueue' $OUT/bench-$v-$rep.txt | sed 's/.*host enqueue//') | $(grep -E '^  (reference|eager|pipelined|batched)' $OUT/bench-$v-$rep.txt | sed -E 's/ +/ /g; s/tok\/s//' | cut -c1-60 | tr '\n' '|')"
done; done
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-skip 1520 --launch-count 608 $D/v6 bench --backend cuda --model $SMOL --stages 1 --arms eager --steps 16 >$OUT/ncu-r1.csv 2>$OUT/ncu.err
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-skip 7600 --launch-count 304 $D/v6 bench --backend cuda --model $SMOL --stages 1 --arms batched --batch 8 --steps 16 >$OUT/ncu-r8.csv 2>>$OUT/ncu.err
python3 - $OUT <<'PY'
import csv,sys,collections
for f in ["ncu-r1.csv","ncu-r8.csv"]:
    rows=[r for r in csv.reader(open(sys.argv[1]+"/"+f)) if len(r)>10]
    h=rows[0]; ki=h.index("Kernel Name"); vi=h.index("Metric Value"); gi=h.index("Grid Size") if "Grid Size" in h else None
    d=collections.defaultdict(list)
    for r in rows[1:]:
        try: v=float(r[vi].replace(",",""))
        except: continue
        d[(r[ki], r[gi] if gi else "")].append(v)
    tot=sum(sum(v) for v in d.values()); n=sum(len(v) for v in d.values())
    print(f, "kernels", n, "total us", tot/1000)
    for k,v in sorted(d.items(), key=lambda kv:-sum(kv[1])):
        print(f"  {k[0][:20]:20} {k[1]:14} n={len(v):4} mean={sum(v)/len(v)/1000:7.2f}us sum={sum(v)/1000:8.1f}")
PY
