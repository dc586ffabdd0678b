#!/usr/bin/env bash
# `--mma on` (the tensor-core Q4_K matvec of kernels/mma.cu) in the engine, on ONE GPU.
# Usage, from the repository root:
#
#   scripts/gpu-mma-engine.sh BIN MODELDIR OUT
#
# MODELDIR: empty scratch; the synthetic models are written there (BIN synth). Sections,
# about 2-3 minutes in all (SECTIONS="gates faults bench acc", default all, run in this order):
#   gates   --mma on, every arm must PASS (exit 0): a small llama Q4_K (every matrix in the
#           mma layout) at N = 1, 2, 4 stages on device 0: decode (eager, pipelined, batched
#           B=8, 32 tokens) and chunks (prime, verify; 40-token prompt, chunks 1, 8, 16, 40:
#           the decode kernel for <= 8 rows, the GEMM above, one order); a gemma3 Q4_K (GELU,
#           post-norms) and a Q4_K_M llama (q|k in the mma layout, v Q6_K on the FFMA path in
#           the same op; Q6_K head and some down projections on FFMA) at N = 2, both gates;
#           and the receipt must record backend.mma = "on".
#   faults  --mma on, negative controls that must FAIL (exit 1): mma-row-order (the planted
#           row-count-dependent mma order: batched B=8 at N=2 and a 40-row prime chunk at
#           N=1; deterministic), no-rollback (verify, N=2, deterministic) and chunk-kv-order
#           (prime chunks of 40, N=2; a race on the GPU: a PASS there is a timing finding).
#   bench   llama8b-shaped, 8 layers, Q4_K (synth --preset llama8b --layers 8 --quant q4_k),
#           one stage: decode (eager and batched B=8) and prefill (prime, C=512, 512-token
#           prompt), --mma off then on.
#   acc     the same 8-layer model, one stage, a 24-token tape, --topk 20: --mma off and on,
#           compared by scripts/cmp-receipts.py (top-1 agreement, max |logit diff| over the
#           top-20; the bits differ by design), and each against the CPU backend (the
#           crate's f32 reference) unless ACC_CPU=0.
# What to look for: every gate row rc=0 with PASS; the fault rows rc=1 (FAIL); the bench
# rows' tok/s on vs off (prefill is the target: 5,488 tok/s off on an H200, llama.cpp pp512
# 37,845); acc: top-1 24/24 (or misses only at tiny margins) and mma's max |diff| vs CPU no
# larger than FFMA's in order of magnitude.
# OUT gets 4 files: summary.txt (the table, printed last too), log.txt, receipts.tar.gz,
# bench.txt. Helpers: scripts/gpu-mma-lib.sh. BACKEND=cpu rehearses the flow here (no --mma:
# the CPU refuses it; slow).
set -u
BIN=${1:?usage: scripts/gpu-mma-engine.sh BIN MODELDIR OUT}
M=${2:?usage: scripts/gpu-mma-engine.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-mma-engine.sh BIN MODELDIR OUT}
WORK=${WORK:-/tmp/gpu-mma-engine}
BACKEND=${BACKEND:-cuda}
SECTIONS=${SECTIONS:-gates faults bench acc}
ACC_CPU=${ACC_CPU:-1}
cd "$(dirname "$0")/.."
. scripts/gpu-mma-lib.sh
init_out

# Models: small shapes whose every Q4_K matrix is whole 16-row tiles of 256-wide rows.
SMALL="$M/mma-llama-q4k.gguf"
GEMMA="$M/mma-gemma3-q4k.gguf"
MIXED="$M/mma-llama-q4km.gguf"
L8="$M/llama8b-L8-q4k.gguf"
shape="--layers 4 --embd 512 --ff 1536 --vocab 2048"
synth "$SMALL" --arch llama $shape --heads 8 --kv-heads 2 --quant q4_k
synth "$GEMMA" --arch gemma3 $shape --heads 4 --kv-heads 1 --quant q4_k
synth "$MIXED" --arch llama $shape --heads 8 --kv-heads 2 --quant q4_k_m
(want bench || want acc) && synth "$L8" --preset llama8b --layers 8 --quant q4_k
row "models ready" "$(($(date +%s) - T0)) s"


DECODE="--arms eager,pipelined,batched --batch 8 --gen-len 32"
CHUNKS="--arms prime,verify --prompt-len 40 --chunk 1,8,16,40 --gen-len 8"
if want gates; then
    for n in 1 2 4; do
        gate "llama-q4k-n$n-decode" $(mma on) --model "$SMALL" --stages $n --devices "$(devs $n)" $DECODE
        gate "llama-q4k-n$n-chunks" $(mma on) --model "$SMALL" --stages $n --devices "$(devs $n)" $CHUNKS
    done
    for m in gemma3:"$GEMMA" q4km:"$MIXED"; do
        gate "${m%%:*}-n2-decode" $(mma on) --model "${m#*:}" --stages 2 --devices 0,0 $DECODE
        gate "${m%%:*}-n2-chunks" $(mma on) --model "${m#*:}" --stages 2 --devices 0,0 $CHUNKS
    done
    rec=$(grep -o '"mma": *"[a-z]*"' "$WORK/r/llama-q4k-n2-decode.json" 2>/dev/null | head -1)
    row "receipt backend.mma (want \"mma\": \"on\")" "${rec:-absent}"
fi

if want faults; then
    gate "fault-mma-row-order batched (want rc=1)" $(mma on) --model "$SMALL" --stages 2 --devices 0,0 \
        --arms batched --batch 8 --gen-len 8 --fault mma-row-order
    gate "fault-mma-row-order prime (want rc=1)" $(mma on) --model "$SMALL" --stages 1 --devices 0 \
        --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault mma-row-order
    gate "fault-no-rollback (want rc=1)" $(mma on) --model "$SMALL" --stages 2 --devices 0,0 \
        --arms verify --prompt-len 40 --gen-len 16 --fault no-rollback
    gate "fault-chunk-kv-order (want rc=1; a race)" $(mma on) --model "$SMALL" --stages 2 --devices 0,0 \
        --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault chunk-kv-order
fi

if want bench; then
    for s in off on; do
        bench "decode-mma-$s" "$L8" $(mma $s) --arms batched --batch 8 --steps 32
        bench "prefill512-mma-$s" "$L8" $(mma $s) --arms prime --chunk 512 --prompt-len 512 --repeat 2 --steps 4
    done
fi

want acc && acc l8 "$L8"

row "total" "$(($(date +%s) - T0)) s"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r tape.json 2>>"$LOG" || tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
cat "$SUM"
