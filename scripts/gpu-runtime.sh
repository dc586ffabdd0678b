#!/usr/bin/env bash
# The CUDA N-stage runtime checks (issue 5), run on the GPU machine in one call:
#
#   scripts/gpu-runtime.sh BIN MODELDIR OUTDIR [SECTIONS]
#
# SECTIONS (default all): gates soak faults bench
#  gates  same-device placements N in {2,4,8} (uneven splits, one-layer stages) for SmolLM2,
#         Gemma-3 and a >= 2 GB synthetic llama model; every arm must PASS.
#  soak   x20 then x100 of the same-device N=4 gate (SmolLM2): must be 20/20, 100/100.
#  faults every --fault, 20 runs each, natural timing and under --jitter-us: how often FAIL.
#  bench  pipelined vs eager at N=2 and N=4 on one device, SmolLM2 and Gemma-3.
# Receipts, soak summaries and logs land in OUTDIR/r; OUTDIR/summary.txt is the table.
set -u
BIN=$1
M=$2
OUT=$3
SECTIONS=${4:-gates soak faults bench}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
mkdir -p "$OUT/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >>"$SUM"
: >>"$LOG"
row() { printf '%-64s %s\n' "$1" "$2" | tee -a "$SUM"; }
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
BIG="$M/synth-llama-2g.gguf"
C="--backend cuda -q"

# gate NAME ARGS...: expect exit 0 (every arm PASS).
gate() {
    local name=$1
    shift
    local t0=$(date +%s%N)
    "$BIN" $C "$@" --receipt "$OUT/r/$name.json" >>"$LOG" 2>&1
    local rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
    if [ $rc = 0 ]; then row "gate $name" "PASS (${ms} ms)"; else row "gate $name" "FAIL exit $rc (${ms} ms)"; fi
}

if want gates; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$SUM"
    if [ ! -f "$BIG" ]; then
        t0=$(date +%s)
        "$BIN" synth --arch llama --layers 12 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 --vocab 32000 \
            --quant q8_0 --seed 11 -o "$BIG" >>"$LOG" 2>&1
        row "synth 12x4096 llama q8_0: $(stat -c %s "$BIG") bytes" "$(($(date +%s) - t0)) s"
    fi
    gate smol-n2-split1 --model "$SMOL" --stages 2 --splits 1
    gate smol-n4-split1-15-29 --model "$SMOL" --stages 4 --splits 1,15,29
    gate smol-n8-even --model "$SMOL" --stages 8
    gate gemma-n2-split17 --model "$GEMMA" --stages 2 --splits 17
    gate gemma-n4-split5-6-12 --model "$GEMMA" --stages 4 --splits 5,6,12
    gate gemma-n8-even --model "$GEMMA" --stages 8
    gate big-n2-split3 --model "$BIG" --stages 2 --splits 3
    gate big-n4-even --model "$BIG" --stages 4
    gate big-n8-split1-to-7 --model "$BIG" --stages 8 --splits 1,2,3,4,5,6,7
    gate smol-n4-host --model "$SMOL" --stages 4 --transport host
fi

if want soak; then
    for n in 20 100; do
        t0=$(date +%s)
        "$BIN" soak $C --runs $n --out "$OUT/r/soak-smol-n4-x$n" --model "$SMOL" --stages 4 >"$OUT/r/soak-smol-n4-x$n.txt" 2>&1
        row "soak x$n smol N=4 one device, all arms: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/soak-smol-n4-x$n.txt")" "$(($(date +%s) - t0)) s"
        find "$OUT/r/soak-smol-n4-x$n" -name 'run-*.json' ! -name 'run-001.json' -delete
    done
fi

if want faults; then
    for f in rx-no-wait no-war-guard single-slot shared-scratch slot-first-use no-exit-publish no-reverse-publish no-load-barrier; do
        for j in 0 300; do
            t0=$(date +%s)
            "$BIN" soak $C --runs 20 --out "$OUT/r/fault-$f-j$j" --stages 4 --window 4 --jitter-us $j --fault $f \
                >"$OUT/r/fault-$f-j$j.txt" 2>&1
            find "$OUT/r/fault-$f-j$j" -name 'run-*.json' ! -name 'run-001.json' -delete
            row "fault $f jitter $j us: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/fault-$f-j$j.txt")" "$(($(date +%s) - t0)) s"
        done
    done
    t0=$(date +%s)
    "$BIN" soak $C --runs 20 --out "$OUT/r/clean-j300" --stages 4 --window 4 --jitter-us 300 >"$OUT/r/clean-j300.txt" 2>&1
    find "$OUT/r/clean-j300" -name 'run-*.json' ! -name 'run-001.json' -delete
    row "no fault, jitter 300 us: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/clean-j300.txt")" "$(($(date +%s) - t0)) s"
fi

if want bench; then
    for model in "$SMOL" "$GEMMA"; do
        for n in 2 4; do
            echo "=== bench $(basename "$model") N=$n" >>"$SUM"
            "$BIN" bench --backend cuda --model "$model" --stages $n --steps 64 >>"$SUM" 2>&1
        done
    done
fi
