#!/usr/bin/env bash
# The CUDA N-stage runtime checks (issue 5), run on the GPU machine in one call:
#
#   scripts/gpu-runtime.sh BIN MODELDIR OUTDIR [SECTIONS]
#
# SECTIONS (default all but faults-light): gates soak faults bench
#  (faults-light: the faults that open on the built-in model, and their clean control; no
#  big model needed)
#  gates  same-device placements N in {2,4,8} (uneven splits, one-layer stages) for SmolLM2,
#         Gemma-3 and a >= 2 GB synthetic llama model; every arm must PASS.
#  soak   x20 then x100 of the same-device N=4 gate (SmolLM2): must be 20/20, 100/100.
#  faults every --fault, 20 runs each, in the placement that opens its race window (the big
#         model must exist: run `gates` first or in the same call).
#  bench  pipelined vs eager at N=2 and N=4 on one device, SmolLM2 and Gemma-3.
# Receipts, soak summaries and logs land in OUTDIR/r; OUTDIR/summary.txt is the table.
# A short call: NO_BIG=1 (no 2.5 GB model, no gates on it), SOAK_RUNS="20",
# BENCH_MODELS=path (one model).
set -u
BIN=$1
M=$2
OUT=$3
SECTIONS=${4:-gates soak faults bench}
source "$(dirname "$0")/gpu-lib.sh"
BIG="$M/synth-llama-2g.gguf"
C="--backend cuda -q"


if want gates; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$SUM"
    if [ -z "${NO_BIG:-}" ] && [ ! -f "$BIG" ]; then
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
    if [ -z "${NO_BIG:-}" ]; then
        gate big-n2-split3 --model "$BIG" --stages 2 --splits 3
        gate big-n4-even --model "$BIG" --stages 4
        gate big-n8-split1-to-7 --model "$BIG" --stages 8 --splits 1,2,3,4,5,6,7
    fi
    gate smol-n4-host --model "$SMOL" --stages 4 --transport host
fi

if want soak; then
    for n in ${SOAK_RUNS:-20 100}; do
        t0=$(date +%s)
        "$BIN" soak $C --runs $n --out "$OUT/r/soak-smol-n4-x$n" --model "$SMOL" --stages 4 >"$OUT/r/soak-smol-n4-x$n.txt" 2>&1
        row "soak x$n smol N=4 one device, all arms: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/soak-smol-n4-x$n.txt")" "$(($(date +%s) - t0)) s"
        find "$OUT/r/soak-smol-n4-x$n" -name 'run-*.json' ! -name 'run-001.json' -delete
    done
fi

# fault_soaks < "FAULT FLAGS.." lines: a 20-run soak per line, its PASS count in the table.
fault_soaks() {
    while read -r f flags; do
        t0=$(date +%s)
        tag=$f-$(echo "$flags" | tr -cd 'a-z0-9' | cut -c1-24)
        "$BIN" soak $C --runs 20 --out "$OUT/r/fault-$tag" --fault $f $flags >"$OUT/r/fault-$tag.txt" 2>&1
        find "$OUT/r/fault-$tag" -name 'run-*.json' ! -name 'run-001.json' -delete
        row "fault $f [$flags]: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/fault-$tag.txt")" "$(($(date +%s) - t0)) s"
    done
}

if want faults-light; then
    LIGHT="--stages 4 --window 4"
    fault_soaks <<FAULTS
rx-no-wait $LIGHT
shared-scratch $LIGHT --jitter-us 300
no-exit-publish $LIGHT --jitter-us 300
no-reverse-publish $LIGHT --jitter-us 300
FAULTS
    t0=$(date +%s)
    "$BIN" soak $C --runs 20 --out "$OUT/r/clean-light" $LIGHT --jitter-us 300 >"$OUT/r/clean-light.txt" 2>&1
    find "$OUT/r/clean-light" -name 'run-*.json' ! -name 'run-001.json' -delete
    row "no fault [$LIGHT --jitter-us 300]: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/clean-light.txt")" "$(($(date +%s) - t0)) s"
fi

if want faults; then
    # Each fault with the placement that opens its window on a GPU (measured on the H200):
    # write-after-read faults need a GPU-bound RX stage that lags the TX stage by two steps
    # (one-layer stage 0 of the 2.5 GB model, window 8); the rest show on the built-in model,
    # some only under --jitter-us (the GPU's natural timing rarely loses those races).
    HEAVY="--model $BIG --stages 2 --splits 1 --window 8 --arms pipelined"
    LIGHT="--stages 4 --window 4"
    fault_soaks <<FAULTS
rx-no-wait $LIGHT
no-war-guard $HEAVY
single-slot $HEAVY
shared-scratch $LIGHT --jitter-us 300
slot-first-use $HEAVY
no-exit-publish $LIGHT --jitter-us 300
no-reverse-publish $LIGHT --jitter-us 300
no-load-barrier $HEAVY
no-load-barrier $LIGHT --jitter-us 300
FAULTS
    for flags in "$LIGHT --jitter-us 300" "$HEAVY"; do
        t0=$(date +%s)
        tag=clean-$(echo "$flags" | tr -cd 'a-z0-9' | cut -c1-24)
        "$BIN" soak $C --runs 20 --out "$OUT/r/$tag" $flags >"$OUT/r/$tag.txt" 2>&1
        find "$OUT/r/$tag" -name 'run-*.json' ! -name 'run-001.json' -delete
        row "no fault [$flags]: $(grep -m1 -E "^[0-9]+/[0-9]+ PASS" "$OUT/r/$tag.txt")" "$(($(date +%s) - t0)) s"
    done
fi

if want bench; then
    for model in ${BENCH_MODELS:-"$SMOL" "$GEMMA"}; do
        for n in 2 4; do
            echo "=== bench $(basename "$model") N=$n" >>"$SUM"
            "$BIN" bench --backend cuda --model "$model" --stages $n --steps 64 >>"$SUM" 2>&1
        done
    done
fi
