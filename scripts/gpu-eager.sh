#!/usr/bin/env bash
# A/B of the one-row attention kernels (attention / attention_early, kernels/attention.cu)
# against the previous build, on ONE H200 in ~2 minutes:
#   scripts/gpu-eager.sh OLD_BIN NEW_BIN MODELDIR OUT
# MODELDIR: empty scratch (synthetic models and receipts go there). DRY=1: the same flow on
# the CPU backend with tiny shapes (a rehearsal of the script, no GPU; figures meaningless).
#  1. synth: the SmolLM2 shape (30 x 576, 9/3 heads of 64, ff 1536, vocab 49152, Q4_1, tied
#     head) and the Gemma-3-270m shape (18 x 640, 4/1 heads of 256, ff 2048, vocab 262144,
#     Q8_0), plus small gate-only shapes for the other attention paths: qwen2 (q/k/v biases),
#     head_dim 96 (the generic score loop), and 32 heads at B = 8 (256 blocks: `attention`,
#     not `attention_early`);
#  2. bench, interleaved OLD NEW OLD NEW (--steps 256, eager arm): eager tok/s per run;
#  3. PPN_CUDA_PROF=1 (graphs off): one short bench each, the attention and head lines;
#  4. gates with --receipt on both builds (same model, flags, tokens), `ppn-gate diff OLD NEW`
#     must say `same` for every pair; the negative control (a copy of one receipt with one
#     logits hash changed) must not.
# OUT gets 5 files: summary.txt (the table, last), bench.txt, prof.txt, log.txt, receipts.tgz.
set -u
OLD=$1 NEW=$2 MD=$3 OUT=$4
DRY=${DRY:-0}
mkdir -p "$MD/r" "$OUT"
SUM="$OUT/summary.txt" LOG="$OUT/log.txt" BEN="$OUT/bench.txt" PROF="$OUT/prof.txt"
: >"$SUM"
: >"$LOG"
: >"$BEN"
: >"$PROF"
BE=cuda STEPS=256 PSTEPS=32
[ "$DRY" = 1 ] && BE=cpu STEPS=16 PSTEPS=4
say() { echo "$*" | tee -a "$SUM"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true
say "old $("$OLD" --version 2>&1)  new $("$NEW" --version 2>&1)  backend $BE"

# ---- 1. models -----------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    SMOL="--arch llama --layers 3 --embd 64 --heads 4 --kv-heads 2 --ff 128 --vocab 512 --quant q4_1 --tied"
    GEMMA="--arch gemma3 --layers 2 --embd 64 --heads 2 --kv-heads 1 --head-dim 64 --ff 128 --vocab 512 --quant q8_0"
    QWEN="--arch qwen2 --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 128 --vocab 512 --quant q8_0"
    HD96="--arch llama --layers 2 --embd 192 --heads 2 --kv-heads 1 --ff 128 --vocab 512 --quant q8_0"
    WIDE="--arch llama --layers 2 --embd 256 --heads 32 --kv-heads 8 --head-dim 8 --ff 128 --vocab 512 --quant q8_0"
else
    SMOL="--arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied"
    GEMMA="--arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0"
    QWEN="--arch qwen2 --layers 4 --embd 512 --heads 8 --kv-heads 2 --ff 1024 --vocab 4096 --quant q8_0"
    HD96="--arch llama --layers 4 --embd 768 --heads 8 --kv-heads 2 --ff 1024 --vocab 4096 --quant q8_0"
    WIDE="--arch llama --layers 4 --embd 2048 --heads 32 --kv-heads 8 --ff 2048 --vocab 4096 --quant q8_0"
fi
MODELS=""
for m in smol gemma qwen hd96 wide; do
    case $m in
    smol) f=$SMOL ;; gemma) f=$GEMMA ;; qwen) f=$QWEN ;; hd96) f=$HD96 ;; wide) f=$WIDE ;;
    esac
    # shellcheck disable=SC2086
    if timeout 60 "$NEW" synth $f -o "$MD/$m.gguf" >>"$LOG" 2>&1; then
        MODELS="$MODELS $m"
    else
        say "synth $m FAILED (exit $?; log.txt): skipped"
    fi
done

# ---- 2. bench, interleaved -----------------------------------------------------------------
# eager_tps FILE: the eager line's tok/s of one bench output.
eager_tps() { awk '/^ *eager +\(/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tok/s") { print $i; exit } }' "$1"; }
declare -A TPS
for m in smol gemma; do
    [[ " $MODELS " == *" $m "* ]] || continue
    for run in 1 2; do
        for side in old new; do
            bin=$OLD
            [ $side = new ] && bin=$NEW
            o="$MD/bench-$m-$side-$run.txt"
            timeout 120 "$bin" bench --backend $BE --model "$MD/$m.gguf" --steps $STEPS --arms eager >"$o" 2>&1
            rc=$?
            { echo "==== $m $side run $run (exit $rc)"; cat "$o"; } >>"$BEN"
            t=$(eager_tps "$o")
            TPS[$m-$side]="${TPS[$m-$side]:-} ${t:-?}"
            echo "bench $m $side run $run: eager ${t:-?} tok/s (exit $rc)" >>"$SUM"
        done
    done
done

