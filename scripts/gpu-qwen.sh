#!/usr/bin/env bash
# Issue 14 on the GPU machine: the CUDA engine on qwen2 (q/k/v biases, tied head), qwen3 (q/k
# head norms, head_dim 128 on n_embd 256) and llama with rope_freqs, in one call:
#
#   scripts/gpu-qwen.sh BIN MODELDIR OUT
#
# BIN: a release ppn-gate (CUDA is loaded at run time). MODELDIR: the real models
# (SmolLM2-135M-Instruct.Q4_1.gguf, gemma-3-270m-q4_k_m.gguf; the attention kernel changed
# for every architecture, so they are re-gated; a missing one is reported, not fatal). OUT:
# summary.txt (one row per check), log.txt, r/*.json receipts. Run from a checkout of the
# branch: the oracle files are tests/data/oracle/synth, the 6-layer synthetic models are
# written by scripts/synth-models.sh into OUT/m (removed at the end). Needs python3. About a
# minute on an H200 (each gate is a process: driver start + NVRTC, then < 1 s of decode).
#
# Sections (SECTIONS="oracle cmp gates batch twice real", default all):
#  oracle: each qwen oracle file on its HF tape, 3 stages, all arms; the reference against
#          HF transformers: scripts/oracle-compare.py --tol 1e-3 (top-1 at every step,
#          top-20 within 1e-3)
#  cmp:    CUDA vs the CPU backend on the same tape, every new-architecture model
#          (scripts/cmp-receipts.py: top-20 within 1e-3, top-1, bit-identical step count)
#  gates:  N = 2, 3, 4 with uneven splits, all three arms (every arm bit-identical to the
#          1-stage reference), one device and several streams, host transport, jitter
#  batch:  --batch B for B = 1..8 (each batched row bit-identical to its own B=1 reference),
#          1 and 3 stages, qwen2 and qwen3
#  twice:  the same gate twice: `ppn-gate diff` must say same
#  real:   SmolLM2 and Gemma-3 (regression of the shared attention kernel): gate N=3 uneven,
#          CUDA vs CPU on a fixed tape
# BE=cpu runs the whole script on the CPU backend (a dry run of the script itself).
set -u
BIN=$(realpath "$1")
M=$2
OUT=$3
SECTIONS=${SECTIONS:-oracle cmp gates batch twice real}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/gpu-lib.sh"
BE=${BE:-cuda}
C="--backend $BE -q"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUM" 2>&1 || true
O="$ROOT/tests/data/oracle/synth"
Q2="$O/synth-qwen2-L4-E256"
Q3="$O/synth-qwen3-L4-E256"
"$ROOT/scripts/synth-models.sh" "$BIN" "$OUT/m" >>"$LOG" 2>&1 || row "synth-models.sh" "FAIL"
S2="$OUT/m/qwen2-L6-tied.gguf"
S3="$OUT/m/qwen3-L6-hd64.gguf"
RF="$OUT/m/llama-L6-ropefreqs.gguf"
# check NAME CMD...: a row with CMD's first output line and PASS/FAIL by its exit code.
check() {
    local name=$1
    shift
    local out
    out=$("$@" 2>&1)
    local rc=$?
    echo "=== $name: $*"$'\n'"$out" >>"$LOG"
    local v=PASS
    [ $rc = 0 ] || v="FAIL exit $rc"
    row "$name" "$v: $(echo "$out" | head -1 | sed "s|$OUT/r/||g")"
}

if want oracle; then
    for q in "$Q2" "$Q3"; do
        n=$(basename "$q")
        gate "oracle-$n-n3" --model "$q.gguf" --stages 3 --splits 1,3 --tape "$q.tapeA.json" --topk 20
        check "hf-oracle $n (tol 1e-3)" python3 "$ROOT/scripts/oracle-compare.py" --tol 1e-3 "$OUT/r/oracle-$n-n3.json" "$q.tapeA.json"
    done
fi

