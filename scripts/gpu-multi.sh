#!/usr/bin/env bash
# Cross-device gates and soaks (issue 6), one call on the GPU machine:
#
#   scripts/gpu-multi.sh BIN MODELDIR OUTDIR [SECTIONS]
#
# Adapts to the GPUs the machine has (G, from nvidia-smi): N stages go on devices in
# contiguous blocks (stage s on device s*G/N: with G=4, N=4 -> 0,1,2,3; G=2, N=4 ->
# 0,0,1,1; G=1 -> all on device 0, the same-device runtime). With G > 1 every boundary
# between two devices must use the peer transport (transport auto) and every stage's
# weights, scratch and KV cache must be measured on its own device: both are checked in
# each receipt (`gate_extra` below), not assumed.
#
# SECTIONS (default all): big gates host soak faults bench
#  big     a synthetic llama of >= 8 GiB (45 x 4096, q8_0: 8.75e9 bytes), generated here
#          unless present
#  gates   N in {2, 4, 8} for SmolLM2, Gemma-3 and the big model, all arms, transport auto
#  host    the same placements with --transport host (host bounce), N in {2, 4}
#  soak    x20 of the N=2 and N=4 pipelined gates (SmolLM2), then x100 of N=2
#  faults  misplaced-cache (must FAIL where the first and last stage differ in device),
#          rx-no-wait and no-exit-publish across devices, 20 runs each
#  bench   pipelined vs eager at N=2 and N=4 across devices (SmolLM2, Gemma-3, big)
# Output: OUTDIR/summary.txt (the table), OUTDIR/multi.tgz (receipts, soak summaries, log).
# Env: ONLY="smol gemma big" restricts the per-model sections; BACKEND=cpu is a dry run.
set -u
BIN=$1
M=$2
OUT=$3
SECTIONS=${4:-big gates host soak faults bench}
source "$(dirname "$0")/gpu-lib.sh"
BIG="$M/synth-llama-8g.gguf"
C="--backend ${BACKEND:-cuda} -q"  # BACKEND=cpu: a dry run of this script (CPU domains)
G=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader >>"$SUM"
row "GPUs on this machine" "$G"

# devs N: the device list of N stages in contiguous blocks over the G GPUs.
devs() {
    local n=$1 s out=""
    for ((s = 0; s < n; s++)); do out="$out${out:+,}$((s * G / n))"; done
    echo "$out"
}

# gate_extra RECEIPT (gpu-lib.sh's gate prints it): peer on every cross-device boundary
# (host where the gate, named *-host, asked for --transport host), dtod within a device, and
# nothing misplaced; "placement ok" or what is wrong.
gate_extra() {
    printf 'placement '
    python3 - "$1" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    print("no receipt"); sys.exit()
r = json.load(open(sys.argv[1]))
p = r["placement"]
bad = []
host = sys.argv[1].endswith("-host.json")  # what the script asked for (gate name)
for b, t in enumerate(p["transports"]):
    a, c = p["devices"][b], p["devices"][b + 1]
    want = "host" if host and a != c else ("dtod" if a == c else "peer")
    if host and a == c:
        want = t  # same-device boundaries under --transport host: whatever the plan chose
    if t != want:
        bad.append(f"boundary {b} ({a}->{c}) {t}, want {want}")
if not p.get("resident"):
    bad.append("no measured residency in the receipt")
for st in p.get("resident", []):
    for part in ("weights", "scratch", "cache"):
        for e in st[part]:
            if e["device"] != st["placed"]:
                bad.append(f"stage {st['stage']} {part} on {e['device']}, placed {st['placed']}")
bad += p.get("misplaced", [])
print("ok" if not bad else "; ".join(bad[:4]))
PY
}


if want big && [ ! -f "$BIG" ]; then
    t0=$(date +%s)
    "$BIN" synth --arch llama --layers 45 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 \
        --vocab 32000 --quant q8_0 --seed 13 -o "$BIG" >>"$LOG" 2>&1
    row "synth 45x4096 llama q8_0: $(stat -c %s "$BIG") bytes" "$(($(date +%s) - t0)) s"
fi

MODELS="smol:$SMOL gemma:$GEMMA"
[ -f "$BIG" ] && MODELS="$MODELS big:$BIG"
# ONLY="big" (say): the gates, host and bench sections on those models alone.
if [ -n "${ONLY:-}" ]; then
    MODELS=$(for mm in $MODELS; do [[ " $ONLY " == *" ${mm%%:*} "* ]] && echo "$mm"; done)
fi

if want gates; then
    for mm in $MODELS; do
        for n in 2 4 8; do
            gate "${mm%%:*}-n$n" --model "${mm#*:}" --stages $n --devices "$(devs $n)"
        done
    done
fi

if want host; then
    for mm in $MODELS; do
        for n in 2 4; do
            gate "${mm%%:*}-n$n-host" --model "${mm#*:}" --stages $n --devices "$(devs $n)" \
                --transport host
        done
    done
fi

# soak NAME RUNS ARGS...: k/N PASS and the class, from the soak's summary.json.
soak() {
    local name=$1 runs=$2
    shift 2
    local t0=$(date +%s)
    "$BIN" soak --runs "$runs" $C "$@" --out "$OUT/r/$name" >>"$LOG" 2>&1
    local rc=$?
    local s
    s=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['passed']}/{d['runs_done']} PASS, {d['class']}\")" \
        "$OUT/r/$name/summary.json" 2>&1)
    row "soak $name (exit $rc)" "$s, $(($(date +%s) - t0)) s"
}

if want soak; then
    soak smol-n2-pipelined-x20 20 --model "$SMOL" --stages 2 --devices "$(devs 2)" --arms pipelined --window 4
    soak smol-n4-pipelined-x20 20 --model "$SMOL" --stages 4 --devices "$(devs 4)" --arms pipelined --window 4
    soak smol-n2-all-x100 100 --model "$SMOL" --stages 2 --devices "$(devs 2)" --window 4
fi

if want faults; then
    # The placement law: must FAIL (deterministically) wherever stage 0 and the last stage
    # are on different devices; with one GPU it cannot open and passes.
    soak fault-misplaced-cache-n2 5 --model "$SMOL" --stages 2 --devices "$(devs 2)" --fault misplaced-cache
    for f in rx-no-wait no-exit-publish; do
        soak "fault-$f-n4" 20 --model "$SMOL" --stages 4 --devices "$(devs 4)" --window 4 \
            --jitter-us 300 --fault $f
    done
fi

if want bench; then
    for mm in $MODELS; do
        for n in 2 4; do
            echo "=== bench ${mm%%:*} N=$n devices $(devs $n)" >>"$SUM"
            "$BIN" bench --backend "${BACKEND:-cuda}" --model "${mm#*:}" --stages $n --devices "$(devs $n)" \
                --steps 64 2>>"$LOG" | grep -E "reference|eager|pipelined|batched" >>"$SUM"
        done
    done
fi

tar czf "$OUT/multi.tgz" -C "$OUT" r log.txt && rm -rf "$OUT/r"
cat "$SUM"
