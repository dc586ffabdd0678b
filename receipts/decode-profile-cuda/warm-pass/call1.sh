#!/usr/bin/env bash
# Issue 30 step 60, call 1 (run 2026-12-07 on one H100; builds from build.sh, carried in .stage):
# does a narrow one-row launch wait on its own code? Step 9's Nsight Compute stalls put
# instruction-cache misses second in SmolLM2's q|k|v launch (imc_miss 821 of ~4,500
# samples), and step 16's kernel grew by 1,000 instructions and lost in the engine while
# it gained alone. W runs each one-row mvq launch's code once before pdl_wait (under the
# previous launch), so that its real pass finds it in the instruction cache. Proves, with
# scripts/decode-ab.sh (call1/: same.txt, speed.txt, prof.txt from $OUT/ab):
#  - bits: every arm and serve at N = 2 `diff` same for C and W against H on the SmolLM2
#    shape and the Gemma-3 Q4_K_M twin (auto) and the Qwen2-0.5B shape (--mma off): the
#    dry pass writes nothing but shared memory and the real pass is H's walk;
#  - speed: decode-only eager, H, C, W alternating, three rounds, on smol, gemq4km, qw05,
#    q3; C against H is the occupancy's share, W against C the warm pass's.
#   OUT=DIR bash receipts/decode-profile-cuda/warm-pass/call1.sh
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
SAME="smol:auto gemq4km:auto qw05:off" SPEED="smol gemq4km qw05 q3" \
  SPEED_ARGS="--arms eager --steps 128" ROUNDS=3 PROF=1 OUT=$OUT/ab \
  timeout 560 scripts/decode-ab.sh H=.stage/bin/H C=.stage/bin/C W=.stage/bin/W > $OUT/ab.out 2>&1
echo "decode-ab exit $?"
cat $OUT/ab/same.txt $OUT/ab/speed.txt 2>/dev/null
