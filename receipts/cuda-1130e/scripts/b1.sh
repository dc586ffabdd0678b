#!/usr/bin/env bash
# Session 5, streak 2, first call (nvidia-h200-x2): background llama.cpp build and the bench's
# synthetic files; part 0 of the real models; then the candidate Z (main + the helpers'
# branches) against A (main without them): the same bits on every format's gates (the fused
# decode and Q6_K change no other kernel's bits), the new gates and faults, eager/B=8 A/B.
# Picks /tmp/bin/CHOICE: Z when every check holds, else A.
set -u
OUT=$1; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/lcb /tmp/bench-vs-llamacpp/m /tmp/sm /tmp/bin /tmp/b1/r $OUT
for b in A Y Z; do [ -f .stage/bin/$b ] && cp .stage/bin/$b /tmp/bin/$b && chmod +x /tmp/bin/$b; done
echo /tmp/bin/A > /tmp/bin/CHOICE
S=$OUT/summary.txt; row() { printf '%-72s %s\n' "$1" "$2" | tee -a $S; }
nvidia-smi -L >> $S
setsid bash -c 'tar xzf .stage/llama.cpp.tgz -C /tmp/lcb && cd /tmp/lcb/llama.cpp && \
  cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release && \
  nice -n 10 cmake --build build -j24 --target llama-bench llama-batched-bench && echo BUILD-OK' > /tmp/lcb/build.log 2>&1 < /dev/null &
setsid bash -c '
W=/tmp/bench-vs-llamacpp/m
for spec in "llama8b-l8-q4_k|--preset llama8b --layers 8 --quant q4_k" \
            "llama8b-l8-q4_k_m|--preset llama8b --layers 8 --quant q4_k_m" \
            "llama70b-l2-q4_k|--preset llama70b --layers 2 --quant q4_k" \
            "llama8b-l8-q8_0|--preset llama8b --layers 8 --quant q8_0" \
            "llama8b-l32-q4_k_m|--preset llama8b --layers 32 --quant q4_k_m"; do
  row=${spec%%|*}; flags=${spec#*|}
  nice -n 5 /tmp/bin/A synth $flags -o $W/$row.gguf > /dev/null && echo "$flags" > $W/$row.gguf.flags && echo "synth $row ok $(date +%T)"
done' > /tmp/sm/synth.log 2>&1 < /dev/null &
row "A" "$(/tmp/bin/A --version)"
# check NAME: ab.sh A NAME; 0 when every gate rc=0 with PASS, every non-info diff same, the fault rc=1.
check() {
  local c=$1; shift
  env "$@" timeout 280 bash .stage/calls5/ab.sh /tmp/bin/A /tmp/bin/$c /tmp/b1/m $OUT/ab-$c > /dev/null 2>&1
  row "ab.sh A $c exit $?" "$(el) s"
  sed "s/^/  /" $OUT/ab-$c/summary.txt >> $S
  local bad
  bad=$(grep -E "^(gate|diff|fault)" $OUT/ab-$c/summary.txt | \
        awk '/^gate/ { if ($0 !~ /rc=0/ || $0 ~ /FAIL/) print; next } /^fault/ { if ($0 !~ /rc=1/) print; next } /^diff/ { if ($0 ~ /different/ && $0 !~ /info:/) print }' | wc -l)
  row "  $c: failing checks" "$bad"
  [ "$bad" = 0 ]
}
for c in Z Y; do
  [ -x /tmp/bin/$c ] || continue
  row "$c" "$(/tmp/bin/$c --version)"
  q=0; [ $c = Y ] && q=1
  if check $c SKIPQ6=$q; then echo /tmp/bin/$c > /tmp/bin/CHOICE; break; fi
done
row "CHOICE" "$(cat /tmp/bin/CHOICE) at $(el) s"
tail -2 /tmp/lcb/build.log >> $S; cat /tmp/sm/synth.log >> $S
cat $S
