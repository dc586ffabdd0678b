#!/usr/bin/env bash
# Step 22, probe 2: Nsight Compute source-level warp-stall sampling (--clock-control none) of
# three fused one-row decode launches (KS: q|k|v 12, o 13, down 14 on the 4-layer 8B Q4_K
# slice); top.py reads ncu's `--page source --csv --print-source sass` into sass-top-*.txt.
# BIN: the build of ../l2-ahead/ (0e05443 with the l2_ahead kernel, never launched without
# PPN_L2_AHEAD: HEAD's decode kernels) for sass-top-1[234].txt, 0e05443 (O) and N1 for
# ../prefetch-off/sass-top-*13.txt (this file as they ran it).
set -u
B=${BIN:-.stage/bin/O}
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/p; $B synth --preset llama8b --layers 4 --quant q4_k -o /tmp/p/l4q4k.gguf > /dev/null
for k in ${KS:-12 13 14}; do
  $NCU --clock-control none --section SpeedOfLight --section SourceCounters --section WarpStateStats --section LaunchStats \
    -k regex:"${KR:-mma_decode_f16}" --launch-skip $k --launch-count 1 --import-source no -o /tmp/p/r$k -f \
    $B --backend cuda --model /tmp/p/l4q4k.gguf --mma auto --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q > /tmp/p/n$k.log 2>&1
  echo "ncu $k exit $?"
  $NCU --import /tmp/p/r$k.ncu-rep --page details > $OUT/details-${TAG:-}$k.txt 2>&1
  $NCU --import /tmp/p/r$k.ncu-rep --page source --csv --print-source sass > /tmp/p/src$k.csv 2>/tmp/p/src$k.err; echo "src $k exit $? $(wc -l < /tmp/p/src$k.csv)"
  python3 .stage/top.py /tmp/p/src$k.csv > $OUT/sass-top-${TAG:-}$k.txt 2>&1
  grep -E "Grid Size|Duration|Registers Per" $OUT/details-${TAG:-}$k.txt
  head -60 $OUT/sass-top-${TAG:-}$k.txt
done
