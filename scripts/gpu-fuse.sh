#!/usr/bin/env bash
# The fused tensor-core decode (kernels/mma.cu mma_decode_f8/f16: a decode launch that
# prepares its rows itself, one launch per op instead of mma_prep + decode) against the
# binary before it, on ONE GPU. Usage, from the repository root:
#
#   scripts/gpu-fuse.sh BIN_BASE BIN_NEW MODELDIR OUT
#
# BIN_BASE: a build without fusion (main); BIN_NEW: this branch's. MODELDIR: empty scratch
# (BIN_NEW synth writes the models there). Sections (SECTIONS="gates faults bench", default
# all, in this order), about 2 minutes in all:
#   gates   three synthetic shapes, --mma on, 2 stages on device 0, with BOTH binaries:
#           SmolLM2 (30 layers, 576 wide, Q4_1, tied), Gemma-3 (18 layers, 640 wide,
#           head_dim 256, Q5_0, vocab 262144) and a 2-layer 4096-wide Q4_K llama (llama8b
#           preset): decode (eager, pipelined, batched B=8: the fused kernel for every
#           one-row op and for the B=8 ops that fit its shared memory, mma_prep + decode
#           for the rest) and chunks (prime, verify at 1, 8, 16, 40: 40 rows take the GEMM
#           after mma_prep); every arm must PASS. Then `BIN_NEW diff` of the two binaries'
#           receipts of each gate: must print `same` (fusion must not change a bit).
#   faults  BIN_NEW, --mma on --fault mma-row-order, batched B=8 on the SmolLM2 shape (its
#           B=8 ops all take the fused kernel, which plants as mma_prep does): rc=1.
#   bench   one stage, --arms batched --batch 8 --steps 64, --mma on and off, with both
#           binaries, interleaved: the eager (one row a step) and batched B=8 tok/s.
# What to look for: gate rows rc=0 with every arm PASS; every diff row `same`; the fault row
# rc=1 with a FAIL; in the table at the end, eager tok/s of new/mma-on above base/mma-on
# (the target: near or above mma-off's), B=8 of new/mma-on not below base/mma-on (if it
# is, the B=8 ops should not fuse: lower engine.rs MMA_FUSE_SMEM_MAX or MMA_FUSE_ROUNDS;
# Gemma's B=8 down-proj and every 4096-wide B=8 op do not fuse already), mma-off rows equal
# between binaries (untouched path; their spread is the noise).
# OUT gets 4 files: summary.txt (the table, printed last too), log.txt, receipts.tar.gz,
# bench.txt. Helpers: scripts/gpu-mma-lib.sh.
set -u
BASE=${1:?usage: scripts/gpu-fuse.sh BIN_BASE BIN_NEW MODELDIR OUT}
NEW=${2:?usage: scripts/gpu-fuse.sh BIN_BASE BIN_NEW MODELDIR OUT}
M=${3:?usage: scripts/gpu-fuse.sh BIN_BASE BIN_NEW MODELDIR OUT}
OUT=${4:?usage: scripts/gpu-fuse.sh BIN_BASE BIN_NEW MODELDIR OUT}
WORK=${WORK:-/tmp/gpu-fuse}
BACKEND=${BACKEND:-cuda}
SECTIONS=${SECTIONS:-gates faults bench}
cd "$(dirname "$0")/.."
BIN=$NEW # gpu-mma-lib.sh's synth and gate run $BIN
. scripts/gpu-mma-lib.sh
init_out

SMOL="$M/smollm2-shape-q4_1.gguf"
GEMMA="$M/gemma3-shape-q5_0.gguf"
L8="$M/llama8b-2l-q4_k.gguf"
synth "$SMOL" --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied
synth "$GEMMA" --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q5_0
synth "$L8" --preset llama8b --layers 2 --vocab 8192 --quant q4_k
row "models ready" "$(($(date +%s) - T0)) s"
MODELS="smol:$SMOL gemma:$GEMMA llama8b-2l:$L8"

DECODE="--arms eager,pipelined,batched --batch 8 --gen-len 24"
CHUNKS="--arms prime,verify --prompt-len 40 --chunk 1,8,16,40 --gen-len 8"
if want gates; then
    for m in $MODELS; do
        name=${m%%:*} f=${m#*:}
        for g in decode chunks; do
            if [ $g = decode ]; then args=$DECODE; else args=$CHUNKS; fi
            for b in base new; do
                if [ $b = base ]; then BIN=$BASE; else BIN=$NEW; fi
                gate "$name-$g-$b" $(mma on) --model "$f" --stages 2 --devices 0,0 $args
            done
            BIN=$NEW
            d=$("$NEW" diff "$WORK/r/$name-$g-base.json" "$WORK/r/$name-$g-new.json" 2>&1)
            echo "== diff $name-$g: $d" >>"$LOG"
            row "diff $name-$g base vs new (want same)" "$(echo "$d" | head -1 | cut -c1-40)"
        done
    done
fi

if want faults; then
    gate "fault-mma-row-order smol batched B=8 (want rc=1)" $(mma on) --model "$SMOL" \
        --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
fi

# bench_ab NAME BIN FILE ARGS...: one bench run; its eager and batched tok/s into the table.
bench_ab() {
    local name=$1 bin=$2 f=$3
    shift 3
    timeout 120 "$bin" bench --backend "$BACKEND" --model "$f" --stages 1 --devices 0 "$@" \
        --receipt "$WORK/r/bench-$name.json" >"$WORK/bench-$name.out" 2>&1
    local rc=$?
    { echo "== bench $name: $*"; cat "$WORK/bench-$name.out"; } | tee -a "$BENCH" >>"$LOG"
    local e b l
    e=$(grep -E '^  eager ' "$WORK/bench-$name.out" | grep -oE '[0-9.]+ tok/s' | head -1)
    b=$(grep -E '^  batched ' "$WORK/bench-$name.out" | grep -oE '[0-9.]+ tok/s' | head -1)
    # launches per token of the reference walk: fusion removes one per fused op
    l=$(grep -oE 'kernel launches per token \(reference\) [0-9.]+' "$WORK/bench-$name.out" | grep -oE '[0-9.]+$')
    printf '%-28s rc=%s  eager %-14s B=8 %-14s launches/tok %s\n' "$name" "$rc" "${e:-?}" "${b:-?}" "${l:-?}" >>"$WORK/table"
}
: >"$WORK/table"
if want bench; then
    for m in $MODELS; do
        name=${m%%:*} f=${m#*:}
        for s in on off; do
            for b in base new; do
                if [ $b = base ]; then bin=$BASE; else bin=$NEW; fi
                bench_ab "$name-mma-$s-$b" "$bin" "$f" $(mma $s) --arms batched --batch 8 --steps 64
            done
        done
    done
fi

row "total" "$(($(date +%s) - T0)) s"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
{
    echo
    echo "bench tok/s (one stage; eager = one row a step, B=8 = batched 8):"
    cat "$WORK/table"
} >>"$SUM"
cat "$SUM"