# ---- 3. per-kind GPU times (PPN_CUDA_PROF: graphs off, so every figure is inflated) ---------
declare -A PUS
for m in smol gemma; do
    [[ " $MODELS " == *" $m "* ]] || continue
    for side in old new; do
        bin=$OLD
        [ $side = new ] && bin=$NEW
        echo "==== $m $side" >>"$PROF"
        PPN_CUDA_PROF=1 timeout 120 "$bin" bench --backend $BE --model "$MD/$m.gguf" --steps $PSTEPS --arms eager 2>&1 |
            grep -E "cuda prof" >"$MD/prof-$m-$side.txt"
        cat "$MD/prof-$m-$side.txt" >>"$PROF"
        # us each of the attention launches and of the head (summed over stages' lines).
        PUS[$m-$side]=$(awk '/ attention +[0-9]+ launches/ { a = $(NF - 2) } /mv norm\+head/ { h = $(NF - 2) }
            END { printf "att %s head %s", a ? a : "?", h ? h : "?" }' "$MD/prof-$m-$side.txt")
    done
done

# ---- 4. gates on both builds, diffed -------------------------------------------------------
# gate NAME MODEL FLAGS...: one receipt per build, then `diff OLD NEW`; the verdict's first
# line goes to the table.
declare -A VERDICT GEXIT
NDIFF=0 NSAME=0
gate() {
    local name=$1 m=$2
    shift 2
    [[ " $MODELS " == *" $m "* ]] || { VERDICT[$name]="skipped (no model)"; return; }
    local side bin rc
    for side in old new; do
        bin=$OLD
        [ $side = new ] && bin=$NEW
        echo "==== gate $name $side: $*" >>"$LOG"
        timeout 120 "$bin" --backend $BE -q --model "$MD/$m.gguf" "$@" --receipt "$MD/r/$name-$side.json" >>"$LOG" 2>&1
        rc=$?
        echo "gate $name $side: exit $rc" >>"$SUM"
        GEXIT[$name]="${GEXIT[$name]:-}$side $rc "
    done
    local v
    v=$("$NEW" diff "$MD/r/$name-old.json" "$MD/r/$name-new.json" 2>&1 | head -1)
    echo "diff $name: $v" >>"$LOG"
    VERDICT[$name]=$(echo "$v" | sed "s|$MD/r/||g" | cut -c1-70)
    NDIFF=$((NDIFF + 1))
    [[ $v == same:* ]] && NSAME=$((NSAME + 1))
}
D2="--stages 2 --devices 0,0"
gate smol-dec smol $D2 --arms eager,pipelined,batched --gen-len 64 --batch 4
gate smol-pv smol $D2 --arms prime,verify --gen-len 32
gate gemma-dec gemma $D2 --arms eager,pipelined,batched --gen-len 48 --batch 4
gate gemma-pv gemma $D2 --arms prime,verify --gen-len 24
gate qwen qwen $D2 --gen-len 32 --batch 4
gate hd96 hd96 $D2 --gen-len 32 --batch 4
gate wide-b8 wide $D2 --arms batched --gen-len 32 --batch 8
# Negative control: a planted divergence (one reference step's logits hash changed in a copy
# of NEW's smol-dec receipt) must not read `same`.
NEG="skipped (no receipt)"
if [ -f "$MD/r/smol-dec-new.json" ]; then
    python3 - "$MD/r/smol-dec-new.json" "$MD/r/smol-dec-planted.json" <<'PY2'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["reference"]["steps"][-1]
h = s["logits_blake3"]
s["logits_blake3"] = ("0" if h[0] != "0" else "1") + h[1:]
json.dump(d, open(sys.argv[2], "w"))
PY2
    NEG=$("$NEW" diff "$MD/r/smol-dec-new.json" "$MD/r/smol-dec-planted.json" 2>&1 | head -1 | sed "s|$MD/r/||g" | cut -c1-70)
    [[ $NEG == same:* ]] && NEG="FAIL (reads same): $NEG"
fi
tar czf "$OUT/receipts.tgz" -C "$MD" r >>"$LOG" 2>&1

# ---- table (last) --------------------------------------------------------------------------
{
    echo
    printf '%-8s %-22s %-22s %-7s\n' model "old eager tok/s" "new eager tok/s" "ratio"
    for m in smol gemma; do
        [[ " $MODELS " == *" $m "* ]] || continue
        read -r -a a <<<"${TPS[$m-old]:-}"
        read -r -a b <<<"${TPS[$m-new]:-}"
        ratio=$(python3 -c "import sys
a=[float(x) for x in sys.argv[1].split() if x!='?']; b=[float(x) for x in sys.argv[2].split() if x!='?']
print(f'{(sum(b)/len(b))/(sum(a)/len(a)):.3f}' if a and b else '?')" "${a[*]:-}" "${b[*]:-}")
        printf '%-8s %-22s %-22s %-7s\n' "$m" "${a[*]:-?}" "${b[*]:-?}" "$ratio"
    done
    echo
    for m in smol gemma; do
        [[ " $MODELS " == *" $m "* ]] || continue
        printf 'prof us each %-6s old %-26s new %s\n' "$m" "${PUS[$m-old]:-?}" "${PUS[$m-new]:-?}"
    done
    echo
    for n in smol-dec smol-pv gemma-dec gemma-pv qwen hd96 wide-b8; do
        printf 'gate %-10s exit %-12s diff %s\n' "$n" "${GEXIT[$n]:-?}" "${VERDICT[$n]:-?}"
    done
    echo "diffs same: $NSAME of $NDIFF (want all)"
    echo "negative control (a planted logits change, want NOT same): $NEG"
} | tee -a "$SUM"
