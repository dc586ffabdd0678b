#!/usr/bin/env bash
# Issue 17 on ONE GPU (two-GPU boxes are not lent this session): what of the NCCL transport
# one GPU can show, plus the multi-process runtime on this machine's CPU. NCCL refuses two
# ranks on one GPU, so a real cross-process boundary over NCCL needs scripts/gpu-h17.sh on
# two GPUs. Usage, from the repository root:
#
#   scripts/gpu-h17-smoke.sh BIN MODELDIR OUT
#
# libnccl: $NCCL_LIB if set, else the lib/ of the `nvidia.nccl` Python package (the
# nvidia-nccl-cu13 wheel; torch installs it) — printed, and passed as --nccl-lib; the
# binary never searches site-packages by itself.
# Rows (each with a timeout; a timeout is a FAIL):
#   nccl-load      nccl-check: library loads, version, ncclGetUniqueId (no GPU needed)
#   nccl-default   nccl-check without --nccl-lib: what the linker's search path finds (info)
#   nccl-self      nccl-check --device 0: one-rank communicator, ncclSend/ncclRecv to itself
#                  through the runtime's link ops on a CUDA stream, bits compared
#   nccl-2on1      launch --procs 2 --transport nccl --devices 0,0: must END with exit 2 and
#                  a clear NCCL error (two ranks on one GPU), never hang
#   cpu-ipc-3x3    launch --procs 3 --backend cpu --stages 3 --transport ipc: PASS
#   cpu-ipc-4x2    launch --procs 2 --backend cpu --stages 4 --transport ipc: PASS
#   cuda-1proc-*   single-process CUDA gates (SmolLM2 N=2, Gemma-3 N=3): PASS, the runtime's
#                  stage-range change did not move the one-process path
# OUT: summary.txt (the table, printed last), log.txt, receipts.tar.gz.
set -u
BIN=${1:?usage: scripts/gpu-h17-smoke.sh BIN MODELDIR OUT}
MD=${2:?usage: scripts/gpu-h17-smoke.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-h17-smoke.sh BIN MODELDIR OUT}
WORK=$(mktemp -d /tmp/gpu-h17-smoke.XXXX)
mkdir -p "$OUT" "$WORK/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
ROW_W=16
source "$(dirname "$0")/nccl-lib.sh"
echo "libnccl directory: ${NCCL_DIR:-none found (set NCCL_LIB)}" | tee -a "$LOG"
nvidia-smi -L >>"$LOG" 2>&1

if [ -n "$NCCL_DIR" ]; then
    go nccl-load 60 "$BIN" nccl-check --nccl-lib "$NCCL_DIR"
    [ $RC = 0 ] && row nccl-load ok "$TXT" || row nccl-load FAIL "exit $RC: $TXT"
    go nccl-self 120 "$BIN" nccl-check --nccl-lib "$NCCL_DIR" --device 0
    [ $RC = 0 ] && row nccl-self ok "$TXT" || row nccl-self FAIL "exit $RC: $TXT"
else
    row nccl-load FAIL "no libnccl directory (pip install nvidia-nccl-cu13, or set NCCL_LIB)"
fi
go nccl-default 60 "$BIN" nccl-check
row nccl-default info "exit $RC: $TXT"

SMOL="$MD/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$MD/gemma-3-270m-q4_k_m.gguf"
if [ -n "$NCCL_DIR" ] && [ -f "$SMOL" ]; then
    go nccl-2on1 180 "$BIN" launch --procs 2 --backend cuda --model "$SMOL" --stages 2 --devices 0,0 \
        --transport nccl --nccl-lib "$NCCL_DIR" --gen-len 4 --peer-timeout 20 --rendezvous-timeout 60 \
        --receipt "$WORK/r/nccl-2on1.json"
    case $RC in
        2) if grep -q 'nccl[A-Z]' "$WORK/nccl-2on1.out"; then row nccl-2on1 ok "exit 2, NCCL's refusal: $TXT"; else row nccl-2on1 FAIL "exit 2 but not from NCCL: $TXT"; fi ;;
        0) row nccl-2on1 ok "PASS (this NCCL accepted two ranks on one GPU): $TXT" ;;
        124) row nccl-2on1 FAIL "timed out: the members hung" ;;
        *) row nccl-2on1 FAIL "exit $RC: $TXT" ;;
    esac
fi

go cpu-ipc-3x3 120 "$BIN" launch --procs 3 --backend cpu --stages 3 --transport ipc --receipt "$WORK/r/cpu-ipc-3x3.json"
[ $RC = 0 ] && row cpu-ipc-3x3 ok "$TXT" || row cpu-ipc-3x3 FAIL "exit $RC: $TXT"
go cpu-ipc-4x2 120 "$BIN" launch --procs 2 --backend cpu --stages 4 --transport ipc --receipt "$WORK/r/cpu-ipc-4x2.json"
[ $RC = 0 ] && row cpu-ipc-4x2 ok "$TXT" || row cpu-ipc-4x2 FAIL "exit $RC: $TXT"

for m in "smol:$SMOL:2" "gemma:$GEMMA:3"; do
    IFS=: read -r tag file n <<<"$m"
    if [ ! -f "$file" ]; then row "cuda-1proc-$tag" FAIL "missing $file"; continue; fi
    go "cuda-1proc-$tag" 300 "$BIN" --backend cuda --model "$file" --stages "$n" -q --receipt "$WORK/r/cuda-1proc-$tag.json"
    [ $RC = 0 ] && row "cuda-1proc-$tag" ok "$TXT" || row "cuda-1proc-$tag" FAIL "exit $RC: $TXT"
done

tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r
rm -rf "$WORK"
echo "failures: $FAILS" >>"$SUM"
cat "$SUM"
[ $FAILS = 0 ]
