#!/usr/bin/env bash
# Issue 30 step 36 (BENCH.md), call 6 on one GPU (call 5's machine): soaks of G (main 0d5bbfd +
# the narrow GEMM) with 50 us of jitter at N = 2, on the arms whose steps run GEMMs: the
# SmolLM2 shape at chunks of 100 over a 333-token prompt (its narrow GEMMs), x10; a 4-layer 8B
# Q4_K_M slice under --mma on at chunks of 37 (Q4_K and Q6_K on the narrow kernel), x5.
# Proves every run PASSes (call6/soak.txt: the lines the call printed; its output tail).
set -u
B=.stage/bin
. scripts/shapes.sh
$B/G synth ${SHAPES[smol]} -o /tmp/smol.gguf > /dev/null
$B/G synth ${SHAPES[l4m]} -o /tmp/l4m.gguf > /dev/null
(timeout 110 $B/G soak --backend cuda --model /tmp/smol.gguf --stages 2 --arms pipelined,batched,prime,verify \
  --chunk 100 --prompt-len 333 --gen-len 12 --batch 8 --runs 10 --jitter-us 50 -q; echo "smol soak exit $?") 2>&1 | tail -6
(timeout 110 $B/G soak --backend cuda --model /tmp/l4m.gguf --mma on --stages 2 --arms pipelined,batched,prime,verify \
  --chunk 37 --prompt-len 90 --gen-len 10 --batch 8 --runs 5 --jitter-us 50 -q; echo "l4m soak exit $?") 2>&1 | tail -6