# cmp_be NAME MODEL TAPE [TOL]: the tape's reference on the CPU backend and on $BE, compared
# (TOL default 1e-3: these small models land near 1e-6; the real ones up to ~5e-4, so 1e-2).
cmp_be() {
    local name=$1 model=$2 tape=$3 tol=${4:-1e-3}
    for be in cpu $BE; do
        "$BIN" --backend $be -q --model "$model" --stages 1 --arms eager --tape "$tape" --topk 20 \
            --receipt "$OUT/r/cmp-$name-$be.json" >>"$LOG" 2>&1
    done
    check "cpu-vs-$BE $name" python3 "$ROOT/scripts/cmp-receipts.py" --tol "$tol" "$OUT/r/cmp-$name-cpu.json" "$OUT/r/cmp-$name-$BE.json"
}
# A fixed tape for the synthetic models without an oracle (ids < their vocab of 512).
python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 509 for i in range(40)]}))" >"$OUT/tape512.json"
if want cmp; then
    cmp_be qwen2-oracle "$Q2.gguf" "$Q2.tapeA.json"
    cmp_be qwen3-oracle "$Q3.gguf" "$Q3.tapeA.json"
    cmp_be qwen2-L6-tied "$S2" "$OUT/tape512.json"
    cmp_be qwen3-L6-hd64 "$S3" "$OUT/tape512.json"
    cmp_be llama-L6-ropefreqs "$RF" "$OUT/tape512.json"
fi

if want gates; then
    gate qwen2-n2-split3 --model "$Q2.gguf" --stages 2 --splits 3 --tape "$Q2.tapeA.json"
    gate qwen2-n3-split1-2-host --model "$Q2.gguf" --stages 3 --splits 1,2 --transport host --tape "$Q2.tapeA.json"
    gate qwen3-n2-split1-w4 --model "$Q3.gguf" --stages 2 --splits 1 --window 4 --tape "$Q3.tapeA.json"
    gate qwen3-n3-split2-3 --model "$Q3.gguf" --stages 3 --splits 2,3 --tape "$Q3.tapeA.json"
    gate qwen2-L6-n2-split5 --model "$S2" --stages 2 --splits 5 --gen-len 40
    gate qwen2-L6-n4-split1-2-5-jitter --model "$S2" --stages 4 --splits 1,2,5 --window 4 --jitter-us 50
    gate qwen3-L6-n3-split1-5 --model "$S3" --stages 3 --splits 1,5 --gen-len 40
    gate qwen3-L6-n4-split2-3-5 --model "$S3" --stages 4 --splits 2,3,5 --batch 5
    gate ropefreqs-L6-n2-split2 --model "$RF" --stages 2 --splits 2
    gate ropefreqs-L6-n3-split3-4 --model "$RF" --stages 3 --splits 3,4 --window 4
    gate ropefreqs-L6-n4-split1-4-5-host --model "$RF" --stages 4 --splits 1,4,5 --transport host
fi

if want batch; then
    for b in 1 2 3 4 5 6 7 8; do
        gate batch$b-qwen2-n1 --model "$Q2.gguf" --stages 1 --arms batched --batch $b
        gate batch$b-qwen3-n3 --model "$S3" --stages 3 --splits 1,4 --arms batched --batch $b
    done
    gate batch8-ropefreqs-n2 --model "$RF" --stages 2 --splits 4 --arms batched --batch 8
fi

if want twice; then
    for m in qwen2:$Q2.gguf qwen3:$Q3.gguf; do
        gate twice-${m%%:*}-a --model "${m#*:}" --stages 2 --splits 1
        gate twice-${m%%:*}-b --model "${m#*:}" --stages 2 --splits 1
        check "diff twice-${m%%:*}" "$BIN" diff "$OUT/r/twice-${m%%:*}-a.json" "$OUT/r/twice-${m%%:*}-b.json"
    done
fi

if want real; then
    python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % 2000 for i in range(24)]}))" >"$OUT/tape2000.json"
    for spec in "smollm2:$SMOL:10,29" "gemma3-270m:$GEMMA:5,6"; do
        IFS=: read -r name file splits <<<"$spec"
        [ -f "$file" ] || { row "real $name" "not present ($file)"; continue; }
        gate "real-$name-n3" --model "$file" --stages 3 --splits "$splits"
        cmp_be "$name" "$file" "$OUT/tape2000.json" 1e-2
    done
fi

rm -rf "$OUT/m"
echo "---- summary ($(grep -c PASS "$SUM") PASS, $(grep -c FAIL "$SUM") FAIL)" | tee -a "$SUM"
cat "$SUM"
