#!/usr/bin/env bash
# Issue 30 steps 30 and 31, call 1: the Q4_K and Q6_K tensor-core paths on the integer mma
# gated on the GPU (N: the tree of both steps, the build at 33efeab, whose Q4_K bits are step
# 30's alone, 76429e7's, by the kernel emulator's case hashes; O: main's build at 6378f70, the
# f16 route). Proves:
#  mma.txt  gpu-validate's mma section with N: every format's small file (Q4_K, Q8_0, Q4_1,
#           Q5_0, Q4_0, Q6_K, a Q4_K_M mix, 576/640 wide) PASSes every decode and chunk arm at
#           N = 1, 2 under --mma on; mma-row-order FAILs in both forms of the prep (q4_k's and
#           q6_k's integer pieces, batched and prime; q8_0, smol576); --pdl off and --graphs
#           off `diff` same as on (q4_k, q4_k_m);
#  hf.txt   HF transformers' tapes made here (oracle_gpu.py; a prompt of 24 seeded tokens, 12
#           generated; one tape a file, to fit the call's 10 minutes) on 4096-wide Q4_K_M
#           files (llama8b and qwen7b presets, 4 layers; their Q6_K v and ffn_down on the
#           integer route under both settings): every arm PASS at N = 1, 2, 3 under --mma auto
#           and on; the reference's top-1 and top-20 against HF (oracle-compare.py, tol 1e-3),
#           N and O side by side; a soak x10 of N = 2, every arm, --mma on (hf.txt's soak
#           line came from this grep's first form, which took the first run's line, `1/10
#           PASS`; soak-x10-tail.txt has the summary, 10/10 PASS).
# Staged here before the call, carried as .stage (gitignored): bin/N6 (this tree's stripped
# release build, 33efeab), bin/O (6378f70's), for call 2 bin/N (76429e7's: step 30 alone),
# gguf-0.19.0-py3-none-any.whl (pip download --no-deps --only-binary=:all: gguf==0.19.0),
# oracle_gpu.py (HF transformers' greedy continuation of a GGUF file, the script that
# gpu-validate.sh's ORACLE_STAGE folder holds), and for call 3 llama.cpp.tgz (llama.cpp's
# source, bench-vs-llamacpp.sh's TARBALL). Run each as OUT=$OUT receipts/.../callK.sh.
set -u
N=.stage/bin/N6 O=.stage/bin/O
nvidia-smi -L
SECTIONS=mma scripts/gpu-validate.sh $N $OUT/mma > /dev/null 2>&1
cp $OUT/mma/summary.txt $OUT/mma.txt; rm -rf $OUT/mma
W=/tmp/hf; mkdir -p $W
H=$OUT/hf.txt; : > $H
python3 -m pip install -q --no-index --no-deps --target /tmp/site .stage/gguf-*.whl >> $W/log 2>&1
$N synth --preset llama8b --layers 4 --quant q4_k_m --seed 5 -o $W/l8b-q4km.gguf > /dev/null
$N synth --preset qwen7b --layers 4 --quant q4_k_m --seed 7 -o $W/q7b-q4km.gguf > /dev/null
for m in l8b-q4km q7b-q4km; do
  for pl in 24; do
    t=$W/$m.p$pl.json
    PYTHONPATH=/tmp/site python3 .stage/oracle_gpu.py $W/$m.gguf $((pl - 3)) $pl 12 20 $t >> $W/log 2>&1 || echo "oracle_gpu $m p$pl FAILED" >> $H
    for n in 1 2 3; do
      d=$(printf '0%.0s,' $(seq $n)); d=${d%,}
      for md in auto on; do
        $N --backend cuda -q --mma $md --model $W/$m.gguf --tape $t --stages $n --devices $d \
          --arms eager,pipelined,batched,prime,verify --batch 3 --topk 20 --receipt $W/r-$m-$pl-$n-$md.json > $W/o.txt 2>&1
        echo "gate $m p$pl N=$n --mma $md: exit $? $(grep -oE 'PASS|FAIL' $W/o.txt | head -1)" >> $H
      done
    done
    for md in auto on; do
      echo "N $m p$pl --mma $md: $(python3 scripts/oracle-compare.py --tol 1e-3 $W/r-$m-$pl-1-$md.json $t 2>&1 | head -2 | tr '\n' ' ')" >> $H
      $O --backend cuda -q --mma $md --model $W/$m.gguf --tape $t --stages 1 --arms eager --topk 20 --receipt $W/o-$m-$pl-$md.json > /dev/null 2>&1
      echo "O $m p$pl --mma $md: $(python3 scripts/oracle-compare.py --tol 1e-3 $W/o-$m-$pl-$md.json $t 2>&1 | head -2 | tr '\n' ' ')" >> $H
    done
  done
done
$N soak --runs 10 --backend cuda -q --mma on --model $W/l8b-q4km.gguf --stages 2 --devices 0,0 \
  --arms eager,pipelined,batched,prime,verify --batch 8 --chunk 16 --prompt-len 40 --gen-len 24 --out $W/soak > $W/soak.txt 2>&1
echo "soak x10 l8b-q4km N=2 --mma on: exit $? $(grep -E '^[0-9]+/10 PASS' $W/soak.txt | tail -1)" >> $H
cat $OUT/mma.txt | tail -n 45
cat $H
