#!/usr/bin/env bash
# GPU checks of the CUDA backend, run on a machine with an NVIDIA GPU (never in CI: CI has no
# GPU, and `cargo test` holds no GPU test). Usage:
#
#   scripts/gpu-check.sh [BIN] [OUTDIR]      (defaults: target/release/ppn-gate, gpu-check-out)
#
# What it checks, each line of the final table PASS/FAIL:
#  1. The gate on --backend cuda (built-in model): 1 stage, 4 stages on one device (dtod
#     boundaries), 4 stages with host-bounce boundaries; every arm must PASS (exit 0).
#  2. Negative controls: 4 stages with each --fault; the gate must FAIL (exit 1). A fault that
#     still passes is reported (on a GPU some hazards need unlucky timing to show).
#  3. Synthetic models of every block format the real models use (llama Q4_1 with SmolLM2's
#     shapes; gemma3 Q4_K, Q6_K, Q5_0, Q8_0 with sliding window), gate on 3 stages.
#  4. CUDA vs CPU: the same token tape through both backends; top-20 logits compared (max
#     abs diff, top-1 agreement). The matmuls use the CPU's exact f32 order (no FMA), so the
#     only differences come from exp/tanh (libdevice vs host libm).
#  5. bench --backend cuda (tokens/s).
#  6. Negative controls again under --jitter-us (seeded random delays on every stream op):
#     the clean gate must still PASS, every fault must FAIL.
#  7. The real models, when present under models/ (scripts/fetch-models.sh): gate on 1 and
#     N stages, CUDA vs CPU top-20 on a tape, bench.
# SECTIONS="gate faults synth cmp bench jitter real" (default: all) picks sections.
# Receipts and logs go to OUTDIR (receipts.tar.gz, log.txt, summary.txt).
set -u
BIN=${1:-target/release/ppn-gate}
OUT=${2:-gpu-check-out}
mkdir -p "$OUT/r" "$OUT/m"
LOG="$OUT/log.txt"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true

SECTIONS=${SECTIONS:-gate faults synth cmp bench jitter real}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

row() { printf '%-58s %s\n' "$1" "$2" | tee -a "$SUM"; }

# expect NAME WANT_RC ARGS...: run the binary, compare its exit code.
expect() {
    local name=$1 want=$2
    shift 2
    echo "=== $name: $BIN $*" >>"$LOG"
    local t0=$(date +%s%N)
    "$BIN" "$@" >>"$LOG" 2>&1
    local rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    if [ "$rc" = "$want" ]; then row "$name" "PASS (exit $rc, ${ms} ms)"; else row "$name" "FAIL (exit $rc, want $want)"; fi
}

# BE=cpu runs the same script on the CPU backend (a dry run of the script itself).
BE=${BE:-cuda}
B="--backend $BE -q"
# 1. Gate on the built-in model.
if want gate; then
expect "gate $BE 1 stage, all arms" 0 $B --stages 1 --receipt "$OUT/r/g1.json"
expect "gate $BE 4 stages dtod, all arms" 0 $B --stages 4 --receipt "$OUT/r/g4.json"
expect "gate $BE 4 stages host bounce, all arms" 0 $B --stages 4 --transport host --receipt "$OUT/r/g4h.json"
expect "gate $BE 4 stages, batch 5 window 4, 40 steps" 0 $B --stages 4 --batch 5 --window 4 --prompt-len 8 --gen-len 32 --receipt "$OUT/r/g4b.json"
expect "--backend $BE --devices 0,99 (no such device) -> exit 2" 2 $B --devices 0,99
fi

# 2. Negative controls.
FAULTS="rx-no-wait no-war-guard single-slot shared-scratch slot-first-use no-exit-publish no-reverse-publish"
# The placement each fault's hazard needs (the same as tests/gate.rs uses on the CPU).
fault_args() {
    case $1 in
    no-war-guard) echo "--stages 2 --splits 1 --window 8 --arms pipelined" ;;
    single-slot) echo "--stages 2 --splits 1 --window 4 --arms pipelined" ;;
    shared-scratch) echo "--stages 4 --arms pipelined" ;;
    slot-first-use) echo "--stages 2 --splits 1 --arms pipelined,batched" ;;
    no-reverse-publish) echo "--stages 2 --gen-len 24" ;;
    *) echo "--stages 2" ;;
    esac
}
if want faults; then
    for f in $FAULTS; do
        expect "fault $f: gate must FAIL" 1 $B $(fault_args $f) --fault "$f" --receipt "$OUT/r/fault-$f.json"
    done
fi

# 3. Synthetic models of the real models' formats (also used by cmp and bench).
if want synth || want cmp || want bench; then
"$BIN" synth --arch llama --layers 6 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 4096 --quant q4_1 -o "$OUT/m/llama-q4_1.gguf" >>"$LOG" 2>&1
for q in q4_k q6_k q5_0 q8_0; do
    "$BIN" synth --arch gemma3 --layers 6 --embd 256 --heads 4 --kv-heads 1 --ff 512 --vocab 4096 --quant $q -o "$OUT/m/gemma3-$q.gguf" >>"$LOG" 2>&1
