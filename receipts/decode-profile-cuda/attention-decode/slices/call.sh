#!/usr/bin/env bash
# Issue 30, step 17 (tried, not kept: d-slices, several blocks per head in the one-row
# attention), one call on one H200 (2026-12-03). N = cfb742e with tried.patch applied, O =
# cfb742e. Proves, for N against O:
#  1. the kernel alone (probe.cu, a CUDA graph of 100 PDL launches per figure; mksrc.py
#     builds its source from each tree's kernels): microseconds a launch of O's
#     attention_early, N's unsliced and N's with the engine's slice count (att_dslices), and
#     the output bits of each, at 11 positions and four head shapes (probe.txt,
#     probe-summary.txt: `same bits` = N's hash equals O's);
#  2. the same bits in the engine: scripts/decode-ab.sh over every arm and serve at N = 2 on
#     five shapes (head widths 64, 128, 256; head norms, biases), and N with --graphs off /
#     --pdl off against O (same.txt);
#  3. eager and B=8 speed, O and N alternating twice (speed.txt);
#  4. every arm PASS at N = 1 and 3, prompts past gemma3's 512 window (gates.txt), and a soak
#     x10 of the pipelined arm on one GPU with jitter (soak.txt).
# From the repository root, with .stage/ carried (.stage/bin/ppn-gate-{old,new}, and
# .stage/attprobe/att_{old,new}_src.cu made by ../mksrc.py from each tree): OUT=DIR bash THIS
set -u
D=receipts/decode-profile-cuda/attention-decode
O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate-new
. $D/common.sh
# name heads kv_heads hd style norm ds(the engine's at one row on 132 SMs)
run() { /tmp/ap/old$4 $1 $2 $3 $4 $5 $6 1 1 | sed "s/^/O /"; /tmp/ap/new$4 $1 $2 $3 $4 $5 $6 1 1 | sed "s/^/N /"
        /tmp/ap/new$4 $1 $2 $3 $4 $5 $6 1 $7 | sed "s/^/N /"; }
{ run smol 9 3 64 0 0 2; run qw 14 2 64 0 0 2; run l8 32 8 128 0 0 4; run gem 4 1 256 1 1 8; } > "$OUT"/probe.txt 2>&1
python3 - "$OUT"/probe.txt > "$OUT"/probe-summary.txt <<'PY'
import sys, collections
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 10 or f[5] != "att": continue
    d[(f[1], int(f[4]))][f[0] + " " + f[2]] = (float(f[6]), f[9])
print("shape pos   O early1    N early1   N earlyDS (us a launch; bits against O)")
for k in sorted(d):
    row = d[k]; o = row.get("O early1")
    if not o: continue
    cells = []
    for key in sorted(row):
        if key == "O early1": continue
        us, h = row[key]
        cells.append(f"{key.split()[1]:7s} {us:7.3f} {'same' if h == o[1] else 'DIFFER'}")
    print(f"{k[0]:5s} {k[1]:4d}  {o[0]:7.3f}  " + "  ".join(cells))
PY
cat "$OUT"/probe-summary.txt
SAME="smol:auto qw05:auto q3:auto l8q4k:auto gemq4km:auto" SPEED="smol qw05 gemq4km l8q4k" ROUNDS=2 \
  scripts/decode-ab.sh O=$O N=$N > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
for m in smol gemq4km; do
  G="--backend cuda --model /tmp/ab/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $G --receipt /tmp/ab/o.json > /dev/null 2>&1
  for f in "--graphs off" "--pdl off"; do
    $N $G $f --receipt /tmp/ab/n.json > /dev/null 2>&1; e=$?
    echo "$m N $f against O: exit $e; $($N diff --ignore placement.resident --ignore backend.graphs /tmp/ab/o.json /tmp/ab/n.json 2>&1 | head -4)" >> $OUT/same.txt
  done
done
cat $OUT/same.txt
gates_on "smol gemq4km q3"
cat $OUT/gates.txt
$N soak --runs 10 --out /tmp/ab/soak --backend cuda --model /tmp/ab/gemq4km.gguf --stages 2 --arms pipelined --jitter-us 20 --gen-len 24 -q > $OUT/soak.txt 2>&1
echo "soak exit $?"; tail -2 $OUT/soak.txt
