#!/usr/bin/env bash
set -u
D=$(dirname "$0"); OUT=${OUT:-/tmp/out}; mkdir -p $OUT
SMOL=/tmp/smolshape.gguf
$D/v0 synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $SMOL >/dev/null
M="--metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
ncu --clock-control none --cache-control none $M --launch-skip 7651 --launch-count 5 $D/v6 bench --backend cuda --model $SMOL --stages 1 --arms batched --batch 8 --steps 16 >$OUT/ncu-r8.txt 2>$OUT/ncu.err
ncu --clock-control none --cache-control none $M --launch-skip 1571 --launch-count 5 $D/v6 bench --backend cuda --model $SMOL --stages 1 --arms eager --steps 16 >$OUT/ncu-r1.txt 2>>$OUT/ncu.err
ncu --clock-control none --cache-control none $M --launch-skip 1671 --launch-count 1 $D/v6 bench --backend cuda --model $SMOL --stages 1 --arms eager --steps 16 >$OUT/ncu-head.txt 2>>$OUT/ncu.err
for f in r8 r1 head; do python3 - $OUT/ncu-$f.txt <<'PY'
import sys,re
cur=None
for l in open(sys.argv[1]):
    m=re.match(r'\s+(\w+) \((\d+), (\d+), 1\)x',l)
    if m: cur=m.group(1)+"("+m.group(2)+","+m.group(3)+")"; print(cur); continue
    if cur is None: continue
    p=l.split()
    if len(p)>=2:
        name=p[0]; val=p[-1]
        if 'stalled' in name:
            try:
                if float(val.replace(',',''))<0.3: continue
            except: continue
            name=name.replace('smsp__average_warps_issue_stalled_','st_').replace('_per_issue_active.ratio','')
        elif not any(k in name for k in ['duration','inst_executed','throughput','issue_active','warps_active']): continue
        print("   ",name,val)
PY
done
