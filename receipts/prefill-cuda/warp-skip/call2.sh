#!/usr/bin/env bash
# Issue 30 step 57, call 2 (run 2026-12-07 on one H100, after call1.sh's profile part failed
# on the NCU= name): Nsight Compute's full set and source page of one attention_rows launch of
# M and W (launch 3 of the kernel, graphs off, a 512-row prefill of the 8B l8 Q4_K slice):
# where the skipped multiplies' cycles went (call2/: ar-*-details.txt, ar-*-sass.csv.gz, read
# with scripts/ncu-source-mix.py). About 70 s; one tarball, $OUT/p6.tgz.
#   OUT=DIR bash receipts/prefill-cuda/warp-skip/call2.sh     (.stage carried: bin/M, bin/W)
set -u
O=/tmp/p6; rm -rf $O; mkdir -p $O
mkdir -p /tmp/ab; [ -f /tmp/ab/l8q4k.gguf ] || .stage/bin/M synth $(. scripts/shapes.sh; echo ${SHAPES[l8q4k]}) -o /tmp/ab/l8q4k.gguf
RUN="bench --backend cuda --model /tmp/ab/l8q4k.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
for n in M W; do OUT=$O timeout 60 scripts/ncu-source.sh ar-$n attention_rows 2 .stage/bin/$n $RUN; done
tar czf $OUT/p6.tgz -C /tmp p6
for n in M W; do python3 scripts/ncu-source-mix.py $O/ar-$n-sass.csv.gz 2>&1 | head -24; grep -E "Duration|Issue Slots Busy" $O/ar-$n-details.txt | head -3; done
