#!/usr/bin/env bash
# Logits readback without per-step allocation or copies (issue 12's Gemma-3 B=8 row), on ONE
# GPU, about two minutes. Usage, from the repository root:
#
#   OLD=/path/to/previous/ppn-gate scripts/gpu-rb.sh BIN MODELDIR OUT     (OLD optional)
#
# Synthesizes three shapes into MODELDIR with BIN: Gemma-3-270M-like widths with the real
# 262144 vocab (q8_0: q4_k_m refuses embd 640), SmolLM2-135M (q4_1, tied, vocab 49152) and
# the 8-layer Llama-3-8B shape (q8_0, vocab 128256). For each, `bench --stages 1 --arms
# batched --batch 8 --steps 64` with BIN and (when set) OLD, then one 2-stage B=8 gate with
# BIN (must PASS, exit 0). One `--fault no-exit-publish` gate on the SmolLM2 shape in the
# placement the selftest uses on one GPU (`--stages 4 --window 4 --jitter-us 300`) must FAIL
# (exit 1): the exit-publication law still holds on the new read path.
# OUT: summary.txt (the table, printed last), log.txt (every command's output),
# receipts.tar.gz (the gate receipts).
set -u
BIN=${1:?usage: scripts/gpu-rb.sh BIN MODELDIR OUT}
MD=${2:?usage: scripts/gpu-rb.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-rb.sh BIN MODELDIR OUT}
OLD=${OLD:-}
WORK=$(mktemp -d /tmp/gpu-rb.XXXX)
mkdir -p "$OUT" "$MD" "$WORK/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
nvidia-smi -L >>"$LOG" 2>&1

# go NAME SECONDS CMD...: runs CMD under a timeout, appends its output to the log; RC is its
# exit status (124: timed out), TXT its output.
go() {
    local name=$1 secs=$2
    shift 2
    echo "== $name: $*" >>"$LOG"
    TXT=$(timeout "$secs" "$@" 2>&1)
    RC=$?
    echo "$TXT" >>"$LOG"
    echo "== $name: exit $RC" >>"$LOG"
}
# tok/s of the bench line starting with $1 (eager / batched) in TXT, "-" when absent.
rate() { echo "$TXT" | grep -E "^  $1 " | grep -oE '[0-9.]+ tok/s' | head -1 | cut -d' ' -f1 | grep . || echo -; }

declare -A SYN=(
    [gemma3-v262k-q8_0]="--arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0"
    [smollm2-q4_1]="--arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied"
    [llama8b-l8-q8_0]="--preset llama8b --layers 8 --quant q8_0"
)
MODELS="gemma3-v262k-q8_0 smollm2-q4_1 llama8b-l8-q8_0"
for m in $MODELS; do
    # shellcheck disable=SC2086
    go "synth $m" 90 "$BIN" synth ${SYN[$m]} -o "$MD/$m.gguf"
    [ $RC = 0 ] || echo "synth $m FAILED (exit $RC)" | tee -a "$SUM"
done

printf '%-20s %-8s %12s %12s %7s\n' model path old_tok_s new_tok_s ratio >>"$SUM"
GATES=""
for m in $MODELS; do
    f="$MD/$m.gguf"
    BENCH=(bench --backend cuda --model "$f" --stages 1 --arms batched --batch 8 --steps 64)
    go "bench new $m" 120 "$BIN" "${BENCH[@]}"
    ne=$(rate eager) nb=$(rate batched)
    oe=- ob=-
    if [ -n "$OLD" ]; then
        go "bench old $m" 120 "$OLD" "${BENCH[@]}"
        oe=$(rate eager) ob=$(rate batched)
    fi
    for p in eager batched8; do
        if [ $p = eager ]; then o=$oe n=$ne; else o=$ob n=$nb; fi
        r=$(awk -v o="$o" -v n="$n" 'BEGIN { if (o+0 > 0 && n+0 > 0) printf "%.3f", n / o; else print "-" }')
        printf '%-20s %-8s %12s %12s %7s\n' "$m" "$p" "$o" "$n" "$r" >>"$SUM"
    done
    go "gate $m" 150 "$BIN" --backend cuda -q --model "$f" --stages 2 --batch 8 --window 4 \
        --receipt "$WORK/r/gate-$m.json"
    GATES="$GATES$(printf '%-44s exit %s (want 0)' "gate N=2 B=8 W=4 $m" "$RC")"$'\n'
done
go "fault no-exit-publish" 150 "$BIN" --backend cuda -q --model "$MD/smollm2-q4_1.gguf" \
    --stages 4 --window 4 --jitter-us 300 --batch 8 --fault no-exit-publish \
    --receipt "$WORK/r/fault-no-exit-publish.json"
GATES="$GATES$(printf '%-44s exit %s (want 1)' "fault no-exit-publish smollm2 N=4" "$RC")"$'\n'
echo "$TXT" | head -4 | sed 's/^/    /' >>"$LOG"
printf '%s' "$GATES" >>"$SUM"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
rm -rf "$WORK"
echo "---- summary (OLD=${OLD:-unset}) ----"
cat "$SUM"
