#!/usr/bin/env bash
# ppn-gate against llama.cpp on a llama file with RoPE frequency factors (rope_freqs.weight),
# and on the same weights without them (README.md beside this script has the figures).
#
#   receipts/rope-freqs-vs-llamacpp/run.sh LLAMA_CPP_DIR [BIN]
#
# LLAMA_CPP_DIR: llama.cpp's source (the anchors tarball) with a static CPU build of libllama
# in build/ (README.md gives the commands). BIN: ppn-gate (default target/release/ppn-gate).
# Writes into this folder: llamacpp-{rf,plain}.json (llama.cpp's logits in the oracle format),
# ppn-{rf,plain}.json (ppn-gate receipts on llama.cpp's tapes), the crossed controls, and
# compare.txt. Exit 0 when both same-file comparisons pass and both crossed controls fail.
set -euo pipefail
LC=$(cd "$1" && pwd)
BIN=$(realpath "${2:-target/release/ppn-gate}")
D=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$D/../.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

g++ -O2 -std=c++17 "$D/llama-logits.cpp" -I"$LC/include" -I"$LC/ggml/include" \
    "$LC/build/src/libllama.a" "$LC/build/ggml/src/libggml.a" "$LC/build/ggml/src/libggml-cpu.a" \
    "$LC/build/ggml/src/libggml-base.a" -lpthread -ldl -lm -o "$W/llama-logits"

# F32 weights: llama.cpp's CPU matmul then stays in f32 (for quantized weights it quantizes
# the activations to 8 bits, an error far above the 1e-3 this comparison holds).
FLAGS="--arch llama --layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 1024 --quant f32 --seed 7"
"$BIN" synth $FLAGS --rope-freqs -o "$W/llama-rf.gguf" | sed "s|$W/||" | tee "$D/models.txt"
# The same weights without the factors (synth draws them from a stream of their own).
"$BIN" synth $FLAGS -o "$W/llama-plain.gguf" | sed "s|$W/||" | tee -a "$D/models.txt"

# BOS + 7 seeded ids (tapeA's shape), then 24 greedy tokens chosen by llama.cpp.
PROMPT=257,484,524,773,973,35,147,842
for m in rf plain; do
    "$W/llama-logits" "$W/llama-$m.gguf" "$PROMPT" 24 "$D/llamacpp-$m.json"
done

gate() { # gate MODEL TAPE RECEIPT: ppn-gate's reference on llama.cpp's tape, top-20 recorded
    "$BIN" --backend cpu -q --model "$W/llama-$1.gguf" --stages 1 --arms eager \
        --tape "$D/llamacpp-$2.json" --topk 20 --receipt "$D/$3.json" >/dev/null
}
gate rf rf ppn-rf
gate plain plain ppn-plain
# Crossed controls: ppn-gate without the factors on llama.cpp's factored run, and with them
# on llama.cpp's plain run. Both must FAIL the 1e-3 bound, or the comparison could not tell
# a forward pass that ignores the factors from one that applies them.
gate plain rf control-ppn-plain-vs-llamacpp-rf
gate rf plain control-ppn-rf-vs-llamacpp-plain

compare() { python3 "$ROOT/scripts/oracle-compare.py" --tol 1e-3 "$D/$1.json" "$D/$2.json"; }
rc=0
{
    echo "# same file: must pass (top-1 at every step, top-20 within 1e-3)"
    compare ppn-rf llamacpp-rf || rc=1
    compare ppn-plain llamacpp-plain || rc=1
    echo "# crossed controls: must fail"
    compare control-ppn-plain-vs-llamacpp-rf llamacpp-rf && rc=1
    compare control-ppn-rf-vs-llamacpp-plain llamacpp-plain && rc=1
    echo "exit $rc"
} 2>&1 | sed "s|$D/||g" | tee "$D/compare.txt"
exit "$(tail -1 "$D/compare.txt" | cut -d' ' -f2)"
