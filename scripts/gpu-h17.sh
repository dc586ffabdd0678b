#!/usr/bin/env bash
# Issue 17's bars on TWO GPUs of one host (refuses, exit 2, on fewer): the gate with its two
# stages in two processes, the boundary an NCCL send/recv. Usage, from the repository root:
#
#   scripts/gpu-h17.sh BIN MODELDIR OUT
#
# libnccl: $NCCL_LIB if set, else the lib/ of the `nvidia.nccl` Python package (the
# nvidia-nccl-cu13 wheel; torch installs it), passed as --nccl-lib and printed.
# Per model (SmolLM2-135M Q4_1, Gemma-3-270M Q4_K_M from MODELDIR):
#   gate        launch --procs 2 --stages 2 --devices 0,1 --transport nccl, all arms: PASS
#   same-bits   its arms' logits hashes equal the one-process gate's on the same devices
#   soak        soak --runs 20 --procs 2 ... --arms pipelined: 20/20 PASS
#   speed       --gen-len 256 --arms eager,pipelined: eager ms / pipelined ms >= 1.5
#   faults      rx-no-wait (eager and pipelined, --jitter-us 200), no-exit-publish (eager), no-war-guard and single-slot
#               (pipelined, --splits 1 so the receiver lags, --window 4 --jitter-us 200):
#               each must FAIL (exit 1)
#   kill        rank 1 killed 3 s into a long gate: launch exit 2 within 30 s naming it
# Environment: H17_MODELS (default "smol gemma") picks the models, H17_SOAK_RUNS (default 20;
# 0 skips the soak) the soak's runs: a device call's time is short.
# OUT: summary.txt (the table, printed last), log.txt, receipts.tar.gz.
set -u
BIN=${1:?usage: scripts/gpu-h17.sh BIN MODELDIR OUT}
MD=${2:?usage: scripts/gpu-h17.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-h17.sh BIN MODELDIR OUT}
mkdir -p "$OUT"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$NGPU" -lt 2 ]; then
    echo "gpu-h17.sh: needs 2 GPUs on one host (NCCL refuses two ranks on one GPU); this machine has $NGPU. On one GPU run scripts/gpu-h17-smoke.sh." | tee "$SUM" >&2
    exit 2
fi
WORK=$(mktemp -d /tmp/gpu-h17.XXXX)
mkdir -p "$WORK/r"
ROW_W=22
source "$(dirname "$0")/nccl-lib.sh"
if [ -z "$NCCL_DIR" ]; then
    echo "gpu-h17.sh: no libnccl: pip install nvidia-nccl-cu13, or set NCCL_LIB to its lib directory" | tee "$SUM" >&2
    exit 2
fi
echo "libnccl directory: $NCCL_DIR" | tee -a "$SUM"
nvidia-smi -L >>"$SUM" 2>&1
NC=(--backend cuda --stages 2 --devices 0,1 --transport nccl --nccl-lib "$NCCL_DIR" -q)


go nccl-check 60 "$BIN" nccl-check --nccl-lib "$NCCL_DIR" --device 1
[ $RC = 0 ] && row nccl-check ok "$TXT" || row nccl-check FAIL "exit $RC: $TXT"

