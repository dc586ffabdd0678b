#!/usr/bin/env bash
# Issue 30, step 15 (an L2 hint in the dense one-row walk of the vocabulary heads), one call
# on one H200: O = 9917b9f's build (before step 14), F = 797ce72's (step 14: the folded
# post-norm adds), P1 = F and each warp of the dense walk asks L2 for its next group's rows as
# a group starts, P2 = for its next two groups. Proves (scripts/decode-ab.sh): every arm and
# serve at N = 2 `diff` same against O on the Gemma-3 Q4_K_M mix (Q8_0 head) and the SmolLM2
# shape (same.txt: a hint changes no value); eager and B=8 of the four builds alternating
# three times on gemq4km, gem (Q5_0 head) and smol (speed.txt: smol, which has no post-norm,
# also says whether F's larger one-row kernels cost it anything); the head's microseconds a
# launch under PPN_CUDA_PROF, O against P2 (prof.txt).
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
SAME="gemq4km:auto smol:auto" SPEED="gemq4km gem smol" ROUNDS=3 PROF=1 \
  scripts/decode-ab.sh O=.stage/bin/ppn-gate-old F=.stage/bin/ppn-gate P1=.stage/bin/ppn-gate-p1 \
  P2=.stage/bin/ppn-gate-p2 > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
cat $OUT/same.txt; grep eager $OUT/speed.txt; grep -E '===|head' $OUT/prof.txt
