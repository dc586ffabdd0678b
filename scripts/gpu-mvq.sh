#!/usr/bin/env bash
# GPU check of the vectorized matvec (kernels/mvq.cu) against the previous engine, on the
# GPU machine: scripts/gpu-mvq.sh OLD_BIN NEW_BIN OUT [SECTIONS]
#  cmp:   every vectorized format on a 1024-wide synthetic llama: CUDA vs CPU top-20 on a tape
#         (new build), and a 3-stage gate with batch 5 (bit-identity over splits and rows)
#  b8:    gates of every vectorized format at B = 8 (N=2, batched) and B = 6 (N=3, all arms)
#  small: the two real models' shapes (synthetic): bench of both builds, a gate
#  bench: the 8B/70B-shaped synthetic models, `bench` of both builds in the same call
#  ncu:   Nsight Compute sections of 4 vectorized launches (8B q4_k, eager)
#  prof:  per-launch GPU times (PPN_CUDA_PROF) of the new build on the 8B Q4_K model
set -u
OLD=$1 NEW=$2 OUT=$3
SECTIONS=${4:-cmp bench prof}
M=/tmp/m
mkdir -p "$M" "$OUT/r"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >>"$SUM"
row() { printf '%-60s %s\n' "$1" "$2" | tee -a "$SUM"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1
python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 2000 for i in range(20)]}))" >"$OUT/tape.json"
if want cmp; then
    for q in q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k; do
        m="$M/w-$q.gguf"
        "$NEW" synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant $q -o "$m" >>"$LOG" 2>&1
        for be in cpu cuda; do
            "$NEW" --backend $be -q --model "$m" --stages 1 --arms eager --tape "$OUT/tape.json" --topk 20 --receipt "$OUT/r/cmp-$q-$be.json" >>"$LOG" 2>&1
        done
        python3 - "$OUT/r" "$q" <<'PY' | tee -a "$SUM"
import json, sys
d, m = sys.argv[1], sys.argv[2]
try:
    a = json.load(open(f"{d}/cmp-{m}-cpu.json"))["reference"]["steps"]
    b = json.load(open(f"{d}/cmp-{m}-cuda.json"))["reference"]["steps"]
except Exception as e:
    print(f"cpu-vs-cuda {m:<6} ERROR {e}"); sys.exit(0)
worst, top1 = 0.0, 0
for sa, sb in zip(a, b):
    ta, tb = dict(map(tuple, sa["topk"])), dict(map(tuple, sb["topk"]))
    for tok, v in ta.items():
        worst = max(worst, abs(v - tb[tok])) if tok in tb else float("inf")
    top1 += sa["topk"][0][0] == sb["topk"][0][0]
print(f"cpu-vs-cuda {m:<6} top-20 max|diff| {worst:.3e}  top-1 agree {top1}/{len(a)}")
PY
        "$NEW" --backend cuda -q --model "$m" --stages 3 --splits 1,2 --batch 5 --window 4 --receipt "$OUT/r/gate-$q.json" >>"$LOG" 2>&1
        row "gate $q N=3 B=5 (all arms)" "exit $?"
        "$NEW" --backend cuda -q --model "$m" --stages 2 --batch 8 --arms batched --receipt "$OUT/r/gate8-$q.json" >>"$LOG" 2>&1
        row "gate $q N=2 B=8 batched" "exit $?"
        "$NEW" --backend cuda -q --model "$m" --stages 2 --batch 8 --arms batched --pdl off --receipt "$OUT/r/gate8-$q-nopdl.json" >>"$LOG" 2>&1
        "$NEW" diff "$OUT/r/gate8-$q.json" "$OUT/r/gate8-$q-nopdl.json" >>"$LOG" 2>&1
        row "diff $q B=8 pdl on vs off" "exit $? (0 = same)"
    done
