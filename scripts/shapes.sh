# Sourced by scripts/decode-ab.sh, narrow-ncu.sh and bench-vs-llamacpp.sh (not run on its own):
# the synthetic models they name, each as its whole `ppn-gate synth` flags. l70, l8q4k, l32,
# l4m, l2q8, l8q8, l8q40: slices of the 70B and 8B presets (l8q8: the bench table's Q8_0 row;
# l8q40: Q4_0, whose 4096-wide matrices run the one-row FFMA launch under auto); smol,
# qw05, q3: the narrow SmolLM2-135M (Q4_1, tied), Qwen2-0.5B (qwen2 biases, Q8_0) and
# Qwen3-0.6B (q/k head norms, 128-wide heads, Q8_0) shapes; gem: the Gemma-3-270M shape
# (gemma3, one kv head of 256, vocab 262144, its window of 512, Q5_0: its file's layer
# format); gemq4km: the same shape in the Q4_K_M mix, which on 640-wide rows is the real
# file's own mix (Q5_0/Q8_0 fallbacks, Q8_0 tied head); q3k, l1b: narrow all-Q4_K files (the
# Qwen3-0.6B shape, and a 2048-wide 16-layer Llama-3.2-1B-like one) for the Q4_K tensor-core
# decode below 4096 (`--mma on`; BENCH.md issue 30 step 23); q3km: the Qwen3-0.6B shape in
# the Q4_K_M mix (v Q6_K beside q and k in Q4_K in half its layers: the FFMA decode's mixed
# q|k|v launch below 4096, step 45).
declare -A SHAPES=([l70]="--preset llama70b --layers 2 --quant q4_k"
  [l8q4k]="--preset llama8b --layers 8 --quant q4_k" [l32]="--preset llama8b --layers 32 --quant q4_k_m"
  [l4m]="--preset llama8b --layers 4 --quant q4_k_m" [l2q8]="--preset llama8b --layers 2 --quant q8_0"
  [l8q8]="--preset llama8b --layers 8 --quant q8_0" [l8q40]="--preset llama8b --layers 8 --quant q4_0"
  [smol]="--layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --tied --quant q4_1"
  [qw05]="--arch qwen2 --layers 24 --embd 896 --heads 14 --kv-heads 2 --ff 4864 --vocab 32000 --tied --quant q8_0"
  [gem]="--arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --sliding-window 512 --quant q5_0"
  [gemq4km]="--arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --sliding-window 512 --quant q4_k_m"
  [q3]="--arch qwen3 --layers 28 --embd 1024 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --vocab 32000 --tied --quant q8_0"
  [q3km]="--arch qwen3 --layers 28 --embd 1024 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --vocab 32000 --tied --quant q4_k_m"
  [q3k]="--arch qwen3 --layers 28 --embd 1024 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --vocab 32000 --tied --quant q4_k"
  [l1b]="--layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --quant q4_k")
