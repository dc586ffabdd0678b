# Shared set-up of the GPU-machine scripts, sourced after they set BIN, M, OUT and SECTIONS:
# the section test, the output folder, the summary table's row printer, the real models.
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
mkdir -p "$OUT/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >>"$SUM"
: >>"$LOG"
row() { printf '%-64s %s\n' "$1" "$2" | tee -a "$SUM"; }
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"

# gate NAME ARGS...: one gate ($BIN $C ARGS) with its receipt in OUT/r, and a row: PASS or
# FAIL with the exit code, plus what `gate_extra RECEIPT` prints where the caller defines it.
gate() {
    local name=$1
    shift
    local t0=$(date +%s%N)
    "$BIN" $C "$@" --receipt "$OUT/r/$name.json" >>"$LOG" 2>&1
    local rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
    local v="FAIL exit $rc" extra=""
    [ $rc = 0 ] && v=PASS
    declare -F gate_extra >/dev/null && extra=", $(gate_extra "$OUT/r/$name.json" 2>&1)"
    row "gate $name" "$v$extra (${ms} ms)"
}
