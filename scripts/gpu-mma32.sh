#!/usr/bin/env bash
# `--mma on` for the 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0: kernels/mma.cu MF_Q8_0..,
# repack::repack_mma_b32) and Q6_K (MF_Q6_K, same layout family), on ONE GPU. Usage, from
# the repository root:
#
#   scripts/gpu-mma32.sh BIN MODELDIR OUT
#
# MODELDIR: empty scratch; the synthetic models are written there (BIN synth). Sections,
# about 4 minutes in all (SECTIONS="gates faults bench q6bench acc", default all, in this
# order; the Q6_K rows alone, ~1.5 minutes: FMTS=q6_k SECTIONS="gates faults q6bench"):
#   gates   --mma on, every arm must PASS (exit 0): a small llama of each format (512 wide:
#           whole super-blocks) at N = 1, 2 stages on device 0: decode (eager, pipelined,
#           batched B=8) and chunks (prime, verify; chunks 1, 8, 16, 40: the decode kernel
#           for <= 8 rows, the GEMM above, one order); then a small SmolLM2-shaped Q4_1
#           (576 wide, tied) and Gemma-3-shaped Q5_0 (640 wide, head_dim 256) at N = 2:
#           their last super-block is partial (64 / 128 columns), mma_prep's zero padding.
#           q6_k is in the format list (every matrix Q6_K: MF_Q6_K's kernels, decode k8 and
#           GEMM); then a llama.cpp Q4_K_M mix (2 layers, 512 wide: Q4_K with layer 1's attn_v,
#           ffn_down and the head in Q6_K, so q|k|v is one Q4_K and one Q6_K mma launch) at
#           N = 1, 2, decode and chunks.
#   faults  --mma on, the planted row-count-dependent order (mma-row-order) must FAIL
#           (exit 1): batched B=8 at N=2 on the Q8_0 model, a 40-row prime chunk on the
#           576-wide Q4_1 one, and batched B=8 at N=2 on the all-Q6_K model (its exit 1 also
#           shows Q6_K took the mma kernels: the plant touches no FFMA launch).
#   bench   SmolLM2-shaped (30 layers, 576, Q4_1, tied, vocab 49152) and Gemma-3-shaped (18
#           layers, 640, Q5_0, vocab 262144) files, one stage: prefill512 (prime, C=512) and
#           batched B=8, --mma off then on.
#   q6bench an 8B-shaped Q4_K_M slice (llama8b preset, 2 layers, vocab 32000: the head and
#           layer 1's attn_v and ffn_down in Q6_K, ~440 MB), one stage: prefill512 and B=8
#           with --mma auto (Q4_K on tensor cores, Q6_K on FFMA) then on (Q6_K too): the
#           rows' tok/s difference is what Q6_K on tensor cores buys (~40 s).
#   acc     the two bench files, one stage, a 24-token tape, --topk 20: --mma off and on,
#           compared by scripts/cmp-receipts.py (top-1 agreement, max |logit diff| over the
#           top-20; the bits differ by design), and each against the CPU backend (the
#           crate's f32 reference) unless ACC_CPU=0.
# What to look for (Q6_K: the q6_k-*, q4_k_m-mix-* gate rows rc=0 PASS, its fault row rc=1,
# q6bench's "on" rows at or above "auto"'s): every gate row rc=0 with PASS (a FAIL names the format and whether the
# 256-wide or the partial super-block path broke); the fault rows rc=1; the bench rows'
# prefill tok/s on vs off (the target of issue #13; FFMA's are the "off" rows); acc: top-1
# 24/24 (or misses only at tiny margins) and mma's max |diff| vs CPU no larger than FFMA's in
# order of magnitude.
# OUT gets 4 files: summary.txt (the table, printed last too), log.txt, receipts.tar.gz,
# bench.txt. Helpers: scripts/gpu-mma-lib.sh. BACKEND=cpu rehearses the flow here (no --mma:
# the CPU refuses it; slow:
# SECTIONS="gates faults" is enough to check the flow).
set -u
BIN=${1:?usage: scripts/gpu-mma32.sh BIN MODELDIR OUT}
M=${2:?usage: scripts/gpu-mma32.sh BIN MODELDIR OUT}
OUT=${3:?usage: scripts/gpu-mma32.sh BIN MODELDIR OUT}
WORK=${WORK:-/tmp/gpu-mma32}
BACKEND=${BACKEND:-cuda}
SECTIONS=${SECTIONS:-gates faults bench acc q6bench}
ACC_CPU=${ACC_CPU:-1}
cd "$(dirname "$0")/.."
. scripts/gpu-mma-lib.sh
init_out

