#!/usr/bin/env bash
# Issue 30 step 59, call 2, on the machine call1.sh left warm: Nsight Compute's full set and
# source page of one gate|up wgmma launch (layer 2's, launch 10 of the kernel with graphs off)
# of H (three pieces) and P1 (one piece): which instructions the two pieces cost, and what
# one piece leaves (call2/: gu-*-details.txt, gu-*-sass.csv.gz, read with
# scripts/ncu-source-mix.py). About 35 s; one tarball, $OUT/p5.tgz.
#   OUT=DIR bash receipts/prefill-cuda/fewer-pieces/call2.sh     (.stage carried)
set -u
O=/tmp/p5; rm -rf $O; mkdir -p $O
[ -f /tmp/ab/l8q4k.gguf ] || .stage/bin/H synth $(. scripts/shapes.sh; echo ${SHAPES[l8q4k]}) -o /tmp/ab/l8q4k.gguf
RUN="bench --backend cuda --model /tmp/ab/l8q4k.gguf --graphs off --arms prime --chunk 512 --prompt-len 512"
for n in H P1; do OUT=$O scripts/ncu-source.sh gu-$n mma_gemm_wg 10 .stage/bin/$n $RUN; done
tar czf $OUT/p5.tgz -C /tmp p5
for n in H P1; do python3 scripts/ncu-source-mix.py $O/gu-$n-sass.csv.gz 2>&1 | head -40; grep -E "Duration|Registers|Issue Slots Busy|Executed Ipc A" $O/gu-$n-details.txt | head -6; done
