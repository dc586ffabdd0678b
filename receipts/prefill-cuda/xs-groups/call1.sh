#!/usr/bin/env bash
# Issue 30 step 55 (PREPARED 2026-12-07, NOT YET RUN ON A GPU), call 1 on one H100 or H200: X
# against M, builds from build.sh. Proves, through ../folded-scales/call1.sh with
# BUILDS="M X" G=X: the same bits at prime chunks 512 and 37 and on every arm and serve at
# N = 2 (same.txt); prefill512 M and X alternating (prefill.txt); microseconds a launch
# (prof.txt); X's gates at N = 1..8 with chunks 512 and 37, the planted fault, a soak
# (gates.txt, soak.txt); then chunked prefill at 64 and 37 rows (chunks.txt). One tarball,
# $OUT/d.tgz, written again after each part.
#   OUT=DIR bash receipts/prefill-cuda/xs-groups/call1.sh     [DEADLINE=seconds, default 300]
set -u
R=${OUT:?}
O=/tmp/d; mkdir -p $O
keep() { tar czf "$R/d.tgz" -C $O .; }
DEADLINE=${DEADLINE:-300} BUILDS="M X" G=X OUT=$O bash receipts/prefill-cuda/folded-scales/call1.sh > $O/call1.out 2>&1
rm -f "$O/speed.txt" "$O/llama-build-tail.txt"
keep
scripts/prefill-chunks.sh M X > "$O/chunks.txt"
keep
cat "$O/prefill.txt" "$O/same.txt" "$O/gates.txt" "$O/chunks.txt"; tail -3 "$O/soak.txt"
