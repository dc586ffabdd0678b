#!/usr/bin/env bash
# Call 1 (2026-11-30): selftest on one H200 (#15) and Nsight Compute on the mvq kernels (#12).
set -u
OUT=$1; B=.stage/ppn-gate; M=/tmp/m; mkdir -p $M $OUT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L > $OUT/info.txt; uname -r >> $OUT/info.txt
( $B synth --preset llama8b --layers 8 --quant q4_k -o $M/l8.gguf > /dev/null 2>&1
  $B synth --preset llama70b --layers 2 --quant q4_k -o $M/l70.gguf > /dev/null 2>&1 ) &
SP=$!
timeout 200 $B selftest --backend cuda --out /tmp/st > $OUT/selftest.txt 2>&1
echo "selftest exit $? at $(el) s" >> $OUT/info.txt
cp /tmp/st/selftest.json $OUT/ 2>/dev/null
wait $SP; echo "synth done at $(el) s" >> $OUT/info.txt
S="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats"
timeout 120 ncu --clock-control none $S -k regex:mvq_w --launch-skip 300 --launch-count 6 \
  $B bench --backend cuda --model $M/l8.gguf --stages 1 --arms eager --steps 8 > $OUT/ncu-8b-eager.txt 2>&1
echo "ncu eager exit $? at $(el) s" >> $OUT/info.txt
timeout 120 ncu --clock-control none $S -k regex:mvq_w4 --launch-skip 20 --launch-count 4 \
  $B bench --backend cuda --model $M/l8.gguf --stages 1 --arms batched --batch 8 --steps 8 > $OUT/ncu-8b-b8.txt 2>&1
echo "ncu b8 exit $? at $(el) s" >> $OUT/info.txt
timeout 90 ncu --clock-control none $S -k regex:mvq_w --launch-skip 40 --launch-count 4 \
  $B bench --backend cuda --model $M/l70.gguf --stages 1 --arms eager --steps 8 > $OUT/ncu-70b.txt 2>&1
echo "ncu 70b exit $? at $(el) s" >> $OUT/info.txt
for m in l8 l70; do
  PPN_CUDA_PROF=1 timeout 60 $B bench --backend cuda --model $M/$m.gguf --stages 1 --arms batched --batch 8 --steps 32 2>&1 | grep -E "prof|tok/s|floor" >> $OUT/prof.txt
done
echo "prof at $(el) s" >> $OUT/info.txt
cat $OUT/info.txt; tail -16 $OUT/selftest.txt; grep -E "mvq_w|Duration|Memory Throughput|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|DRAM Throughput" $OUT/ncu-8b-eager.txt | head -60
