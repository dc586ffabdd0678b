#!/usr/bin/env bash
# Issue 30 step 49 (BENCH.md "Q4_K's scales folded into the wgmma"), call 1 on one H100 or
# H200: the wgmma GEMM with each sub-block's scale folded into A (two u8 digits, the whole
# super-block summed by the tensor cores in one wgmma group, empty barriers instead of the
# block barrier, one block an SM, 4 stages) against main's build. Builds (.stage/bin):
#   M = main (1f0e8dd); N = step 49's first form (one wgmma group a super-block, m64n96k32);
#   P = N + the warpgroups' turns at the tensor cores; Q = P with two groups a super-block,
#   one a 16-column half (m64n48k32; XG's column groups ordered by half), the first half's
#   epilogue beside the second's wgmma.
# Proves:
#  - the same bits, with scripts/decode-ab.sh: the prime arm at chunks 512 and 37 on the 8B l8
#    Q4_K slice, every build against M; then for G (default Q)
#    every arm and serve at N = 2 (prime chunk 64, whose gate|up takes the wgmma GEMM) on the
#    8B l8 slice under --mma auto and the Q4_K_M slice under --mma on (same.txt);
#    prefill512 of M, N, P, Q alternating (prefill.txt);
#  - PPN_CUDA_PROF's microseconds a wgmma launch per op on one 512-row prefill (prof.txt);
#  - G's (default Q) gates PASS at N = 1, 2, 3, 4, 5, 8 on one GPU with prime chunks of 512 and 37 under
#    --mma on, and the planted --fault mma-row-order FAILs (gates.txt);
#  - a soak of G's prime gate until DEADLINE (soak.txt).
# With LC=1 it starts llama.cpp's build in the background for call 2 (pp512 beside prefill512).
#   OUT=DIR bash receipts/prefill-cuda/folded-scales/call1.sh     [DEADLINE=seconds, default 560; G=M|N|P|Q; BUILDS="M N P Q"; LC=1]
set -u
OUT=${OUT:?}
B=.stage/bin
G=${G:-Q}
BUILDS=${BUILDS:-M N P Q}
args=(); for n in $BUILDS; do args+=("$n=$B/$n"); done
T0=$(date +%s)
DEADLINE=${DEADLINE:-560}
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
[ -n "${LC:-}" ] && [ -f .stage/llama.cpp.tgz ] && scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
for n in $BUILDS; do $B/$n --version >> "$OUT/gpu.txt" 2>&1; done
SAME= SPEED= PREFILL="l8q4k" ROUNDS=2 OUT=$OUT \
  timeout $(( $(left) - 30 )) scripts/decode-ab.sh "${args[@]}"
M8=/tmp/ab/l8q4k.gguf
for n in $BUILDS; do
  [ "$(left)" -gt 40 ] || continue
  PPN_CUDA_PROF=1 timeout 40 $B/$n bench --backend cuda --model $M8 --arms prime --chunk 512 \
    --prompt-len 512 2>&1 | grep -E 'stage 0: mma (gemm|prep)|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"
done > "$OUT/prof.txt"
mkdir -p /tmp/same
if [ "$(left)" -gt 150 ]; then
  SAME="l8q4k:auto l4m:on" SPEED= PREFILL= OUT=/tmp/same timeout $(( $(left) - 20 )) scripts/decode-ab.sh M=$B/M $G=$B/$G
  cat /tmp/same/same.txt >> "$OUT/same.txt"
fi
{
  for n in 1 2 3 4 5 8; do
    devs=$(printf '0,%.0s' $(seq $n)); devs=${devs%,}
    for c in "512 --prompt-len 600" "37 --prompt-len 100"; do
      [ "$(left)" -gt 60 ] || { echo "N=$n chunk ${c%% *}: out of time"; continue; }
      timeout 90 $B/$G --backend cuda --model $M8 --stages $n --devices $devs --mma on \
        --arms eager,pipelined,prime --chunk $c --gen-len 8 > /tmp/g.txt 2>&1
      echo "N=$n chunk ${c%% *}: exit $? $(grep -E ' (PASS|FAIL) ' /tmp/g.txt | cut -c1-60 | tr '\n' ';') $(grep -m1 error /tmp/g.txt)"
    done
  done
  timeout 90 $B/$G --backend cuda --model $M8 --stages 2 --devices 0,0 --mma on --arms prime \
    --chunk 37 --prompt-len 100 --gen-len 8 --fault mma-row-order > /tmp/g.txt 2>&1
  echo "fault mma-row-order N=2 chunk 37: exit $? (1 expected) $(grep -E ' (PASS|FAIL) ' /tmp/g.txt | cut -c1-90 | tr '\n' ';') $(grep -m1 error /tmp/g.txt)"
} > "$OUT/gates.txt" 2>&1
R=$(( $(left) / 12 )); [ "$R" -gt 20 ] && R=20
if [ "$R" -ge 2 ]; then
  timeout $(( $(left) - 5 )) $B/$G soak --runs $R --backend cuda --model $M8 --stages 2 --devices 0,0 \
    --mma on --arms eager,prime --chunk 37 --prompt-len 100 --gen-len 8 --out /tmp/soak > /tmp/soak.txt 2>&1
  echo "soak exit $?" >> /tmp/soak.txt
  tail -6 /tmp/soak.txt > "$OUT/soak.txt"
fi
tail -2 /tmp/lc.log > "$OUT/llama-build-tail.txt" 2>/dev/null
cat "$OUT/same.txt" "$OUT/prefill.txt" "$OUT/prof.txt" "$OUT/gates.txt"; tail -3 "$OUT/soak.txt" 2>/dev/null
