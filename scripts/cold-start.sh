#!/usr/bin/env bash
# Proves (issue 28) that a first run on a new GPU does not wait long for its kernels: the
# first gate of a 4096-wide Q4_K_M file, with an EMPTY module cache, builds every kernel
# module it needs (NVRTC, side by side on the host's cores) in at most 10 s, and a second,
# cached run reads them back. With OLD (an earlier binary) the same runs are made with it,
# beside, for the before/after. Run on the GPU machine.
# Usage: scripts/cold-start.sh BIN OUT [OLD]
set -u
BIN=$1 OUT=$2 OLD=${3:-}
mkdir -p "$OUT"; S="$OUT/cold-start.txt"; : >"$S"
W=$(mktemp -d)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "host cores: $(nproc)"; } >>"$S"
"$BIN" synth --preset llama8b --layers 4 --quant q4_k_m --seed 5 -o "$W/l8b.gguf" >/dev/null 2>&1
# run NAME BIN VFLAG CACHE ARGS...: one gate, its wall time and its module lines.
run() {
    local name=$1 bin=$2 v=$3 cache=$4; shift 4
    local t0=$(date +%s%N)
    "$bin" --backend cuda $v --model "$W/l8b.gguf" --cache-dir "$cache" "$@" --receipt "$W/$name.json" >"$OUT/$name.log" 2>&1
    local rc=$? t1=$(date +%s%N)
    printf '%-22s rc=%s wall %6d ms  (%s)\n' "$name" $rc $(( (t1 - t0) / 1000000 )) "$*" >>"$S"
    # Each module round's count and time (the module list itself is in the log).
    grep -E "kernel modules|main module|matvec modules|mma module" "$OUT/$name.log" |
        sed -E 's/\[[^]]*\]/[...]/; s/^/    /' >>"$S"
}
G="--stages 2 --arms eager,pipelined,batched --gen-len 8"
P="--stages 2 --arms eager,prime --chunk 1,7,8 --gen-len 8"
run new-cold "$BIN" -v "$W/cache-new" $G
run new-warm "$BIN" -v "$W/cache-new" $G
run new-cold-prime "$BIN" -v "$W/cache-new2" $P
if [ -n "$OLD" ]; then
    run old-cold "$OLD" "" "$W/cache-old" $G
    run old-warm "$OLD" "" "$W/cache-old" $G
    run old-cold-prime "$OLD" "" "$W/cache-old2" $P
    for n in cold prime; do
        a=new-cold b=old-cold; [ $n = prime ] && a=new-cold-prime b=old-cold-prime
        echo "diff $a $b: $("$BIN" diff "$W/$a.json" "$W/$b.json" 2>&1 | head -2 | tr '\n' ' ')" >>"$S"
    done
fi
cat "$S"
