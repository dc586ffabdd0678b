#!/usr/bin/env bash
# Issue 13 on ONE GPU: the prime and verify arms on CUDA. Usage, from the repository root:
#
#   scripts/gpu-h13.sh BIN MODELDIR OUT
#
# MODELDIR holds SmolLM2-135M-Instruct.Q4_1.gguf and gemma-3-270m-q4_k_m.gguf (a synthetic
# llama8b-shaped file is written there too). Sections, about 4 minutes in all:
#   gates   prime,verify at N = 1, 2, 4, 8 (all stages on device 0, one stream per stage),
#           both real models, --prompt-len 23 --gen-len 16 (chunks 1, 8, 16, 23; 3 repeats)
#   faults  no-rollback (verify, N=2) and chunk-kv-order (prime, 64-row chunks, N=2), 5 runs
#           each: both must FAIL; chunk-kv-order is a race on the GPU (rows of one launch
#           reading siblings' slots), so k/5 is the finding
#   soak    x20 of --arms prime --repeat 5 on SmolLM2, N=4: bar 20/20
#   fp      the seeds' three-fingerprints experiment: a 24-token prompt primed 11 times in
#           one process (chunks of 24, then of 8), N=4 on one device; the fingerprint of a
#           prime is the hash of its 24 logits hashes: bar one fingerprint, 11/11 (and it
#           equals the one-row reference's)
#   bench   prefill tok/s of the prime arm at C = 64, 128, 512 (512-token prompt), one stage
#           and N=2, on `synth --preset llama8b --layers 8 --quant q4_k`
# GPUS=2 (environment): the gates, faults and soak place their stages over devices 0 and 1
# (first half of the stages on 0, the rest on 1; N=1 stays on 0), so every boundary in the
# middle crosses between the GPUs; default 1 (every stage on device 0).
# SECTIONS (environment): the sections to run, default all ("gates faults soak fp bench");
# they run in the order above whatever the order given.
# OUT gets at most 4 files: summary.txt (the table, printed last too), log.txt,
# receipts.tar.gz, bench.json.
set -u
BIN=${1:?usage: scripts/gpu-h13.sh BIN MODELDIR OUT}
M=${2:?usage: scripts/gpu-h13.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-h13.sh BIN MODELDIR OUT}
WORK=${WORK:-/tmp/gpu-h13}
# BACKEND=cpu rehearses the script here (slowly); the lead runs it with the default.
BACKEND=${BACKEND:-cuda}
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
row() { printf '%-58s %s\n' "$1" "$2" | tee -a "$SUM" >/dev/null; }
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true
T0=$(date +%s)
SECTIONS=${SECTIONS:-gates faults soak fp bench}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
GPUS=${GPUS:-1}
# devs N: the --devices list of an N-stage gate (GPUS=2: first half on 0, the rest on 1).
devs() {
    local n=$1 i l=
    for ((i = 0; i < n; i++)); do
        if [ "$GPUS" = 2 ] && [ $((2 * i)) -ge "$n" ] && [ "$n" -gt 1 ]; then l+=1; else l+=0; fi
        [ $i -lt $((n - 1)) ] && l+=,
    done
    echo "$l"
}

# gate NAME ARGS...: one gate, receipt in $WORK/r/NAME.json; the row is its exit code and
# verdict lines.
gate() {
    local name=$1
    shift
    local t
    t=$(date +%s%N)
    timeout 120 "$BIN" --backend "$BACKEND" "$@" --receipt "$WORK/r/$name.json" -q >"$WORK/$name.out" 2>&1
    local rc=$?
    cat "$WORK/$name.out" >>"$LOG"
    local v
    v=$(grep -E '^(prime|verify|eager) ' "$WORK/$name.out" | awk '{print $1"="$2}' | tr '\n' ' ')
    row "$name" "rc=$rc $v($(( ($(date +%s%N) - t) / 1000000 )) ms)"
}

# 1. gates
want gates && for mdl in smol gemma; do
    f=$SMOL
    [ $mdl = gemma ] && f=$GEMMA
    for n in 1 2 4 8; do
        gate "gate-$mdl-n$n" --model "$f" --stages $n --devices "$(devs $n)" --arms prime,verify --prompt-len 23 --gen-len 16
    done