done
for q in q4_0 q5_1 q2_k q3_k q5_k f16 bf16 f32; do
    "$BIN" synth --arch llama --layers 3 --embd 256 --heads 8 --kv-heads 2 --ff 512 --vocab 2048 --quant $q -o "$OUT/m/llama-$q.gguf" >>"$LOG" 2>&1
done
fi
if want synth; then
expect "gate $BE llama q4_1 (SmolLM2 shapes), 3 stages" 0 $B --model "$OUT/m/llama-q4_1.gguf" --stages 3 --receipt "$OUT/r/s-llama-q4_1.json"
for q in q4_k q6_k q5_0 q8_0; do
    expect "gate $BE gemma3 $q, 3 stages, 40 steps (window 16)" 0 $B --model "$OUT/m/gemma3-$q.gguf" --stages 3 --prompt-len 8 --gen-len 32 --receipt "$OUT/r/s-gemma3-$q.json"
done
fi

# 4. CUDA vs CPU on a fixed tape (both backends see the same tokens).
python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 2000 for i in range(24)]}))" >"$OUT/tape.json"
# compare NAME MODEL_FLAGS...: the tape through the CPU and the $BE backend, top-20 compared.
compare() {
    local m=$1
    shift
    for be in cpu $BE; do
        "$BIN" --backend $be -q "$@" --stages 1 --arms eager --tape "$OUT/tape.json" --topk 20 --receipt "$OUT/r/cmp-$m-$be.json" >>"$LOG" 2>&1
    done
    BE=$BE python3 - "$OUT/r" "$m" <<'PY' | tee -a "$SUM"
import json, os, sys
d, m = sys.argv[1], sys.argv[2]
try:
    a = json.load(open(f"{d}/cmp-{m}-cpu.json"))["reference"]["steps"]
    b = json.load(open(f"{d}/cmp-{m}-{os.environ['BE']}.json"))["reference"]["steps"]
except Exception as e:
    print(f"cpu-vs-{os.environ['BE']} {m:<14} ERROR {e}")
    sys.exit(0)
worst, top1, same = 0.0, 0, 0
for sa, sb in zip(a, b):
    ta, tb = dict(map(tuple, sa["topk"])), dict(map(tuple, sb["topk"]))
    for tok, v in ta.items():
        worst = max(worst, abs(v - tb[tok])) if tok in tb else float("inf")
    top1 += sa["topk"][0][0] == sb["topk"][0][0]
    same += sa["logits_blake3"] == sb["logits_blake3"]
print(f"cpu-vs-{os.environ['BE']} {m:<14} top-20 max|diff| {worst:.3e}  top-1 agree {top1}/{len(a)}  bit-identical steps {same}/{len(a)}")
PY
}
if want cmp; then
    compare builtin
    for m in llama-q4_1 gemma3-q4_k gemma3-q6_k gemma3-q5_0 gemma3-q8_0 llama-q4_0 llama-q5_1 llama-q2_k llama-q3_k llama-q5_k llama-f16 llama-bf16 llama-f32; do
        compare $m --model "$OUT/m/$m.gguf"
    done
fi

# 5. Throughput.
if want bench; then
    echo "=== bench" >>"$LOG"
    "$BIN" bench --backend $BE --stages 4 --steps 64 2>&1 | tee -a "$SUM" >>"$LOG"
    "$BIN" bench --backend $BE --model "$OUT/m/llama-q4_1.gguf" --stages 2 --steps 64 2>&1 | tee -a "$SUM" >>"$LOG"
fi

# 6. Negative controls under the schedule explorer.
if want jitter; then
    for seed in 1 2; do
        expect "jitter 300us seed $seed: clean gate" 0 $B --stages 4 --jitter-us 300 --seed $seed --receipt "$OUT/r/j-clean-$seed.json"
        for f in $FAULTS; do
            expect "jitter 300us seed $seed: fault $f: gate must FAIL" 1 $B $(fault_args $f) --jitter-us 300 --seed $seed --fault "$f" --receipt "$OUT/r/j-$f-$seed.json"
        done
    done
fi

# 7. Real models.
if want real; then
    for spec in "smollm2:models/SmolLM2-135M-Instruct.Q4_1.gguf:3" "gemma3-270m:models/gemma-3-270m-q4_k_m.gguf:3"; do
        IFS=: read -r name file stages <<<"$spec"
        [ -f "$file" ] || { row "real $name" "not present ($file)"; continue; }
        expect "gate $BE $name 1 stage" 0 $B --model "$file" --stages 1 --receipt "$OUT/r/real-$name-1.json"
        expect "gate $BE $name $stages stages" 0 $B --model "$file" --stages $stages --receipt "$OUT/r/real-$name-$stages.json"
        compare "$name" --model "$file"
        "$BIN" bench --backend $BE --model "$file" --stages $stages --steps 64 2>&1 | tee -a "$SUM" >>"$LOG"
    done
fi

tar czf "$OUT/receipts.tar.gz" -C "$OUT" r tape.json 2>/dev/null
rm -rf "$OUT/m"
echo "---- summary"
cat "$SUM"
