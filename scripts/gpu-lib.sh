# Shared set-up of the GPU-machine engine script (gpu-engine.sh), sourced after it sets BIN, M,
# OUT and SECTIONS: the section test, the output folder, the summary table's row printer, the
# real models.
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
mkdir -p "$OUT/r"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >>"$SUM"
: >>"$LOG"
row() { printf '%-64s %s\n' "$1" "$2" | tee -a "$SUM"; }
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