FMTS=${FMTS:-q8_0 q4_1 q5_0 q4_0 q6_k}  # FMTS=q6_k SECTIONS="gates faults": the Q6_K rows alone
small="--arch llama --layers 2 --embd 512 --heads 8 --kv-heads 2 --ff 1536 --vocab 2048"
SMOL_S="$M/smol-small-q4_1.gguf"
GEMMA_S="$M/gemma-small-q5_0.gguf"
SMOL="$M/smollm2-shape-q4_1.gguf"
GEMMA="$M/gemma3-shape-q5_0.gguf"
if want gates || want faults; then
    for q in $FMTS; do synth "$M/llama-small-$q.gguf" $small --quant "$q"; done
    synth "$SMOL_S" --arch llama --layers 2 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 2048 --quant q4_1 --tied
    synth "$GEMMA_S" --arch gemma3 --layers 2 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 2048 --quant q5_0
    synth "$M/llama-small-q4_k_m.gguf" $small --quant q4_k_m
fi
if want bench || want acc; then
    synth "$SMOL" --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied
    synth "$GEMMA" --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q5_0
fi
row "models ready" "$(($(date +%s) - T0)) s"


DECODE="--arms eager,pipelined,batched --batch 8 --gen-len 24"
CHUNKS="--arms prime,verify --prompt-len 40 --chunk 1,8,16,40 --gen-len 8"
if want gates; then
    for q in $FMTS; do
        for n in 1 2; do
            gate "$q-n$n-decode" $(mma on) --model "$M/llama-small-$q.gguf" --stages $n --devices "$(devs $n)" $DECODE
            gate "$q-n$n-chunks" $(mma on) --model "$M/llama-small-$q.gguf" --stages $n --devices "$(devs $n)" $CHUNKS
        done
    done
    for m in smol576-q4_1:"$SMOL_S" gemma640-q5_0:"$GEMMA_S"; do
        gate "${m%%:*}-n2-decode" $(mma on) --model "${m#*:}" --stages 2 --devices 0,0 $DECODE
        gate "${m%%:*}-n2-chunks" $(mma on) --model "${m#*:}" --stages 2 --devices 0,0 $CHUNKS
    done
    for n in 1 2; do
        gate "q4_k_m-mix-n$n-decode" $(mma on) --model "$M/llama-small-q4_k_m.gguf" --stages $n --devices "$(devs $n)" $DECODE
        gate "q4_k_m-mix-n$n-chunks" $(mma on) --model "$M/llama-small-q4_k_m.gguf" --stages $n --devices "$(devs $n)" $CHUNKS
    done
fi

if want faults; then
    has() { [[ " $FMTS " == *" $1 "* ]]; }  # the format's small llama was written
    has q8_0 && gate "fault-mma-row-order q8_0 batched (want rc=1)" $(mma on) --model "$M/llama-small-q8_0.gguf" \
        --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
    gate "fault-mma-row-order smol576 prime (want rc=1)" $(mma on) --model "$SMOL_S" \
        --stages 1 --devices 0 --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault mma-row-order
    has q6_k && gate "fault-mma-row-order q6_k batched (want rc=1)" $(mma on) --model "$M/llama-small-q6_k.gguf" \
        --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
fi

if want bench; then
    for m in smollm2-q4_1:"$SMOL" gemma3-q5_0:"$GEMMA"; do
        for s in off on; do
            bench "${m%%:*}-prefill512-mma-$s" "${m#*:}" $(mma $s) --arms prime --chunk 512 --prompt-len 512 --repeat 2 --steps 4
            bench "${m%%:*}-b8-mma-$s" "${m#*:}" $(mma $s) --arms batched --batch 8 --steps 32
        done
    done
fi

if want q6bench; then
    Q6B="$M/llama8b-2l-q4_k_m.gguf"
    synth "$Q6B" --preset llama8b --layers 2 --quant q4_k_m
    for s in auto on; do
        bench "llama8b-2l-q4_k_m-prefill512-mma-$s" "$Q6B" $(mma $s) --arms prime --chunk 512 --prompt-len 512 --repeat 2 --steps 4
        bench "llama8b-2l-q4_k_m-b8-mma-$s" "$Q6B" $(mma $s) --arms batched --batch 8 --steps 32
    done
fi

if want acc; then
    acc smollm2-q4_1 "$SMOL"
    acc gemma3-q5_0 "$GEMMA"
fi

row "total" "$(($(date +%s) - T0)) s"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
cat "$SUM"
