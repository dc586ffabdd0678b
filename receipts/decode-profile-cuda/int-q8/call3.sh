#!/usr/bin/env bash
# Issue 30 step 39, call 3: N2 = N with mma_q8_f32's conversion rewritten (rn_f32 of the
# block's integer sum by two exact magic-number floats and one FADD, in place of an int64 and
# cvt.rn.f32.s64, which call 2's slower GEMM and narrow decodes pointed at: 128 I2F.S64 a
# super-block in the GEMM's SASS). Proves:
#  same.txt   N2 computes N's bits: every arm and serve at N = 2 `diff` same on the 2-layer
#             8B Q8_0 slice (--mma auto: the integer route at every row count) and the
#             Qwen2-0.5B shape (Q8_0, 896 wide, partial super-blocks, --mma on);
#  speed.txt, prefill.txt, eager.txt, prof.txt: call 2's measurements with O against N2;
#  ncu.txt    Nsight Compute (clocks as they run) on the 2-layer slice's one-row launches:
#             O's FFMA matvec (mvq) and N2's integer decode, duration, DRAM throughput and
#             issue slots busy: how far each is from its issue limit.
# Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8/call3.sh
set -u
O=.stage/bin/O N=.stage/bin/N N2=.stage/bin/N2
nvidia-smi -L
SAME="l2q8:auto qw05:on" SPEED= timeout 120 scripts/decode-ab.sh N=$N N2=$N2 > $OUT/ab1.log 2>&1
echo "decode-ab (bits) exit $?"; cp $OUT/same.txt $OUT/same-n-n2.txt
SAME= SPEED="l8q8 qw05 q3 gemq4km" PREFILL="l8q8 gemq4km" ROUNDS=2 \
  timeout 330 scripts/decode-ab.sh O=$O N2=$N2 > $OUT/ab.log 2>&1
echo "decode-ab (speed) exit $?"; mv $OUT/same.txt $OUT/same-prime-o-n2.txt; mv $OUT/same-n-n2.txt $OUT/same.txt
E=$OUT/eager.txt; : > $E
for r in 1 2; do
  for b in O N2; do
    echo "l8q8 $b --mma auto: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/l8q8.gguf --arms eager --steps 128 2>&1 | grep -E 'eager  ' | head -1)" >> $E
  done
done
for b in O N2; do
  echo "== $b" >> $OUT/prof.txt
  PPN_CUDA_PROF=1 .stage/bin/$b bench --backend cuda --model /tmp/ab/l8q8.gguf --arms pipelined --steps 64 2>&1 \
    | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -7 >> $OUT/prof.txt
done
NCU=/usr/local/cuda/bin/ncu
M="--clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed"
timeout 60 $NCU $M -k regex:"mvq" --launch-skip 20 --launch-count 5 $O --backend cuda --model /tmp/ab/l2q8.gguf --mma off --graphs off \
  --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q > $OUT/ncu-o.txt 2>&1
timeout 60 $NCU $M -k regex:"mma_decode" --launch-skip 20 --launch-count 5 $N2 --backend cuda --model /tmp/ab/l2q8.gguf --mma auto --graphs off \
  --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q > $OUT/ncu-n2.txt 2>&1
for f in o n2; do echo "== $f"; grep -E '^  [a-z_0-9]+.*\(|duration|throughput|inst_issued' $OUT/ncu-$f.txt; done > $OUT/ncu.txt
rm -f $OUT/ncu-o.txt $OUT/ncu-n2.txt
cat $OUT/same.txt; grep -v bandwidth $OUT/speed.txt; cat $OUT/prefill.txt $E $OUT/prof.txt $OUT/ncu.txt
