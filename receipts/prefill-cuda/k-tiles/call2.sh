#!/usr/bin/env bash
# Issue 30 steps 55 and 56 together, call 2 on one H100 or H200 (ran 2026-12-07 on the warm
# H100 of call 1): XS (what main landed) against M, builds from build.sh. Proves, through
# ../folded-scales/call1.sh with BUILDS="M XS" G=XS: the same bits at prime chunks 512 and 37
# and on every arm and serve at N = 2 (same.txt); prefill512 M and XS alternating
# (prefill.txt); per launch microseconds (prof.txt); XS's gates at N = 1..8 with chunks 512
# and 37, the planted fault, a soak (gates.txt, soak.txt); chunks 64 and 37 (chunks.txt).
#   OUT=DIR bash receipts/prefill-cuda/k-tiles/call2.sh
set -u
R=${OUT:?}
O=/tmp/xs; mkdir -p $O
keep() { tar czf "$R/xs.tgz" -C $O .; }
DEADLINE=230 BUILDS="M XS" G=XS OUT=$O bash receipts/prefill-cuda/folded-scales/call1.sh > $O/call1.out 2>&1
keep
scripts/prefill-chunks.sh M XS > $O/chunks.txt 2>&1
keep
cat $O/prefill.txt $O/same.txt $O/gates.txt $O/chunks.txt; tail -2 $O/soak.txt
