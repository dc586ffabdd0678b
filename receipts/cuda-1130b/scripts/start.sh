#!/usr/bin/env bash
# Final session (2026-11-30, second), call 0: background jobs that outlive the call (llama.cpp
# build, the bench's synthetic files), then while they run: M (this session's merge) against
# O (670f003) on synthetic gates (decode bits), graphs/pdl on vs off, and the mma prototype.
set -u
OUT=$1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/sm /tmp/bin $OUT
cp .stage/bin/* /tmp/bin/; chmod +x /tmp/bin/*
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j26 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
setsid bash -c '
W=/tmp/bench-vs-llamacpp/m
for spec in "llama8b-l8-q4_k|--preset llama8b --layers 8 --quant q4_k" \
            "llama8b-l8-q4_k_m|--preset llama8b --layers 8 --quant q4_k_m" \
            "llama8b-l8-q8_0|--preset llama8b --layers 8 --quant q8_0" \
            "llama70b-l2-q4_k|--preset llama70b --layers 2 --quant q4_k" \
            "llama8b-l32-q4_k_m|--preset llama8b --layers 32 --quant q4_k_m"; do
  row=${spec%%|*}; flags=${spec#*|}
  nice -n 5 /tmp/bin/O synth $flags -o $W/$row.gguf > /dev/null && echo "$flags" > $W/$row.gguf.flags && echo "synth $row ok $(date +%T)"
done' > /tmp/sm/synth.log 2>&1 < /dev/null &
S=$OUT/summary.txt; W=/tmp/v; mkdir -p $W/r
row() { printf '%-58s %s\n' "$1" "$2" | tee -a $S; }
nvidia-smi -L >> $S
# 1. decode bits: M and M0 against O on gemma3-like (hd 256, sliding window), llama q4_k
# (hd 128) and smol-like (hd 64) at 270 positions (attention's multi-trip loops), N=3, B=5,
# all arms; then M with --graphs off and --pdl off against M.
O=/tmp/bin/O
$O synth --arch gemma3 --layers 4 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 4096 --quant q8_0 -o /tmp/sm-g.gguf > /dev/null 2>&1
$O synth --arch llama --layers 3 --embd 1024 --heads 8 --kv-heads 2 --ff 2816 --vocab 4096 --quant q4_k -o /tmp/sm-l.gguf > /dev/null 2>&1
$O synth --arch llama --layers 4 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 4096 --quant q4_1 -o /tmp/sm-s.gguf > /dev/null 2>&1
G="--backend cuda -q --stages 3 --devices 0,1,1 --batch 5 --window 4 --prompt-len 40 --gen-len 230"
for m in g l s; do
  for b in O M M0; do
    /tmp/bin/$b $G --model /tmp/sm-$m.gguf --receipt $W/r/$m-$b.json > $W/$m-$b.txt 2>&1; echo "$m $b exit $?" >> $W/gates.txt
  done
  /tmp/bin/M $G --model /tmp/sm-$m.gguf --graphs off --receipt $W/r/$m-Mg0.json > $W/$m-Mg0.txt 2>&1; echo "$m Mg0 exit $?" >> $W/gates.txt
  /tmp/bin/M $G --model /tmp/sm-$m.gguf --pdl off --receipt $W/r/$m-Mp0.json > $W/$m-Mp0.txt 2>&1; echo "$m Mp0 exit $?" >> $W/gates.txt
  for v in M M0 Mg0 Mp0; do
    $O diff $W/r/$m-O.json $W/r/$m-$v.json > $W/diff-$m-$v.txt 2>&1
    row "diff $m O vs $v (0 same)" "$? $(head -1 $W/diff-$m-$v.txt | cut -c1-60)"
  done
done
row "gates" "$(tr '\n' ' ' < $W/gates.txt) at $(el) s"
# The build the later calls use: M if every M diff (graphs and pdl off included) is same,
# else M0 (this session's two kernel commits reverted) if its diffs are, else O.
CH=/tmp/bin/O
chk() { for m in g l s; do for v in "$@"; do /tmp/bin/O diff $W/r/$m-O.json $W/r/$m-$v.json > /dev/null 2>&1 || return 1; done; done; }
if chk M Mg0 Mp0; then CH=/tmp/bin/M; elif chk M0; then CH=/tmp/bin/M0; fi
echo $CH > /tmp/bin/CHOICE
row "BIN chosen for the later calls" "$CH"
# A/B speed, synthetic shapes: O (670f003), M0 (no kernel commits), M, M graphs off
$O synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o /tmp/smol.gguf > /dev/null 2>&1
$O synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0 -o /tmp/gemma.gguf > /dev/null 2>&1
while [ ! -f /tmp/bench-vs-llamacpp/m/llama8b-l8-q8_0.gguf.flags ] && [ $(el) -lt 200 ]; do sleep 2; done
for spec in "smol|/tmp/smol.gguf" "gemma|/tmp/gemma.gguf" "l8q8|/tmp/bench-vs-llamacpp/m/llama8b-l8-q8_0.gguf"; do
  IFS='|' read -r tag f <<< "$spec"
  for v in "O|/tmp/bin/O|" "M0|/tmp/bin/M0|" "M|/tmp/bin/M|" "Mg0|/tmp/bin/M|--graphs off"; do
    IFS='|' read -r name b extra <<< "$v"
    timeout 40 $b bench --backend cuda --model $f --stages 1 --arms batched --batch 8 --steps 128 $extra > $W/bench-$tag-$name.txt 2>&1
    row "bench $tag $name" "$(grep -E '^  (eager|batched) ' $W/bench-$tag-$name.txt | awk '{print $1, $(NF-3)}' | tr '\n' ' ')"
  done
done
# 2. the mma prototype (research/mma-q4k)
timeout 150 bash scripts/gpu-mma.sh $OUT/mma > $W/mma.txt 2>&1
row "gpu-mma exit $? at $(el) s" ""
tail -40 $W/mma.txt >> $S
tail -2 /tmp/sm/synth.log >> $S; tail -1 /tmp/lcb/build.log >> $S
tar czf $OUT/v.tgz -C $W r 2>/dev/null
cat $S
