# Sourced by diet/call.sh and slices/call.sh (from the repository root, D set to this folder,
# N the new build). First builds probe.cu against O's and N's attention source (.stage/attprobe/att_{old,new}_src.cu,
# made by mksrc.py from each tree) for head widths 64, 128 and 256, into /tmp/ap/{old,new}HD.
# The copies are made once, before the parallel builds (racing copies of one file failed).
mkdir -p /tmp/ap "$OUT"
NV="nvcc -O3 -arch=sm_90 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -std=c++17 -w"
for v in old new; do
  cp .stage/attprobe/att_${v}_src.cu /tmp/ap/att_src.cu.$v
  sed "s/\"att_src.cu\"/\"att_src.cu.$v\"/" $D/probe.cu > /tmp/ap/probe_$v.cu
done
for v in old new; do for hd in 64 128 256; do
  ( $NV -DATT_HD=$hd -o /tmp/ap/$v$hd /tmp/ap/probe_$v.cu > /tmp/ap/b$v$hd.log 2>&1 || echo "build $v $hd failed: $(head -5 /tmp/ap/b$v$hd.log)" ) &
done; done; wait

# gates_on "NAME ...": every arm at N = 1 and 3 on each file /tmp/ab/NAME.gguf (synthesized by
# scripts/decode-ab.sh) with prompts past gemma3's 512 window, chunks, seeds, splits and a
# draft no other check uses; a line per gate in $OUT/gates.txt.
gates_on() {
  : > $OUT/gates.txt
  for m in $1; do
    for g in "--stages 1 --prompt-len 333 --chunk 100 --gen-len 12" \
             "--stages 3 --prompt-len 700 --chunk 300,37 --gen-len 24 --seed 77" \
             "--stages 3 --splits 1,2 --prompt-len 41 --chunk 41 --gen-len 9 --draft 6 --seed 5"; do
      $N --backend cuda --model /tmp/ab/$m.gguf $g --arms eager,pipelined,batched,prime,verify -q > /tmp/ab/g.txt 2>&1
      echo "$m $g: exit $? $(grep -c PASS /tmp/ab/g.txt) PASS lines, $(grep -c FAIL /tmp/ab/g.txt) FAIL" >> $OUT/gates.txt
    done
  done
}
