#!/usr/bin/env bash
set -u
D=$(dirname "$0"); OUT=${OUT:-/tmp/out}; mkdir -p $OUT/r
SMOL=/tmp/smolshape.gguf
$D/v0 synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $SMOL >/dev/null
for v in v0 v9; do
  $D/$v --backend cuda -q --model $SMOL --stages 2 --receipt $OUT/r/n2-$v.json >>$OUT/log.txt 2>&1; echo "$v n2 exit $?"
  $D/$v --backend cuda -q --model $SMOL --stages 1 --arms batched --batch 8 --receipt $OUT/r/b8-$v.json >>$OUT/log.txt 2>&1; echo "$v b8 exit $?"
done
echo "v9 diff: $($D/v0 diff $OUT/r/n2-v0.json $OUT/r/n2-v9.json 2>&1 | head -1 | cut -c1-30) / $($D/v0 diff $OUT/r/b8-v0.json $OUT/r/b8-v9.json 2>&1 | head -1 | cut -c1-30)"
GEM=/tmp/gemmashape.gguf
$D/v0 synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 --vocab 32768 --quant q4_k --seed 5 -o $GEM >/dev/null
for v in v0 v9; do
  $D/$v --backend cuda -q --model $GEM --stages 2 --receipt $OUT/r/gn2-$v.json >>$OUT/log.txt 2>&1; echo "$v gem n2 exit $?"
  $D/$v --backend cuda -q --model $GEM --stages 1 --arms batched --batch 8 --receipt $OUT/r/gb8-$v.json >>$OUT/log.txt 2>&1; echo "$v gem b8 exit $?"
done
echo "v9 gem diff: $($D/v0 diff $OUT/r/gn2-v0.json $OUT/r/gn2-v9.json 2>&1 | head -1 | cut -c1-30) / $($D/v0 diff $OUT/r/gb8-v0.json $OUT/r/gb8-v9.json 2>&1 | head -1 | cut -c1-30)"
for rep in 1 2; do for v in v0 v8 v9; do
  $D/$v bench --backend cuda --model $SMOL --stages 1 --arms eager,pipelined,batched --batch 8 --steps 64 > $OUT/bench-$v-$rep.txt 2>&1
  echo "$rep $v $(grep -E 'host enqueue' $OUT/bench-$v-$rep.txt | sed 's/.*host enqueue//') | $(grep -E '^  (reference|eager|pipelined|batched)' $OUT/bench-$v-$rep.txt | sed -E 's/ +/ /g; s/tok\/s//' | cut -c1-60 | tr '\n' '|')"
done; done
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv --launch-skip 7600 --launch-count 304 $D/v9 bench --backend cuda --model $SMOL --stages 1 --arms batched --batch 8 --steps 16 >$OUT/ncu-r8.csv 2>$OUT/ncu.err
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv --launch-skip 1520 --launch-count 608 $D/v9 bench --backend cuda --model $SMOL --stages 1 --arms eager --steps 16 >$OUT/ncu-r1.csv 2>>$OUT/ncu.err
python3 - $OUT <<'PY'
import csv,sys,collections
for f in ["ncu-r1.csv","ncu-r8.csv"]:
    rows=[r for r in csv.reader(open(sys.argv[1]+"/"+f)) if len(r)>10]
    h=rows[0]; ki=h.index("Kernel Name"); vi=h.index("Metric Value"); mi=h.index("Metric Name"); gi=h.index("Grid Size"); ii=h.index("ID")
    d=collections.defaultdict(lambda: collections.defaultdict(float)); cnt=collections.Counter()
    for r in rows[1:]:
        v=float(r[vi].replace(",",""))
        d[(r[ki],r[gi])][r[mi]]+=v
        if r[mi].startswith("gpu__time"): cnt[(r[ki],r[gi])]+=1
    tot=sum(x["gpu__time_duration.sum"] for x in d.values())
    print(f, "total us", tot/1000)
    for k,x in sorted(d.items(), key=lambda kv:-kv[1]["gpu__time_duration.sum"]):
        n=cnt[k]; print(f"  {k[0][:12]:12} {k[1]:12} n={n:4} mean={x['gpu__time_duration.sum']/n/1000:7.2f}us inst={x['smsp__inst_executed.sum']/n/1e6:6.2f}M")
PY
