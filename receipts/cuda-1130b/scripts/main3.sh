#!/usr/bin/env bash
# Final session, call main3: stages as processes over NCCL on the two GPUs (#17), both models.
set -u
OUT=$1; BIN=${BIN:-$(cat /tmp/bin/CHOICE 2>/dev/null || echo /tmp/bin/M)}
H17_MODELS=${H17_MODELS:-gemma smol} H17_SOAK_RUNS=${H17_SOAK:-20} timeout ${H17_T:-560} bash scripts/gpu-h17.sh $BIN models $OUT/h17 > /dev/null 2>&1
echo "gpu-h17 exit $?"; cat $OUT/h17/summary.txt
