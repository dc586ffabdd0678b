#!/usr/bin/env bash
# PROBE: where a walk's time goes (globaltimer stamps of block 0, graphs off).
cd "$(dirname "$0")/../.."
N=.stage/bin/ppn-gate
$N synth --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --tied --quant q4_1 -o /tmp/smol.gguf > /dev/null
PPN_WALK_TRACE=1 $N bench --backend cuda --model /tmp/smol.gguf --graphs off --steps 32 2>&1 | grep -E "walk trace|eager  " | tee $OUT/trace.txt