H17_MODELS=${H17_MODELS:-smol gemma}
H17_SOAK_RUNS=${H17_SOAK_RUNS:-20}
for m in "gemma:$MD/gemma-3-270m-q4_k_m.gguf" "smol:$MD/SmolLM2-135M-Instruct.Q4_1.gguf"; do
    IFS=: read -r tag file <<<"$m"
    [[ " $H17_MODELS " == *" $tag "* ]] || continue
    if [ ! -f "$file" ]; then row "$tag" FAIL "missing $file"; continue; fi
    R="$WORK/r/$tag"
    go "$tag-gate" 300 "$BIN" launch --procs 2 --model "$file" "${NC[@]}" --receipt "$R-gate.json"
    [ $RC = 0 ] && row "$tag gate" ok "$TXT" || row "$tag gate" FAIL "exit $RC: $TXT"
    go "$tag-1proc" 300 "$BIN" --backend cuda --model "$file" --stages 2 --devices 0,1 -q --receipt "$R-1proc.json"
    if [ $RC = 0 ] && python3 - "$R-gate.json" "$R-1proc.json" <<'PY'; then row "$tag same-bits" ok "arm hashes = one-process gate's"; else row "$tag same-bits" FAIL "arm hashes differ from the one-process gate's (or a gate failed)"; fi
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
h = lambda r: [[s["logits_blake3"] for s in x["steps"]] for x in r["arms"]]
sys.exit(0 if h(a) == h(b) and a["reference"] == b["reference"] else 1)
PY
    if [ "$H17_SOAK_RUNS" -gt 0 ]; then
        go "$tag-soak" 600 "$BIN" soak --runs "$H17_SOAK_RUNS" --out "$R-soak" --procs 2 --model "$file" "${NC[@]}" --arms pipelined
        [ $RC = 0 ] && row "$tag soak x$H17_SOAK_RUNS" ok "$(grep -o "[0-9]*/$H17_SOAK_RUNS PASS" "$WORK/$tag-soak.out" | head -1)" || row "$tag soak x$H17_SOAK_RUNS" FAIL "exit $RC: $TXT"
    fi
    go "$tag-speed" 300 "$BIN" launch --procs 2 --model "$file" "${NC[@]}" --gen-len 256 --arms eager,pipelined --receipt "$R-speed.json"
    if [ $RC = 0 ]; then
        ratio=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["timings"]["arm_ms"]; print("%.2f" % (m[0]/m[1]))' "$R-speed.json")
        python3 -c "import sys; sys.exit(0 if $ratio >= 1.5 else 1)" && row "$tag speed" ok "pipelined ${ratio}x eager (bar 1.5)" || row "$tag speed" FAIL "pipelined ${ratio}x eager (bar 1.5)"
    else
        row "$tag speed" FAIL "exit $RC: $TXT"
    fi
    for f in "rx-no-wait:eager,pipelined:--jitter-us 200" "no-exit-publish:eager:" "no-war-guard:pipelined:--splits 1 --window 4 --jitter-us 200" "single-slot:pipelined:--splits 1 --window 4 --jitter-us 200"; do
        IFS=: read -r fault arms extra <<<"$f"
        # shellcheck disable=SC2086
        go "$tag-$fault" 300 "$BIN" launch --procs 2 --model "$file" "${NC[@]}" --fault "$fault" --arms "$arms" $extra --receipt "$R-$fault.json"
        [ $RC = 1 ] && row "$tag $fault" ok "caught: $TXT" || row "$tag $fault" FAIL "exit $RC (want 1, a FAIL): $TXT"
    done
done

# kill: rank 1 dies 3 s into a long gate; the launch must end with exit 2 within 30 s, naming it.
SMOL="$MD/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$SMOL" ]; then
    "$BIN" launch --procs 2 --model "$SMOL" "${NC[@]}" --gen-len 2000 --prompt-len 8 --peer-timeout 10 \
        --receipt "$WORK/r/kill.json" >"$WORK/kill.out" 2>&1 &
    LP=$!
    sleep 3
    K=$(awk '/^ppn-gate launch: rank 1 /{print $NF}' "$WORK/kill.out")
    t0=$(date +%s)
    kill -9 "$K" 2>/dev/null
    timeout 60 tail --pid=$LP -f /dev/null
    wait $LP
    RC=$?
    dt=$(($(date +%s) - t0))
    cat "$WORK/kill.out" >>"$LOG"
    if [ $RC = 2 ] && [ $dt -le 30 ] && grep -q 'rank 1 (stage 1) was killed' "$WORK/kill.out"; then
        row kill ok "exit 2 after ${dt} s, names rank 1"
    else
        row kill FAIL "exit $RC after ${dt} s: $(tail -n 2 "$WORK/kill.out" | tr '\n' ' ' | cut -c1-150)"
    fi
fi

tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r
rm -rf "$WORK"
echo "failures: $FAILS" >>"$SUM"
cat "$SUM"
[ $FAILS = 0 ]
