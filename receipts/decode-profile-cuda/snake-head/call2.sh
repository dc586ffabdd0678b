#!/usr/bin/env bash
# One GPU, after call1.sh on the same machine (issue 30, step 44). S = the snake-dealt head
# walk's build (call1.sh). Proves:
#  - gv/summary.txt (scripts/gpu-validate.sh, sections selftest and cli): with S, selftest
#    --runs RUNS (default 2) catches every fault that opens on one GPU in every run and passes
#    every clean control, and the pinned hunt's every opened trial is caught: the fault-hold
#    path, whose SeqCst fences (stream.rs count_record / hold, ee5ae53; main's, untouched by
#    tried.patch) had not run on a GPU;
#  - soak.txt: soak x SOAK_RUNS (default 20) of the Gemma-3 Q4_K_M mix at N = 2 on one GPU
#    (its head on the snake walk), pipelined and eager, --jitter-us 20: every run PASS.
# Run: OUT=DIR receipts/decode-profile-cuda/snake-head/call2.sh (from the repo root). As run
# (the same H100, right after call1.sh): SOAK_RUNS=10 RUNS=1 DEADLINE_S=150; files soak.txt,
# gv-summary.txt.
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -f /tmp/ab/gemq4km.gguf ] || .stage/bin/S synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 \
  --head-dim 256 --ff 2048 --vocab 262144 --sliding-window 512 --quant q4_k_m -o /tmp/ab/gemq4km.gguf > /dev/null
timeout 120 .stage/bin/S soak --runs ${SOAK_RUNS:-20} --backend cuda --model /tmp/ab/gemq4km.gguf --stages 2 \
  --arms pipelined,eager --jitter-us 20 --out /tmp/soak > $OUT/soak.txt 2>&1
echo "soak exit $?"; tail -3 $OUT/soak.txt
SECTIONS="selftest cli" RUNS=${RUNS:-2} timeout ${DEADLINE_S:-280} scripts/gpu-validate.sh .stage/bin/S $OUT/gv
echo "gpu-validate exit $? (124: the deadline)"
cat $OUT/gv/summary.txt
