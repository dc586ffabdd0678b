#!/usr/bin/env bash
# The command of call 3 (run inline on the GPU machine after the two real models were
# assembled there from .stage/smol.part0* and .stage/gemma.part0*, one part per call; the
# sha256 sums in call-3.txt are the fetch script's). BASE = 733ebbc build, TILE = 0d3a548's
# tree before `cargo fmt` rewrapped two lines.
cat .stage/gemma.part06 >> /tmp/m/gemma.gguf && sha256sum /tmp/m/*.gguf | grep -v shape
mkdir -p $OUT/r
for m in smol gemma; do for b in 3 5 11; do for v in base tile; do
  .stage/bin/$v --backend cuda -q --model /tmp/m/$m.gguf --stages 2 --batch $b --receipt $OUT/r/$m-b$b-$v.json >>$OUT/log.txt 2>&1
  echo "$m N=2 B=$b $v: exit $?"
done
echo "$m B=$b base vs tile: $(.stage/bin/tile diff $OUT/r/$m-b$b-base.json $OUT/r/$m-b$b-tile.json 2>&1 | head -1 | cut -c1-12)"
done; done
for m in smol gemma; do for b in 3 8; do for v in base tile; do
  echo "$m B=$b $v | $(.stage/bin/$v bench --backend cuda --model /tmp/m/$m.gguf --stages 1 --arms batched --batch $b --steps 64 2>&1 | grep -E '^  (eager|batched)' | sed -E 's/ +/ /g' | tr '\n' '|')"
done; done; done 2>&1 | tee $OUT/call-3.txt
cd $OUT && tar czf r-real.tgz r && rm -rf r
