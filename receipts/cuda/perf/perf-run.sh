#!/usr/bin/env bash
# perf helper's GPU run: quick check, then (when the smol model is complete) the full proof.
B=.stage/ppn-gate-perf
L=$OUT/log.txt
ok() { echo "$1 rc=$2" | tee -a $OUT/summary.txt; }
SUM=$(cat .stage/smol.part00 .stage/smol.part01 .stage/smol.part02 2>/dev/null | sha256sum | cut -c1-64)
if [ "$SUM" != "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" ]; then
  echo "smol not complete here"; ls -la .stage
  $B --backend cuda -q --stages 4 --receipt $OUT/r-g4.json >>$L 2>&1; ok "builtin gate cuda --stages 4 (all arms)" $?
  PPN_CUDA_PROF=1 $B bench --backend cuda --stages 1 --steps 64 --batch 8 2>&1 | tee -a $OUT/summary.txt; exit 0
fi
cat .stage/smol.part00 .stage/smol.part01 .stage/smol.part02 > /tmp/smol.gguf
M=/tmp/smol.gguf
$B bench --backend cuda --model $M --stages 1 --steps 64 --batch 8 2>&1 | tee -a $OUT/summary.txt
PPN_CUDA_PROF=1 $B bench --backend cuda --model $M --stages 1 --steps 64 --batch 8 2>&1 | tee -a $OUT/summary.txt
$B --backend cuda -q --stages 4 --receipt $OUT/r-g4.json >>$L 2>&1; ok "builtin gate cuda --stages 4 (all arms)" $?
$B --backend cuda -q --model $M --stages 1 --receipt $OUT/r-s1.json >>$L 2>&1; ok "smol gate cuda --stages 1" $?
$B --backend cuda -q --model $M --stages 3 --batch 8 --receipt $OUT/r-s3b8.json >>$L 2>&1; ok "smol gate cuda --stages 3 --batch 8" $?
$B --backend cuda -q --model $M --stages 1 --arms eager --tape .stage/smol-tape.json --topk 20 --receipt $OUT/cmp-smol-cuda.json >>$L 2>&1; ok "smol tape cuda" $?
SECTIONS="gate synth cmp" bash scripts/gpu-check.sh $B $OUT/gc >/dev/null 2>&1; ok "gpu-check gate synth cmp" $?
cat $OUT/gc/summary.txt
tar czf $OUT/receipts.tar.gz -C $OUT r-g4.json r-s1.json r-s3b8.json 2>/dev/null; rm -f $OUT/r-*.json $OUT/gc/tape.json