done

# 2. faults (5 runs each; every run must FAIL)
want faults && for spec in "no-rollback|--arms verify" "chunk-kv-order|--arms prime --chunk 64 --prompt-len 64 --gen-len 4 --repeat 2"; do
    fault=${spec%%|*}
    args=${spec#*|}
    timeout 150 "$BIN" soak --runs 5 --backend "$BACKEND" --model "$SMOL" --stages 2 --devices "$(devs 2)" $args --fault "$fault" \
        --out "$WORK/r/fault-$fault" >"$WORK/fault-$fault.out" 2>&1
    rc=$?
    cat "$WORK/fault-$fault.out" >>"$LOG"
    pass=$(grep -oE '[0-9]+/5 PASS' "$WORK/fault-$fault.out" | head -1)
    row "fault $fault (smol N=2, 5 runs; want 0/5 PASS)" "rc=$rc ${pass:-?}"
done

# 3. soak x20, --arms prime --repeat 5
want soak && timeout 200 "$BIN" soak --runs 20 --backend "$BACKEND" --model "$SMOL" --stages 4 --devices "$(devs 4)" --arms prime --repeat 5 \
    --prompt-len 23 --gen-len 16 --out "$WORK/r/soak-prime" >"$WORK/soak.out" 2>&1
rc=$?
want soak && cat "$WORK/soak.out" >>"$LOG" &&
row "soak x20 smol N=4 --arms prime --repeat 5 (want 20/20)" "rc=$rc $(grep -oE '[0-9]+/20 PASS' "$WORK/soak.out" | head -1)"

# 4. three fingerprints: 11 primes of a 24-token prompt in one process
fingerprints() { # RECEIPT -> "distinct fingerprints, primes, equal to the reference's"
    python3 - "$1" <<'EOF'
import hashlib, json, sys
r = json.load(open(sys.argv[1]))
ref = hashlib.sha256("".join(s["logits_blake3"] for s in r["reference"]["steps"]).encode()).hexdigest()
by = {}
for a in r["arms"]:
    if a["name"] != "prime":
        continue
    for s in a["steps"]:
        by.setdefault((s["chunk"], s["repeat"]), []).append(s["logits_blake3"])
fps = {k: hashlib.sha256("".join(v).encode()).hexdigest() for k, v in by.items()}
d = sorted(set(fps.values()))
print(f"{len(d)} fingerprint(s) over {len(fps)} primes, reference's: {'yes' if d == [ref] else 'NO'}")
EOF
}
want fp && for mdl in smol gemma; do
    f=$SMOL
    [ $mdl = gemma ] && f=$GEMMA
    for c in 24 8; do
        name="fp-$mdl-n4-c$c"
        gate "$name" --model "$f" --stages 4 --arms prime --chunk $c --repeat 11 --prompt-len 24 --gen-len 0
        [ -f "$WORK/r/$name.json" ] && row "  $name" "$(fingerprints "$WORK/r/$name.json")"
    done
done

# 5. bench: prefill at C = 64, 128, 512 on a llama8b-shaped 8-layer Q4_K model
if want bench; then
    L8="$M/llama8b-L8-q4k.gguf"
    [ -f "$L8" ] || timeout 120 "$BIN" synth --preset llama8b --layers 8 --quant q4_k -o "$L8" >>"$LOG" 2>&1
    timeout 150 "$BIN" bench --backend "$BACKEND" --model "$L8" --stages 2 --arms prime --chunk 64,128,512 \
        --prompt-len 512 --steps 16 --receipt "$OUT/bench.json" >"$WORK/bench.out" 2>&1
    rc=$?
    cat "$WORK/bench.out" >>"$LOG"
    row "bench llama8b-L8 q4_k (prefill, 512 tokens)" "rc=$rc"
    grep -E 'prefill|reference \(1 stage' "$WORK/bench.out" | while read -r l; do row "  $l" ""; done

fi

row "total" "$(($(date +%s) - T0)) s"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
cat "$SUM"
