#!/usr/bin/env bash
# Session 4, second streak, first call (F = 321a6bb, --mma auto the default): background
# llama.cpp build and the bench's synthetic files, then the tensor-core path's bars on the
# 4096-wide shapes where auto turns it on: every arm at N = 1, 2, 3, 4, 8 with B = 8 on the
# 8B shape, --pdl/--graphs off against on, the Q4_K_M mix (split ops), prime/verify
# N = 1, 2, 4, 8, the fault matrix (selftest) on a 4096-wide Q4_K model, mma-row-order,
# soaks x20 on one GPU and over two.
set -u
OUT=$1; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/sm /tmp/bin /tmp/s0/r $OUT
cp .stage/bin/F /tmp/bin/F; chmod +x /tmp/bin/F; echo /tmp/bin/F > /tmp/bin/CHOICE; B=/tmp/bin/F
S=$OUT/summary.txt; W=/tmp/s0; row() { printf '%-70s %s\n' "$1" "$2" | tee -a $S; }
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j12 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
setsid bash -c '
W=/tmp/bench-vs-llamacpp/m
for spec in "llama8b-l8-q4_k|--preset llama8b --layers 8 --quant q4_k" \
            "llama8b-l8-q4_k_m|--preset llama8b --layers 8 --quant q4_k_m" \
            "llama70b-l2-q4_k|--preset llama70b --layers 2 --quant q4_k" \
            "llama8b-l8-q8_0|--preset llama8b --layers 8 --quant q8_0" \
            "llama8b-l32-q4_k_m|--preset llama8b --layers 32 --quant q4_k_m"; do
  row=${spec%%|*}; flags=${spec#*|}
  nice -n 5 /tmp/bin/F synth $flags -o $W/$row.gguf > /dev/null && echo "$flags" > $W/$row.gguf.flags && echo "synth $row ok $(date +%T)"
done' > /tmp/sm/synth.log 2>&1 < /dev/null &
nvidia-smi -L >> $S; row "BIN" "$B $($B --version)"
$B synth --preset llama8b --layers 2 --vocab 8192 --quant q4_k -o $W/w.gguf > /dev/null 2>&1
L8=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k.gguf; KM=/tmp/bench-vs-llamacpp/m/llama8b-l8-q4_k_m.gguf
while [ ! -f $KM.flags ] && [ $(el) -lt 90 ]; do sleep 1; done
for n in 1 2 3 4 8; do
  d=$(python3 -c "print(','.join(['0']*$n))")
  $B --backend cuda -q --model $L8 --stages $n --devices $d --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --receipt $W/r/g-l8-$n.json > $W/g-l8-$n.txt 2>&1
  row "gate l8 (auto) N=$n B=8 exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/g-l8-$n.txt | awk '{print $1, $2}' | tr '\n' ' ') at $(el) s"
done
row "receipt backend.mma" "$(grep -o '"mma": *"[^"]*"' $W/r/g-l8-4.json | head -1)"
for o in "pdl off" "graphs off"; do
  t=${o// /-}
  $B --backend cuda -q --model $L8 --stages 4 --devices 0,0,0,0 --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --${o% *} ${o#* } --receipt $W/r/g-l8-4-$t.json > /dev/null 2>&1
  $B diff $W/r/g-l8-4.json $W/r/g-l8-4-$t.json > $W/diff-l8-$t.txt 2>&1
  row "diff l8 N=4: --$o vs on (exit 0 = same)" "$? $(head -1 $W/diff-l8-$t.txt | cut -c1-40)"
done
$B --backend cuda -q --model $KM --stages 3 --devices 0,0,1 --arms eager,pipelined,batched --batch 8 --window 4 --prompt-len 16 --gen-len 32 --receipt $W/r/g-km-3.json > $W/g-km-3.txt 2>&1
row "gate l8-q4_k_m (auto, split ops) N=3 on 0,0,1 B=8 exit $?" "$(grep -E '^(eager|pipelined|batched) ' $W/g-km-3.txt | awk '{print $1, $2}' | tr '\n' ' ')"
for n in 1 2 4 8; do
  d=$(python3 -c "print(','.join(['0']*$n))")
  $B --backend cuda -q --model $L8 --stages $n --devices $d --arms prime,verify --prompt-len 100 --gen-len 24 --chunk 1,8,16,64,100 --receipt $W/r/pv-l8-$n.json > $W/pv-l8-$n.txt 2>&1
  row "prime,verify l8 N=$n exit $?" "$(grep -E '^(prime|verify)' $W/pv-l8-$n.txt | awk '{print $1, $2, $3}' | tr '\n' ' ') at $(el) s"
done
for a in batched prime; do
  $B --backend cuda -q --model $W/w.gguf --mma on --stages 2 --devices 0,0 --arms $a --batch 8 --prompt-len 40 --chunk 40 --gen-len 16 --fault mma-row-order > $W/f-mro-$a.txt 2>&1
  row "fault mma-row-order $a (want exit 1)" "$? $(grep -E '^(batched|prime) ' $W/f-mro-$a.txt | awk '{print $1, $2}')"
done
timeout 150 $B selftest --backend cuda --model $W/w.gguf --runs 2 --out $W/selftest > $W/selftest.txt 2>&1
row "selftest on a 4096-wide Q4_K model (auto: mma), 2 runs, exit $?" "$(tail -1 $W/selftest.txt | cut -c1-60) at $(el) s"
cp $W/selftest/selftest.json $OUT/selftest-mma.json 2>/dev/null
for spec in "l8|--stages 2 --arms pipelined,batched --batch 8 --gen-len 24" \
            "l8-2gpu|--stages 2 --devices 0,1 --arms pipelined,batched --batch 8 --gen-len 24" \
            "l8-prime|--stages 4 --arms prime --repeat 5 --chunk 1,8,16,64 --prompt-len 64 --gen-len 8"; do
  name=${spec%%|*}; args=${spec#*|}
  timeout 70 $B soak --backend cuda -q --runs 20 --model $L8 $args --out $W/soak-$name > $W/soak-$name.txt 2>&1
  row "soak x20 $name ($args) exit $?" "$(grep -oE '[0-9]+/20 PASS' $W/soak-$name.txt | head -1) at $(el) s"
  find $W/soak-$name -name 'run-*.json' ! -name 'run-001.json' -delete 2>/dev/null
done
tail -1 /tmp/lcb/build.log >> $S; cat /tmp/sm/synth.log >> $S
tar czf $OUT/s0.tgz -C $W r selftest.txt $(cd $W && ls *.txt) 2>/dev/null
cat $S
