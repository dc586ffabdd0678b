#!/usr/bin/env bash
# One GPU: the committed build (.stage/bin/C, main fda963b) on the two real files, where a
# battery process now sets 32 hardware queues a device before the driver starts (the fault
# holds' setting) and no GPU run of the battery had used it. Proves (battery/summary.txt):
# gpu-validate's `battery` (gates/gpu-1.json: SmolLM2 and Gemma-3 at N = 2..8, uneven splits,
# tapes, jitter, B=8, host transport, serve; every arm bit-identical to the one-stage
# reference) and `soak` (x20 soaks of SmolLM2 N = 4 and a prime soak) sections, all ok.
# The files travel as chunks of one stream over back-to-back calls (a call carries 64 MiB):
#   here:  cat models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf > S;
#          head -c 29360128 S > .stage/p0; tail -c +29360129 S | split -b 46m -d -a 1 - .stage/q
#   call 1 (carry .stage/bin .stage/p0):  battery.sh start
#   calls 2..7 (carry one chunk each):     battery.sh chunk .stage/qN
#   the last call (carry .stage/bin .stage/q6):  battery.sh run OUT
# Then, on the same warm machine with the files in place (carry .stage/bin), one call each:
#   battery.sh sections OUT "oracle serve"; battery.sh sections OUT "cache trace";
#   battery.sh sections OUT bench   (gpu-validate's other one-GPU sections on the real files:
#   the HF tapes and CPU-vs-CUDA per format, the serve arm and its faults, --trace, the module
#   cache, bench; OUT/<sections>/summary.txt)
set -uo pipefail
P=/root/parts
mkdir -p "$P"
case "${1:?start|chunk F|run OUT|sections OUT S}" in
start)
    mv .stage/p0 "$P"/ && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader && ls -la "$P" ;;
chunk)
    mv "$2" "$P"/ && ls -la "$P" ;;
run)
    OUTD=${2:?OUT}
    mv .stage/q6 "$P"/
    mkdir -p models "$OUTD"
    cat "$P"/p0 "$P"/q0 "$P"/q1 "$P"/q2 "$P"/q3 "$P"/q4 "$P"/q5 "$P"/q6 > "$P"/s
    head -c 98362432 "$P"/s > models/SmolLM2-135M-Instruct.Q4_1.gguf
    tail -c +98362433 "$P"/s > models/gemma-3-270m-q4_k_m.gguf
    rm "$P"/s
    sha256sum models/*.gguf | tee "$OUTD/sha256.txt"
    grep -q b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 "$OUTD/sha256.txt" &&
        grep -q a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 "$OUTD/sha256.txt" ||
        { echo "sha256 mismatch"; exit 1; }
    SECTIONS="battery soak" timeout ${DEADLINE_S:-540} scripts/gpu-validate.sh .stage/bin/C "$OUTD/battery"
    echo "gpu-validate exit $? (124: the deadline)"
    cat "$OUTD/battery/summary.txt" ;;
sections)
    D="$2/$(echo "$3" | tr ' ' -)"
    mkdir -p "$D"
    SECTIONS="$3" timeout ${DEADLINE_S:-480} scripts/gpu-validate.sh .stage/bin/C "$D" > /dev/null 2>&1
    echo "exit $?"; cat "$D/summary.txt" ;;
esac
