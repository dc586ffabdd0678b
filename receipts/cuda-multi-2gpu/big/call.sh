#!/usr/bin/env bash
# The one call on nvidia-h200-x2 behind this folder (issue 6, fourth session):
#   bash receipts/cuda-multi-2gpu/big/call.sh .stage/bin/old .stage/bin/cur $OUT
# 1. The review mends (CUDA download restructured, residency tally moved onto Raw) against
#    the previous build (558f81f): the same gates on SmolLM2- and Gemma-3-shaped synthetic
#    models, N=2 across the two GPUs and one-stage B=8; `diff` must say same and the
#    measured residency must be equal.
# 2. The >= 8 GB synthetic model across the two GPUs: scripts/gpu-multi.sh big gates host
#    bench (N=2 on 0,1; N=4 on 0,0,1,1; N=8 on 4+4).
set -u
OLD=$1 CUR=$2 OUT=$3
mkdir -p "$OUT/r" /tmp/m
C="--backend ${BACKEND:-cuda} -q"  # BACKEND=cpu: a dry run
S=/tmp/m/smolshape.gguf G=/tmp/m/gemmashape.gguf
$CUR synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $S >/dev/null
$CUR synth --arch gemma3 --layers 18 --embd 512 --heads 4 --kv-heads 1 --ff 2048 --vocab 32768 --quant q4_k --seed 5 -o $G >/dev/null
for m in smol:$S gemma:$G; do
  for v in old cur; do
    B=$OLD; [ $v = cur ] && B=$CUR
    $B $C --model ${m#*:} --stages 2 --devices 0,1 --receipt $OUT/r/${m%%:*}-n2-$v.json >>$OUT/log.txt 2>&1
    echo "${m%%:*} n2 devices 0,1 $v: exit $?"
    $B $C --model ${m#*:} --stages 1 --arms batched --batch 8 --receipt $OUT/r/${m%%:*}-b8-$v.json >>$OUT/log.txt 2>&1
    echo "${m%%:*} b8 $v: exit $?"
  done
  for g in n2 b8; do
    a=$OUT/r/${m%%:*}-$g-old.json b=$OUT/r/${m%%:*}-$g-cur.json
    # `diff` also compares the placement flags, which ce98b45 changed (a cross-device
    # receipt now spells its transport), so the logits, verdicts and residency are
    # compared directly as well.
    echo "${m%%:*} $g old vs cur: diff: $($CUR diff $a $b 2>&1 | head -1 | cut -d: -f1) $($CUR diff $a $b 2>&1 | sed -n 2p | cut -c1-100); $(python3 -c "
import json, sys
r = [json.load(open(f)) for f in sys.argv[1:]]
for k in ('reference', 'batch_references', 'arms', 'verdict'):
    print(k, 'equal' if r[0][k] == r[1][k] else 'DIFFERENT', end='; ')
print('residency', 'equal' if r[0]['placement']['resident'] == r[1]['placement']['resident'] else 'DIFFERENT')
" $a $b)"
  done
done
ONLY=big bash scripts/gpu-multi.sh $CUR /tmp/m $OUT/big "big gates host bench" >/dev/null
cat $OUT/big/summary.txt
