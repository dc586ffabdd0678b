#!/usr/bin/env bash
# The two real files (SmolLM2-135M-Instruct Q4_1, 98 MB; Gemma-3-270M Q4_K_M, 253 MB) beside
# llama.cpp on one GPU, with their synthetic twins in the same call (issue 30's real-file
# rows). A call carries at most 64 MiB, so the files travel as chunks of one stream (SmolLM2
# then Gemma) over back-to-back calls while the machine is warm (shared DEVICE.md's recipe):
#   here:  cat models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf > S;
#          head -c 29360128 S > .stage/p0; tail -c +29360129 S | split -b 46m -d -a 1 - .stage/q
#   call 1 (carry .stage/bin .stage/llama.cpp.tgz .stage/p0):  call.sh start
#   calls 2..8 (carry one chunk each):                         call.sh chunk .stage/qN
#   the last chunk's call (carry .stage/bin .stage/q6):        call.sh bench OUT
# `start` also starts llama.cpp's build in the background and runs gpu-validate's `cli`
# section (never run on a GPU before). `bench` checks both files' sha256 against
# scripts/fetch-models.sh's, then runs scripts/bench-vs-llamacpp.sh on the real files and
# the twins: eager and B=8 (two rounds), prefill512 beside pp512.
set -uo pipefail
P=/root/parts
mkdir -p "$P"
case "${1:?start|chunk F|bench OUT}" in
start)
    mv .stage/p0 "$P"/
    scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /root/lc
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    SECTIONS=cli scripts/gpu-validate.sh .stage/bin/M "${2:-$OUT}/cli" 2>&1 | tail -40
    ls -la "$P" ;;
chunk)
    mv "$2" "$P"/ && ls -la "$P" && tail -2 /root/lc.log ;;
bench)
    OUTD=${2:?OUT}
    mv .stage/q6 "$P"/
    mkdir -p /root/models
    cat "$P"/p0 "$P"/q0 "$P"/q1 "$P"/q2 "$P"/q3 "$P"/q4 "$P"/q5 "$P"/q6 > "$P"/s
    head -c 98362432 "$P"/s > /root/models/SmolLM2-135M-Instruct.Q4_1.gguf
    tail -c +98362433 "$P"/s > /root/models/gemma-3-270m-q4_k_m.gguf
    rm "$P"/s
    sha256sum /root/models/*.gguf | tee "$OUTD/sha256.txt"
    grep -q b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 "$OUTD/sha256.txt" &&
        grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 "$OUTD/sha256.txt" ||
        { echo "sha256 mismatch"; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUTD/gpu.txt"
    R="smollm2-q4_1 smollm2-shape-q4_1 gemma3-270m-q4_k_m gemma3-shape-q4_k_m"
    MODELS=/root/models ROWS="$R" PREFILL_ROWS="$R" SERVE_ROWS= ROUNDS=2 RECEIPTS= \
        LLAMA_BIN=/root/lc/llama.cpp/build/bin LLAMA_WAIT_LOG=/root/lc.log DEADLINE_S=540 \
        scripts/bench-vs-llamacpp.sh .stage/bin/M none "$OUTD/vs" 2>&1 | tail -30 ;;
esac
