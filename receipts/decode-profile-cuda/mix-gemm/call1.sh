#!/usr/bin/env bash
# Issue 30 step 32 (the mixed Q4_K|Q6_K decode launch) and step 33 (the integer GEMM's register
# bound), call 1, one H200. Builds: O = main (551ef16); M = the mixed decode (a Q4_K_M file's
# q|k|v with a Q6_K v in ONE prep and ONE decode launch), the GEMM as O's (512 threads, 128
# registers); G1 = M with the integer formats' GEMM on at most 2 warps along n (256 threads,
# one block an SM: 241 / 206 registers, no spill); G2 = M with 1 warp along n and 3 blocks an
# SM (168 registers; Q4_K spills 68 bytes). Proves, via scripts/decode-ab.sh:
# same.txt: every arm and serve at N = 2 (B = 8, prime chunk 64) on a 4-layer Q4_K_M file
# (layers 2 and 3 hold a Q6_K v, so M's mixed launch runs) under --mma auto and on, and the
# prime arm at chunks 512 and 37 on the 8B l8 Q4_K slice: `diff` same against O for M, G1, G2;
# speed.txt: eager and B=8 on the full-depth 8B Q4_K_M file, builds alternating, two rounds;
# prefill.txt: prefill512 on the 8B l8 Q4_K slice, alternating, two rounds;
# prof.txt: per op, O and M (PPN_CUDA_PROF: M's q|k|v preps and launches fewer);
# soak.txt: M's soak x10 of every arm at N = 2 (auto) and N = 3 (on) on the 4-layer file, with
# 50 us of jitter: 10/10 each.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/mix-gemm/call1.sh, .stage carried.
set -u
nvidia-smi -L
SAME="l4m:auto l4m:on" SPEED="l32" ROUNDS=2 PROF=1 PREFILL=l8q4k OUT=$OUT timeout 430 scripts/decode-ab.sh \
  O=.stage/bin/O G1=.stage/bin/G1 G2=.stage/bin/G2 M=.stage/bin/M
R=$OUT/soak.txt; : > $R
for nm in "2 auto 0,0" "3 on 0,0,0"; do set -- $nm
timeout 70 .stage/bin/M soak --runs 10 --backend cuda -q --mma $2 --model /tmp/ab/l4m.gguf --stages $1 --devices $3 --jitter-us 50 --arms eager,pipelined,batched,prime,verify --batch 8 --chunk 16 --prompt-len 40 --gen-len 24 --out /tmp/soak-$1 > /tmp/soak-$1.txt 2>&1
echo "soak x10 l4m N=$1 --mma $2 jitter 50: exit $? $(grep -E '^[0-9]+/10 ' /tmp/soak-$1.txt | tail -1)" >> $R; done
cat $R
