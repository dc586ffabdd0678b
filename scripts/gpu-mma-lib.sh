# Shared helpers of the tensor-core GPU scripts (gpu-mma-engine.sh, gpu-mma32.sh, gpu-fuse.sh),
# sourced after they set BIN, BACKEND, SECTIONS, WORK, M and OUT: the output files (init_out),
# the summary row printer, the section test, the --mma flag, stage placements, synthetic
# models and one gate run.
# init_out: a fresh WORK (receipts under WORK/r), MODELDIR M and OUT with empty SUM, LOG and
# BENCH (summary.txt, log.txt, bench.txt), the GPU's name first in the summary; T0 = now.
init_out() {
    rm -rf "$WORK"
    mkdir -p "$OUT" "$WORK/r" "$M"
    SUM="$OUT/summary.txt"
    LOG="$OUT/log.txt"
    BENCH="$OUT/bench.txt"
    : >"$SUM"
    : >"$LOG"
    : >"$BENCH"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true
    T0=$(date +%s)
}
row() { printf '%-62s %s\n' "$1" "$2" | tee -a "$SUM" >/dev/null; }
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
# mma on|off: the flag for this backend (none on the CPU, which refuses it).
mma() { [ "$BACKEND" = cpu ] || echo "--mma $1"; }
# devs N: N stages on device 0.
devs() { local l=0 i; for ((i = 1; i < $1; i++)); do l+=,0; done; echo "$l"; }
synth() { # FILE ARGS...: BIN synth unless FILE exists
    local f=$1
    shift
    [ -f "$f" ] || timeout 150 "$BIN" synth "$@" -o "$f" >>"$LOG" 2>&1 || row "synth $(basename "$f")" "FAILED rc=$?"
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
    { echo "== $name: $*"; cat "$WORK/$name.out"; } >>"$LOG"
    local v
    v=$(grep -E '^[a-z]+ +(PASS|FAIL) ' "$WORK/$name.out" | awk '{print $1"="$2}' | tr '\n' ' ')
    row "$name" "rc=$rc $v($(( ($(date +%s%N) - t) / 1000000 )) ms)"
}
# cmp_acc_files A B LABEL: top-1 agreement and max |diff| over A's top-20 of two receipts (the
# tolerance only sets the exit code; the numbers are the finding).
cmp_acc_files() {
    local a=$1 b=$2 label=$3
    [ -f "$a" ] && [ -f "$b" ] || { row "acc $label" "missing receipt"; return; }
    local o
    o=$(python3 scripts/cmp-receipts.py --tol 1e-2 "$a" "$b" 2>&1)
    local rc=$?
    echo "$o" >>"$LOG"
    row "acc $label (rc=$rc; 1: above 1e-2 or top-1 lost)" ""
    echo "$o" | while read -r l; do row "  ${l#*: }" ""; done
}
