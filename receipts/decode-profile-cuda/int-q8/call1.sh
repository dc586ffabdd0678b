#!/usr/bin/env bash
# Issue 30 step 39, call 1: Q8_0 on the integer tensor cores (N: the step39 tree as first
# built, which is 62472de with mma_q8_f32 as `(float)((long long)(dh * 256 + dm) * 256 + dl)`,
# the same bits (f32-check.cpp); O: main's build, 5b10508, whose Q8_0 tensor-core route is the
# f16 one and whose --mma auto leaves Q8_0 on the FFMA kernels at decode) gated on the GPU.
# Proves:
#  mma.txt  gpu-validate's mma section with N: every format's small file (Q4_K, Q8_0, Q4_1,
#           Q5_0, Q4_0, Q6_K, a Q4_K_M mix, 576/640 wide) PASSes every decode and chunk arm at
#           N = 1, 2 under --mma on; mma-row-order FAILs (q8_0 now in the integer form's plant:
#           x rounded toward zero); --pdl off and --graphs off `diff` same as on;
#  hf.txt   HF transformers' tape made here (oracle_gpu.py, 24 seeded prompt tokens, 12
#           generated) of a 4096-wide Q8_0 file (llama8b preset, 4 layers, seed 6), and the
#           committed HF tapes of the two synthetic Q8_0 qwen files (256 wide: ff 640, a
#           partial super-block): every arm PASS at N = 1, 2, 3 under --mma auto and on; the
#           reference's top-1 and top-20 against HF (oracle-compare.py, tol 1e-3), N and O side
#           by side (O: auto is FFMA there, on the f16 route).
# Starts llama.cpp's background build for call 2. Staged before the call in .stage (ignored):
# bin/N, bin/O (stripped release builds), gguf-0.19.0-py3-none-any.whl, oracle_gpu.py,
# llama.cpp.tgz. Run as OUT=$OUT bash receipts/decode-profile-cuda/int-q8/call1.sh
set -u
N=.stage/bin/N O=.stage/bin/O
nvidia-smi -L
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /root/lc
SECTIONS=mma timeout 330 scripts/gpu-validate.sh $N $OUT/mma > /dev/null 2>&1
cp $OUT/mma/summary.txt $OUT/mma.txt; rm -rf $OUT/mma
W=/tmp/hf; mkdir -p $W
H=$OUT/hf.txt; : > $H
python3 -m pip install -q --no-index --no-deps --target /tmp/site .stage/gguf-*.whl >> $W/log 2>&1
$N synth --preset llama8b --layers 4 --quant q8_0 --seed 6 -o $W/l8b-q80.gguf > /dev/null
PYTHONPATH=/tmp/site python3 .stage/oracle_gpu.py $W/l8b-q80.gguf 21 24 12 20 $W/l8b-q80.p24.json >> $W/log 2>&1 || echo "oracle_gpu l8b-q80 FAILED" >> $H
for q in synth-qwen2-L4-E256 synth-qwen3-L4-E256; do
  cp tests/data/oracle/synth/$q.gguf $W/; cp tests/data/oracle/synth/$q.tapeA.json $W/$q.p24.json
done
for m in l8b-q80 synth-qwen2-L4-E256 synth-qwen3-L4-E256; do
  t=$W/$m.p24.json
  for n in 1 2 3; do
    d=$(printf '0%.0s,' $(seq $n)); d=${d%,}
    for md in auto on; do
      $N --backend cuda -q --mma $md --model $W/$m.gguf --tape $t --stages $n --devices $d \
        --arms eager,pipelined,batched,prime,verify --batch 3 --topk 20 --receipt $W/r-$m-$n-$md.json > $W/o.txt 2>&1
      echo "gate $m N=$n --mma $md: exit $? $(grep -oE 'PASS|FAIL' $W/o.txt | head -1)" >> $H
    done
  done
  for md in auto on; do
    echo "N $m --mma $md: $(python3 scripts/oracle-compare.py --tol 1e-3 $W/r-$m-1-$md.json $t 2>&1 | head -2 | tr '\n' ' ')" >> $H
    $O --backend cuda -q --mma $md --model $W/$m.gguf --tape $t --stages 1 --arms eager --topk 20 --receipt $W/o-$m-$md.json > /dev/null 2>&1
    echo "O $m --mma $md: $(python3 scripts/oracle-compare.py --tol 1e-3 $W/o-$m-$md.json $t 2>&1 | head -2 | tr '\n' ' ')" >> $H
  done
  grep -o '"mma": *"[^"]*"' $W/r-$m-1-auto.json | head -1 >> $H
done
tail -n 45 $OUT/mma.txt
cat $H
tail -1 /root/lc.log
