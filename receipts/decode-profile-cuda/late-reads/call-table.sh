#!/usr/bin/env bash
# Issue 30 step 38, the table call (after the chunk calls, the machine warm): the two real
# files joined from their chunks and checked against their sha256, then issue 30's whole
# table beside llama.cpp (scripts/bench-vs-llamacpp.sh; llama.cpp from call 1's background
# build of the anchors tarball, in this session): every synthetic row, the real SmolLM2 and
# Gemma-3 files (eager, B=8 and prefill512) and their shape twins. Proves where each of issue
# 30's bars stands with build $1 (N if calls 1 and 2 kept it, else O).
# Run as OUT=$OUT bash receipts/decode-profile-cuda/late-reads/call-table.sh .stage/bin/N,
# carrying the last chunk not yet carried. Where the session's device time does not reach the
# chunk calls, ROWS and PREFILL_ROWS name a subset (the unmet bars' rows) and the real files'
# rows are skipped (no parts on the machine: their synthetic twins stand in).
set -u
BIN=${1:?usage: call-table.sh BIN}
nvidia-smi -L
mkdir -p /root/parts models && cp .stage/parts/m.* /root/parts/ 2>/dev/null
if [ "$(ls /root/parts | wc -l)" = 8 ]; then
cat /root/parts/m.0[0-7] > /root/all.gguf
head -c 98362432 /root/all.gguf > models/SmolLM2-135M-Instruct.Q4_1.gguf
tail -c +98362433 /root/all.gguf > models/gemma-3-270m-q4_k_m.gguf
sha256sum models/*.gguf | tee $OUT/models.sha256
grep -q b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 $OUT/models.sha256 &&
  grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 $OUT/models.sha256 ||
  echo "a real model's sha256 differs: its rows are not the real file's"
else echo "real models: $(ls /root/parts | wc -l) of 8 parts here, their rows skipped"; fi
ROWS=${ROWS-"smollm2-q4_1 gemma3-270m-q4_k_m smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m"} \
  PREFILL_ROWS=${PREFILL_ROWS-"smollm2-q4_1 gemma3-270m-q4_k_m smollm2-shape-q4_1 gemma3-shape-q4_k_m llama8b-l8-q4_k"} \
  SERVE_ROWS= RECEIPTS= DEADLINE_S=${DEADLINE_S:-570} LLAMA_BIN=/root/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/root/lc.log \
  scripts/bench-vs-llamacpp.sh "$BIN" none $OUT/vs > $OUT/bench.out 2>&1
echo "bench exit $?"; rm -f $OUT/vs/raw.tar.gz; cat $OUT/vs/summary.txt; tail -3 $OUT/bench.out
