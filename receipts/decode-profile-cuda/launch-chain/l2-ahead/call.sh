#!/usr/bin/env bash
# Step 22, probe 1 (one H200, 2026-12-04; BENCH.md "The one-row decode launch's chain").
# Builds: .stage/bin/ppn-gate = 0e05443 with tried.patch (an l2_ahead kernel; without
# PPN_L2_AHEAD it is never launched, so "O" is HEAD's behaviour); a10, a30, g32, all = two-line
# wrappers `PPN_L2_AHEAD=10,0,0` / `30,0,0` / `30,32,0` / `30,32,16` exec ppn-gate (MB before
# attention: o then gate|up; before gate|up: down; before down: the next layer's q|k|v).
# nsys was not on the machine (the script's nsys part printed nothing).
set -u
B=.stage/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
NSYS=$(ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1); NSYS=${NSYS:-$(command -v nsys)}
echo "nsys: $NSYS"
SAME="l8q4k:auto" SPEED="l8q4k l32" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=$B/ppn-gate A10=$B/a10 A30=$B/a30 G32=$B/g32 ALL=$B/all
cat $OUT/same.txt; cat $OUT/speed.txt; grep -E 'prof|l2-ahead' $OUT/prof.txt | head -60
if [ -n "$NSYS" ]; then
  for v in O:ppn-gate G32:g32; do n=${v%%:*}; b=${v#*:}
  timeout 120 $NSYS profile --cuda-graph-trace=node -t cuda -o /tmp/ns-$n -f true $B/$b bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms eager --steps 128 > /tmp/ns-$n.log 2>&1; echo "nsys $n exit $?"
  $NSYS stats --report cuda_gpu_kern_sum --format csv /tmp/ns-$n.nsys-rep > $OUT/nsys-$n.csv 2>/dev/null; echo "stats $n exit $?"
  head -20 $OUT/nsys-$n.csv
  done
fi