fi
if want b8; then
    # Batched tiles over 4 rows (4 weight rows per warp): gates at B = 6 and 8.
    for q in q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k; do
        m="$M/w-$q.gguf"
        [ -f "$m" ] || "$NEW" synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant $q -o "$m" >>"$LOG" 2>&1
        "$NEW" --backend cuda -q --model "$m" --stages 2 --batch 8 --arms batched --receipt "$OUT/r/b8-$q.json" >>"$LOG" 2>&1
        r1=$?
        "$NEW" --backend cuda -q --model "$m" --stages 3 --splits 1,2 --batch 6 --receipt "$OUT/r/b6-$q.json" >>"$LOG" 2>&1
        row "gate $q N=2 B=8 batched / N=3 B=6 all arms" "exit $r1 / $?"
    done
fi
synth8b() { # NAME LAYERS QUANT [70b]
    local f="$M/$1.gguf"
    [ -f "$f" ] && return
    if [ "${4:-}" = 70b ]; then
        "$NEW" synth --arch llama --layers $2 --embd 8192 --heads 64 --kv-heads 8 --ff 28672 --vocab 32000 --quant $3 -o "$f" >>"$LOG" 2>&1
    else
        "$NEW" synth --arch llama --layers $2 --embd 4096 --heads 32 --kv-heads 8 --ff 14336 --vocab 32000 --quant $3 -o "$f" >>"$LOG" 2>&1
    fi
}
if want ncu; then
    synth8b llama8b-l8-q4_k 8 q4_k
    S="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis"
    timeout 240 ncu --clock-control none $S -k regex:mvq --launch-skip 200 --launch-count 4 \
        "$NEW" bench --backend cuda --model "$M/llama8b-l8-q4_k.gguf" --stages 1 --arms eager --steps 8 >"$OUT/ncu.txt" 2>&1
    row "ncu mvq x4" "exit $?"
fi
if want bench || want prof; then
    t0=$(date +%s)
    synth8b llama8b-l8-q4_k 8 q4_k &
    synth8b llama8b-l8-q8_0 8 q8_0 &
    synth8b llama8b-l8-q6_k 8 q6_k &
    synth8b llama70b-l2-q4_k 2 q4_k 70b &
    wait
    row "synth 4 models" "$(( $(date +%s) - t0 )) s"
fi
bench_both() { # MODEL: eager and batched B=8 of both builds, one row each
    for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        echo "== bench $1 $b" >>"$OUT/bench.txt"
        "$bin" bench --backend cuda --model "$M/$1.gguf" --stages 1 --arms batched --batch 8 --steps 64 >>"$OUT/bench.txt" 2>&1
        row "bench $1 $b" "$(grep -E 'eager|batched' "$OUT/bench.txt" | tail -2 | tr -s ' ' | tr '\n' ' ')"
    done
}
if want small; then
    # The two real models' shapes (576 / 640 wide), synthetic, both builds.
    "$NEW" synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 -o "$M/smolshape-q4_1.gguf" >>"$LOG" 2>&1
    "$NEW" synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --ff 2048 --vocab 262144 --quant q8_0 -o "$M/gemmashape-q8_0.gguf" >>"$LOG" 2>&1
    for m in smolshape-q4_1 gemmashape-q8_0; do
        bench_both $m
        "$NEW" --backend cuda -q --model "$M/$m.gguf" --stages 3 --batch 5 --receipt "$OUT/r/gate-$m.json" >>"$LOG" 2>&1
        row "gate $m N=3 B=5 (all arms)" "exit $?"
    done
fi
if want prof; then
    PPN_CUDA_PROF=1 "$NEW" bench --backend cuda --model "$M/llama8b-l8-q4_k.gguf" --stages 1 --arms eager --steps 32 >"$OUT/prof.txt" 2>&1
    grep -E "prof|tok/s" "$OUT/prof.txt" | tee -a "$SUM"
fi
if want bench; then
    for m in llama8b-l8-q4_k llama8b-l8-q8_0 llama8b-l8-q6_k llama70b-l2-q4_k; do
        bench_both $m
    done
fi
tar czf "$OUT/receipts.tar.gz" -C "$OUT" r tape.json 2>/dev/null
echo "---- summary"; cat "$SUM"
