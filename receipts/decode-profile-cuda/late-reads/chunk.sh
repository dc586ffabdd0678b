#!/usr/bin/env bash
# Issue 30 step 38, calls 3 to 8: one chunk of the two real models (split here from
# `cat SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf` into 47 MB parts m.00..m.07,
# one part carried a call) kept on the warm machine for the table call; prints the
# llama.cpp build's progress. Run as bash receipts/decode-profile-cuda/late-reads/chunk.sh,
# carrying one part.
set -u
mkdir -p /root/parts && cp .stage/parts/m.* /root/parts/ && ls /root/parts | tr '\n' ' '
tail -1 /root/lc.log
