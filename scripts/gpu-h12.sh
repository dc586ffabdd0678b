#!/usr/bin/env bash
# Issue 12, part 4 on the GPU machine: the on-disk module cache makes a repeated gate's
# module build short, and what it loads (CUBIN) gives the same bits as the uncached path
# (PTX JIT-compiled by the driver). Usage, from the repository root:
#
#   scripts/gpu-h12.sh BIN OUT       e.g. scripts/gpu-h12.sh .stage/ppn-gate $OUT
#
# Per model (SmolLM2-135M Q4_1 from models/ when present, else a SmolLM2-shaped synthetic
# file written here; Gemma-3-270M Q4_K_M when present; on two GPUs also the Gemma-3 N=5 B=8
# gate the issue timed), one gate each:
#   nocache   --no-cache, with an empty driver JIT cache: what a first gate on a machine paid
#   miss      --cache-dir FRESH: every module compiled by NVRTC (CUBIN) and stored
#   hit       the same cache again: every module read from it; the bar is under 1 s
#   corrupt   one entry truncated first: detected, compiled again, the gate still passes
# then `ppn-gate diff` of miss, hit and corrupt against nocache: `same` (CUBIN = PTX bits).
# OUT gets three files (what a device call brings back): summary.txt (a row per run: module
# ms / hits / misses / corrupt / wall ms, and the checks), log.txt, receipts.tar.gz. Models,
# caches and receipts are made under WORK (default /tmp/gpu-h12, emptied first).
set -u
BIN=${1:?usage: scripts/gpu-h12.sh BIN OUT}
OUT=${2:?usage: scripts/gpu-h12.sh BIN OUT}
WORK=${WORK:-/tmp/gpu-h12}
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK/r" "$WORK/m"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$SUM"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
FAILS=0

# modules RECEIPT: "ms hits misses corrupt" of timings.modules
modules() {
    python3 -c 'import json,sys
m=json.load(open(sys.argv[1]))["timings"].get("modules") or {}
print("%.0f %d %d %d" % (m.get("ms",-1), m.get("hits",-1), m.get("misses",-1), m.get("corrupt",-1)))' "$1"
}

# run MODEL_TAG NAME ARGS...: one gate; prints its row and returns the gate's exit code.
run() {
    local tag=$1 name=$2
    shift 2
    local r="$WORK/r/$tag-$name.json" t0=$(date +%s%N)
    "$BIN" --backend cuda -q "$@" --receipt "$r" >>"$LOG" 2>&1
    local rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
    if [ $rc != 0 ] || [ ! -f "$r" ]; then
        row "$tag $name" "FAIL exit $rc (see log.txt)"
        FAILS=$((FAILS + 1))
        return 1
    fi
    read -r mms hits misses corrupt < <(modules "$r")
    row "$tag $name" "PASS  modules ${mms} ms (hits $hits, misses $misses, corrupt $corrupt), wall ${ms} ms"
    echo "$mms $hits $misses $corrupt" >"$WORK/r/$tag-$name.mod"
}

check() { # NAME CONDITION-TEXT EXIT-CODE-OF-TEST; returns that code
    if [ "$3" = 0 ]; then row "  check $1" "ok: $2"; else row "  check $1" "FAIL: $2"; FAILS=$((FAILS + 1)); fi
    return "$3"
}

same() { # TAG A B: the deterministic parts of two receipts are bit-identical
    local o rc
    o=$("$BIN" diff "$WORK/r/$1-$2.json" "$WORK/r/$1-$3.json" 2>&1)
    rc=$?
    check "$1 $3 = $2" "$(echo "$o" | head -1)" $rc
}

one_model() { # TAG ARGS...
    local tag=$1
    shift
    local cache="$WORK/cache-$tag"
    rm -rf "$cache"
    # The uncached baseline with the driver's JIT cache empty too: a first gate on a machine.
    CUDA_CACHE_PATH="$WORK/nvjit-$tag" run "$tag" nocache --no-cache "$@" || return
    run "$tag" miss --cache-dir "$cache" "$@" || return
    run "$tag" hit --cache-dir "$cache" "$@" || return
    read -r _ _ m_miss _ <"$WORK/r/$tag-miss.mod"
    read -r h_ms h_hits h_miss _ <"$WORK/r/$tag-hit.mod"
    [ "$m_miss" -gt 0 ]
    check "$tag miss" "the fresh cache compiled $m_miss modules" $?
    [ "$h_miss" = 0 ] && [ "$h_hits" = "$m_miss" ]
    check "$tag hit" "$h_hits modules read, $h_miss compiled" $?
    [ "$h_ms" -ge 0 ] && [ "$h_ms" -lt 1000 ]
    check "$tag hit < 1 s" "modules took $h_ms ms" $?
    # A damaged entry: truncated to half. It must be detected and compiled again.
    local e
    e=$(ls "$cache"/*.mod 2>/dev/null | head -1)
    local n
    n=$(ls "$cache" 2>/dev/null | wc -l)
    [ -n "$e" ]
    check "$tag entries" "$n files in $cache" $? || return
    truncate -s $(($(stat -c %s "$e") / 2)) "$e"
    run "$tag" corrupt --cache-dir "$cache" "$@" || return
    read -r _ _ _ c_corrupt <"$WORK/r/$tag-corrupt.mod"
    [ "$c_corrupt" = 1 ]
    check "$tag corrupt" "$c_corrupt damaged entry detected and rebuilt" $?
    for b in miss hit corrupt; do same "$tag" nocache "$b"; done
}

SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=models/gemma-3-270m-q4_k_m.gguf
if [ ! -f "$SMOL" ]; then
    # SmolLM2-135M's shapes and format (30 layers, 576 wide, 9/3 heads, ff 1536, Q4_1).
    SMOL="$WORK/m/smolshape-q4_1.gguf"
    "$BIN" synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 \
        --vocab 49152 --quant q4_1 -o "$SMOL" >>"$LOG" 2>&1
fi
one_model smol --model "$SMOL" --stages 2 --gen-len 8
[ -f "$GEMMA" ] && one_model gemma --model "$GEMMA" --stages 2 --gen-len 8
if [ -f "$GEMMA" ] && [ "$NGPU" -ge 2 ]; then
    # The issue's slow case: Gemma-3 N=5 B=8 over two GPUs (39 s of NVRTC before the cache).
    one_model gemma-n5b8-2gpu --model "$GEMMA" --stages 5 --devices 0,0,0,1,1 --batch 8 --gen-len 8
fi
tar czf "$OUT/receipts.tar.gz" -C "$WORK" r
row "result" "$([ $FAILS = 0 ] && echo PASS || echo "FAIL ($FAILS)")"
[ $FAILS = 0 ]
