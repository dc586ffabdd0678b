#!/usr/bin/env bash
# The real models from the staged parts (once), checked.
mkdir -p models
if ! sha256sum -c .stage/parts/sha.txt > /dev/null 2>&1; then
  cat .stage/parts/blob.p* > /tmp/blob
  head -c 98362432 /tmp/blob > models/SmolLM2-135M-Instruct.Q4_1.gguf
  tail -c +98362433 /tmp/blob > models/gemma-3-270m-q4_k_m.gguf; rm /tmp/blob
fi
sha256sum -c .stage/parts/sha.txt 2>&1 | sed 's/^/sha /'
