#!/usr/bin/env bash
# Issue 30, the multi-row attention pass, call 1 on one GPU: where attention_rows and the
# narrow GEMM spend their instructions, and the serve arm's cache clear on CUDA.
#   M = main 98c7633 (.stage/bin/M).
# Committed: call1/ (serve.txt, the *-details.txt, and *-mix.txt = scripts/ncu-source-mix.py
# over the *-sass.csv this wrote, 6 MB, not kept).
# Proves:
#  - ar-sass.csv / ar-details.txt: one SmolLM2-shape attention_rows launch (layer 3 of a
#    512-row prime chunk), Nsight Compute's full set: per-SASS-instruction executed counts and
#    stall samples (--page source), and the sections (what bounds it);
#  - gn-sass.csv / gn-details.txt: the same for one narrow GEMM launch (mma_gemm_n_q4_1,
#    layer 2's q|k|v), which PPN_CUDA_PROF timed slower than the kernel it replaced;
#  - serve.txt: the serve arm at N = 2 on CUDA PASSes (its walk now clears every stage's cache
#    first), and the hunt's chunk-kv-order finding (seed 71: 2-token prompts, 2 rows, chunks
#    of 2) FAILs on CUDA as on the CPU.
set -u
OUT=${OUT:?}
B=.stage/bin/M
. scripts/shapes.sh
M=/tmp/smol.gguf
$B synth ${SHAPES[smol]} -o $M > /dev/null || exit 1
NCU=/usr/local/cuda/bin/ncu
RUN="bench --backend cuda --model $M --graphs off --arms prime --chunk 512 --prompt-len 512"
prof() {  # name regex skip
  timeout 150 $NCU --set full --import-source no -k regex:"$2" --launch-skip $3 --launch-count 1 \
    -o /tmp/$1 -f $B $RUN > /tmp/$1.log 2>&1; echo "$1 ncu exit $?"; tail -3 /tmp/$1.log
  $NCU -i /tmp/$1.ncu-rep --page source --csv --print-source sass > $OUT/$1-sass.csv 2>&1
  echo "$1 source page exit $?"
  $NCU -i /tmp/$1.ncu-rep --page details > $OUT/$1-details.txt 2>&1
}
prof ar attention_rows 2
prof gn mma_gemm_n 3
{
  G="--backend cuda --model $M --stages 2"
  $B $G --arms batched,serve --receipt /tmp/s1.json; echo "serve default exit $?"
  F="--arms batched,serve --prompt-len 2 --max-rows 2 --prefill-chunk 2 --seed 53192"
  $B $G $F --receipt /tmp/s2.json; echo "finding, no fault: exit $?"
  $B $G $F --fault chunk-kv-order --receipt /tmp/s3.json; echo "finding, chunk-kv-order: exit $? (1 = FAIL expected)"
} > $OUT/serve.txt 2>&1
cat $OUT/serve.txt | tail -30
ls -la $OUT
