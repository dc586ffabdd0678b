#!/usr/bin/env bash
# Issue 30 step 56, call 1 on one H100 or H200 (ran 2026-12-07 on an H100): S against M,
# builds from build.sh. Proves, through ../folded-scales/call1.sh with BUILDS="M S" G=S: the
# same bits at prime chunks 512 and 37 and on every arm and serve at N = 2 (same.txt);
# prefill512 M and S alternating (prefill.txt); S's gates at N = 1..8 with chunks 512 and 37,
# the planted fault, a soak (gates.txt, soak.txt); attention_rows' registers a build
# (prof-att.txt); then Nsight Compute's full set and SASS source page of one attention_rows
# launch of each (ar{M,S}-details.txt, ar{M,S}-sass.csv.gz: scripts/ncu-source-mix.py reads
# them here, ar{M,S}-mix.txt). One tarball, $OUT/s.tgz, written again after each part.
# Chunks 64 and 37 (chunks.txt) ran as `scripts/prefill-chunks.sh M S` on the same machine.
#   OUT=DIR bash receipts/prefill-cuda/k-tiles/call1.sh
set -u
R=${OUT:?}
O=/tmp/s; mkdir -p $O
keep() { tar czf "$R/s.tgz" -C $O .; }
DEADLINE=240 BUILDS="M S" G=S OUT=$O bash receipts/prefill-cuda/folded-scales/call1.sh > $O/call1.out 2>&1
keep
for n in M S; do PPN_CUDA_PROF=1 timeout 40 .stage/bin/$n bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime --chunk 512 --prompt-len 512 2>&1 | grep -E 'attention_rows|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"; done > $O/prof-att.txt 2>&1
keep
RUN="bench --backend cuda --model /tmp/ab/l8q4k.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
OUT=$O scripts/ncu-source.sh arM attention_rows 2 .stage/bin/M $RUN
OUT=$O scripts/ncu-source.sh arS attention_rows 2 .stage/bin/S $RUN
keep
cat $O/prefill.txt $O/same.txt $O/gates.txt $O/prof-att.txt; tail -2 $O/soak.txt
