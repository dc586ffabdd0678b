#!/usr/bin/env bash
# Issue 30 step 48 (BENCH.md "The wgmma Q4_K GEMM in the engine"), call 1 on one H100 or H200:
# the engine's wgmma GEMM (kernels/mma.cu mma_prep_xg + mma_gemm_wg, compute capability 9.0
# only) against main's build.
#   M = main's build (d284faa), W = M + step 48 (.stage/bin, carried).
# Proves:
#  - that W runs the wgmma launches (PPN_CUDA_PROF's names "mma prep wg", "mma gemm wg" on the
#    8B l8 Q4_K slice's prefill; ran.txt);
#  - the same bits, with scripts/decode-ab.sh: every arm and serve at N = 2 (prime chunk 64,
#    whose gate|up takes the wgmma GEMM) on the 8B l8 Q4_K slice under --mma auto and the
#    4-layer Q4_K_M slice under --mma on, and the prime arm at chunks 512 and 37 on both
#    (same.txt); prefill512 of M and W alternating (prefill.txt);
#  - W's gates PASS at N = 1, 2, 3, 4, 5, 8 on one GPU with prime chunks of 512 and 37 under
#    --mma on, and the planted --fault mma-row-order (in mma_prep_xg too) FAILs (gates.txt);
#  - a soak of W's prime gate until DEADLINE (soak.txt).
# Starts llama.cpp's build in the background for call 2 (pp512 beside prefill512).
#   OUT=DIR bash receipts/prefill-cuda/wgmma-engine/call1.sh     [DEADLINE=seconds, default 540]
set -u
OUT=${OUT:?}
B=.stage/bin
T0=$(date +%s)
DEADLINE=${DEADLINE:-540}
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
[ -f .stage/llama.cpp.tgz ] && scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
$B/W --version >> "$OUT/gpu.txt" 2>&1; $B/M --version >> "$OUT/gpu.txt" 2>&1
SAME="l8q4k:auto l4m:on" SPEED= PREFILL="l8q4k l4m" ROUNDS=2 OUT=$OUT \
  timeout 300 scripts/decode-ab.sh M=$B/M W=$B/W
M8=/tmp/ab/l8q4k.gguf
{
  for n in M W; do
    PPN_CUDA_PROF=1 timeout 60 $B/$n bench --backend cuda --model $M8 --arms prime --chunk 512 \
      --prompt-len 512 2>&1 | grep -E 'mma (gemm|prep)|prefill|regs' | awk '!seen[$0]++' | sed "s/^/$n: /"
  done
} > "$OUT/ran.txt"
{
  for n in 1 2 3 4 5 8; do
    devs=$(printf '0,%.0s' $(seq $n)); devs=${devs%,}
    for c in "512 --prompt-len 600" "37 --prompt-len 100"; do
      [ "$(left)" -gt 60 ] || { echo "N=$n chunk ${c%% *}: out of time"; continue; }
      timeout 90 $B/W --backend cuda --model $M8 --stages $n --devices $devs --mma on \
        --arms eager,pipelined,prime --chunk $c --gen-len 8 > /tmp/g.txt 2>&1
      echo "N=$n chunk ${c%% *}: exit $? $(grep -E ' (PASS|FAIL) ' /tmp/g.txt | cut -c1-60 | tr '\n' ';') $(grep -m1 error /tmp/g.txt)"
    done
  done
  timeout 90 $B/W --backend cuda --model $M8 --stages 2 --devices 0,0 --mma on --arms prime \
    --chunk 37 --prompt-len 100 --gen-len 8 --fault mma-row-order > /tmp/g.txt 2>&1
  echo "fault mma-row-order N=2 chunk 37: exit $? (1 expected) $(grep -E ' (PASS|FAIL) ' /tmp/g.txt | cut -c1-90 | tr '\n' ';') $(grep -m1 error /tmp/g.txt)"
} > "$OUT/gates.txt" 2>&1
R=$(( $(left) / 12 )); [ "$R" -gt 20 ] && R=20
if [ "$R" -ge 2 ]; then
  timeout $(( $(left) - 5 )) $B/W soak --runs $R --backend cuda --model $M8 --stages 2 --devices 0,0 \
    --mma on --arms eager,prime --chunk 37 --prompt-len 100 --gen-len 8 --out /tmp/soak > /tmp/soak.txt 2>&1
  echo "soak exit $?" >> /tmp/soak.txt
  tail -6 /tmp/soak.txt > "$OUT/soak.txt"
fi
tail -2 /tmp/lc.log > "$OUT/llama-build-tail.txt" 2>/dev/null
cat "$OUT/same.txt" "$OUT/gates.txt"; tail -3 "$OUT/soak.txt" 2>/dev/null
