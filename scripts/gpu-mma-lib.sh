# Shared helpers of the tensor-core GPU scripts (gpu-mma-engine.sh, gpu-mma32.sh, gpu-fuse.sh),
# sourced after they set BIN, BACKEND, SECTIONS, WORK, M and OUT: the output files (init_out),
# the summary row printer, the section test, the --mma flag, stage placements, synthetic
# models, one gate run, one bench run and the accuracy comparison.
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
# bench NAME FILE ARGS...: one bench run of FILE on one stage; its tok/s lines into the table
# and bench.txt (BENCH).
bench() {
    local name=$1 f=$2
    shift 2
    timeout 150 "$BIN" bench --backend "$BACKEND" --model "$f" --stages 1 --devices 0 "$@" \
        --receipt "$WORK/r/bench-$name.json" >"$WORK/bench-$name.out" 2>&1
    local rc=$?
    { echo "== bench $name: $*"; cat "$WORK/bench-$name.out"; } | tee -a "$BENCH" >>"$LOG"
    row "bench $name" "rc=$rc"
    grep -E '^  (eager|batched|prime|prefill) ' "$WORK/bench-$name.out" | while read -r l; do row "  $l" ""; done
}
# acc NAME FILE: accuracy of the tensor-core kernels on FILE: a 24-token tape, one stage,
# --topk 20, --mma off and on (and the CPU backend, the crate's f32 reference, unless
# ACC_CPU=0), compared pairwise by cmp_acc_files (the bits differ by design).
acc() {
    local name=$1 f=$2 s
    [ -f "$WORK/tape.json" ] ||
        python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 2000 for i in range(24)]}))" >"$WORK/tape.json"
    local args="--model $f --stages 1 --devices 0 --arms eager --tape $WORK/tape.json --topk 20"
    for s in off on; do
        gate "acc-$name-mma-$s" $(mma $s) $args
    done
    if [ "${ACC_CPU:-1}" = 1 ]; then
        timeout 150 "$BIN" --backend cpu $args --receipt "$WORK/r/acc-$name-cpu.json" -q >>"$LOG" 2>&1
        row "acc-$name-cpu (the crate's f32 reference)" "rc=$?"
    fi
    cmp_acc_files "$WORK/r/acc-$name-mma-off.json" "$WORK/r/acc-$name-mma-on.json" "$name mma-off vs mma-on"
    if [ "${ACC_CPU:-1}" = 1 ]; then
        cmp_acc_files "$WORK/r/acc-$name-cpu.json" "$WORK/r/acc-$name-mma-off.json" "$name cpu vs mma-off"
        cmp_acc_files "$WORK/r/acc-$name-cpu.json" "$WORK/r/acc-$name-mma-on.json" "$name cpu vs mma-on"
    fi
}
