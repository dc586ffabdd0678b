#!/usr/bin/env bash
# CUDA graphs for a stage's layer walk (issue #12), on ONE GPU (about 2 minutes):
#   [OLD=old_binary] scripts/gpu-gr.sh BIN MODELDIR OUT
# Three synthetic shapes in MODELDIR: SmolLM2-135M (llama, Q4_1, tied), Gemma-3-270M
# (sliding-window layers, Q8_0) and the 8B shape's first 8 layers (Q4_K). For each:
#   bench  eager and batched (B=8) with --graphs on, --graphs off and $OLD, one stage;
#   gate   N=4 B=4 with graphs on and off: both PASS and `diff` same (and same as $OLD's:
#          no arithmetic changed); prime+verify N=2 with graphs on and off, `diff` same.
# Then, graphs on: a clean gate under --jitter-us (PASS, receipt says where the spins went),
# a traced gate (same as untraced), a PPN_CUDA_PROF gate (graphs turned off, said in the
# receipt, same bits), and three faults that must FAIL (exit 1): shared-scratch (stages
# share one engine, its captured graphs and its RowPos buffer), chunk-kv-order (the racy
# store order inside a captured prime walk), no-war-guard (a boundary law between graphs).
# OUT gets summary.txt (the table, printed last), log.txt and receipts.tar.gz.
set -u
BIN=$1 M=$2 OUT=$3
OLD=${OLD:-}
mkdir -p "$M" "$OUT"
W=$(mktemp -d)
LOG="$OUT/log.txt"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
row() { printf '%-56s %s\n' "$1" "$2" | tee -a "$SUM"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1
t0=$(date +%s)

"$BIN" synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o "$M/smol.gguf" >>"$LOG" 2>&1
"$BIN" synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0 -o "$M/gemma.gguf" >>"$LOG" 2>&1
"$BIN" synth --preset llama8b --layers 8 --quant q4_k -o "$M/l8.gguf" >>"$LOG" 2>&1

# gate NAME BINARY MODEL FLAGS...: a CUDA gate with its receipt at $W/NAME.json; its exit.
gate() {
    local name=$1 b=$2 m=$3
    shift 3
    echo "== gate $name: $*" >>"$LOG"
    "$b" --backend cuda -q --model "$m" --receipt "$W/$name.json" "$@" >>"$LOG" 2>&1
}
# same A B: `diff` of two receipts (0 = same).
same() {
    echo "== diff $1 $2" >>"$LOG"
    "$BIN" diff "$W/$1.json" "$W/$2.json" >>"$LOG" 2>&1
    echo $?
}
bench() { # NAME BINARY MODEL FLAGS...
    local name=$1 b=$2 m=$3
    shift 3
    echo "== bench $name: $*" >>"$LOG"
    "$b" bench --backend cuda --model "$m" --stages 1 --arms batched --batch 8 --steps 64 --receipt "$W/bench-$name.json" "$@" >>"$LOG" 2>&1
}

G="--stages 4 --batch 4 --window 4"
PV="--arms prime,verify --stages 2"
for mm in smol gemma l8; do
    m="$M/$mm.gguf"
    bench "$mm-on" "$BIN" "$m" --graphs on
    b1=$?
    bench "$mm-off" "$BIN" "$m" --graphs off
    row "bench $mm graphs on / off" "exit $b1 / $?"
    if [ -n "$OLD" ]; then
        bench "$mm-old" "$OLD" "$m"
        row "bench $mm OLD" "exit $?"
    fi
    gate "$mm-on" "$BIN" "$m" $G --graphs on
    g1=$?
    gate "$mm-off" "$BIN" "$m" $G --graphs off
    row "gate $mm N=4 B=4 graphs on / off (0 = PASS)" "exit $g1 / $?"
    row "diff $mm gate graphs on vs off" "exit $(same "$mm-on" "$mm-off") (0 = same)"
    if [ -n "$OLD" ]; then
        gate "$mm-old" "$OLD" "$m" $G
        row "diff $mm gate graphs on vs OLD" "exit $(same "$mm-on" "$mm-old") (0 = same)"
    fi
    gate "$mm-pv-on" "$BIN" "$m" $PV --graphs on
    g1=$?
    gate "$mm-pv-off" "$BIN" "$m" $PV --graphs off
    row "gate $mm prime,verify N=2 graphs on / off" "exit $g1 / $?"
    row "diff $mm prime,verify graphs on vs off" "exit $(same "$mm-pv-on" "$mm-pv-off") (0 = same)"
    echo "[$(($(date +%s) - t0)) s]" >>"$LOG"
done

S="$M/smol.gguf"
gate smol-jit "$BIN" "$S" $G --jitter-us 300
row "gate smol N=4 --jitter-us 300, graphs on (0 = PASS)" "exit $?"
gate smol-trace "$BIN" "$S" $G --trace "$W/smol-trace.trace.json"
row "gate smol N=4 --trace, graphs on (0 = PASS)" "exit $?"
row "diff smol traced vs untraced" "exit $(same smol-trace smol-on) (0 = same)"
PPN_CUDA_PROF=1 gate smol-prof "$BIN" "$S" $G
row "gate smol N=4 PPN_CUDA_PROF (0 = PASS)" "exit $?"
row "diff smol PPN_CUDA_PROF vs graphs on" "exit $(same smol-prof smol-on) (0 = same)"
gate f-shared "$BIN" "$S" --stages 4 --window 4 --jitter-us 300 --fault shared-scratch
row "fault shared-scratch smol, graphs on (1 = caught)" "exit $?"
gate f-chunk "$BIN" "$S" --stages 2 --arms prime --chunk 64 --prompt-len 64 --gen-len 4 --repeat 2 --fault chunk-kv-order
row "fault chunk-kv-order smol, graphs on (1 = caught)" "exit $?"
gate f-war "$BIN" "$M/l8.gguf" --stages 2 --splits 1 --window 8 --arms pipelined --fault no-war-guard
row "fault no-war-guard l8, graphs on (1 = caught)" "exit $?"

tar -czf "$OUT/receipts.tar.gz" -C "$W" . 2>>"$LOG"
echo "[$(($(date +%s) - t0)) s total]" | tee -a "$SUM"
python3 - "$W" <<'PY' | tee -a "$SUM"
import json, os, sys
w = sys.argv[1]
def j(name):
    try:
        return json.load(open(os.path.join(w, name)))
    except Exception:
        return None
print()
print(f"{'model':<6} {'eager tok/s on / off / old':>30} {'B=8 tok/s on / off / old':>30} {'enq us/tok on/off':>18} {'launch/tok on/off':>18}")
f = lambda v: "-" if v is None else f"{v:.0f}"
for mm in ["smol", "gemma", "l8"]:
    b = {k: j(f"bench-{mm}-{k}.json") for k in ["on", "off", "old"]}
    ts = lambda k, p: b[k]["tok_s"].get(p) if b[k] else None
    eg = " / ".join(f(ts(k, "eager")) for k in b)
    bt = " / ".join(f(ts(k, "batched")) for k in b)
    enq = " / ".join(f"{b[k]['host_enqueue_us_per_token']:.0f}" if b[k] else "-" for k in ["on", "off"])
    ln = " / ".join(f(b[k].get("launches_per_token")) if b[k] else "-" for k in ["on", "off"])
    print(f"{mm:<6} {eg:>30} {bt:>30} {enq:>18} {ln:>18}")
    on, off = ts("on", "eager"), ts("off", "eager")
    if on and off:
        print(f"{'':<6} eager graphs on / off = {on / off:.2f}x" + (f", on / old = {on / ts('old', 'eager'):.2f}x" if ts("old", "eager") else ""))
for name in ["smol-on", "smol-off", "smol-jit", "smol-prof"]:
    r = j(f"{name}.json")
    print(f"receipt {name:<10} backend.graphs = {r['backend'].get('graphs') if r else None!r}")
PY
rm -rf "$W"
