#!/usr/bin/env bash
# Call 4: soak x20 of the multi-row attention passes (prime chunks, verify rounds, pipelined)
# at N=2 on one GPU, with the new attention_rows and the kv-head store pass: 64-wide heads.
set -u
B=.stage/bin/new3
$B synth --layers 4 --embd 512 --heads 8 --kv-heads 2 --ff 1024 --vocab 2048 --quant q4_1 -o /tmp/s4.gguf > /dev/null
timeout 150 $B soak --runs 20 --backend cuda --model /tmp/s4.gguf --stages 2 --arms pipelined,prime,verify \
  --chunk 24 --prompt-len 90 --gen-len 8 --out /tmp/soak > $OUT/soak.txt 2>&1; echo "soak exit $?" >> $OUT/soak.txt
cp /tmp/soak/summary.json $OUT/ 2>/dev/null; tail -4 $OUT/soak.txt
# The same warm machine, right after: soak x20 of the SmolLM2 and Gemma-3 shapes' multi-row
# passes (the command as run; gem stopped at its 70 s timeout after 14 runs, all PASS):
# B=.stage/bin/new3; . scripts/shapes.sh; $B synth ${SHAPES[smol]} -o /tmp/smol.gguf; $B synth ${SHAPES[gem]} -o /tmp/gem.gguf
# for m in smol gem; do timeout 70 $B soak --runs 20 --backend cuda --model /tmp/$m.gguf --stages 2 \
#   --arms pipelined,prime,verify --chunk 100 --prompt-len 333 --gen-len 8 --out /tmp/soak-$m; done
