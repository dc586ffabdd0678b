# Shared set-up of the NCCL device scripts (gpu-h17.sh, gpu-h17-smoke.sh), sourced after they
# set BIN, WORK, SUM and LOG (and ROW_W, the width of a row's first column).
# NCCL_DIR: $NCCL_LIB if set, else the lib/ of the `nvidia.nccl` Python package (the
# nvidia-nccl-cu13 wheel; torch installs it); empty when neither is there.
NCCL_DIR=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
FAILS=0
# row NAME ok|FAIL TEXT: a table row; FAIL rows are counted.
row() { printf "%-${ROW_W:-22}s %-6s %s\n" "$1" "$2" "$3" >>"$SUM"; [ "$2" = FAIL ] && FAILS=$((FAILS + 1)); return 0; }
# go NAME TIMEOUT CMD...: runs CMD with a timeout, logs it; sets RC and TXT (the verdicts,
# arm PASS/FAIL, when the command printed any, else its last lines).
go() {
    local name=$1 t=$2
    shift 2
    echo "=== $name: $*" >>"$LOG"
    timeout "$t" "$@" >"$WORK/$name.out" 2>&1
    RC=$?
    cat "$WORK/$name.out" >>"$LOG"
    TXT=$(awk '/^(eager|pipelined|batched|placement) +(PASS|FAIL)/ {printf "%s %s, ", $1, $2}' "$WORK/$name.out")
    [ -n "$TXT" ] || TXT=$(grep -v '^ppn-gate launch: rank' "$WORK/$name.out" | tail -n 3 | tr '\n' ' ' | cut -c1-150)
}
