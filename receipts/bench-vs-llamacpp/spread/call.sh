#!/usr/bin/env bash
# Issue 30 (one H200): how far one call's ratio to llama.cpp can be trusted. Builds llama.cpp
# from the anchors tarball in the call, then on the Gemma-3 270M Q4_K_M mix twin and the
# SmolLM2 shape (scripts/shapes.sh gemq4km, smol) alternates, three rounds: ppn-gate's bench
# (`bench --arms batched --batch 8 --steps 128`: eager and B=8), llama-bench tg128 (-r 5: its
# mean and standard deviation) and llama-batched-bench (S_TG at 8). Each line of rep.txt is
# one run, written as it ends, so that a call cut short keeps what it finished. Proves: the
# spread of each side within one call, to set beside the same figures' spread across calls
# (BENCH.md step 19).
# Run: OUT=DIR bash receipts/bench-vs-llamacpp/spread/call.sh  (.stage carried: bin/ppn-gate-o,
# llama.cpp.tgz)
set -u
OUT=${OUT:?}
B=.stage/bin/ppn-gate-o
T0=$(date +%s)
scripts/llamacpp-bg.sh .stage/llama.cpp.tgz /tmp/lcb
mkdir -p /tmp/ab
. scripts/shapes.sh
for m in gemq4km smol; do $B synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done
wait
R="$OUT/rep.txt"
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); ppn-gate $($B --version 2>&1 | head -1)" > "$R"
# While llama.cpp builds: one round of ppn-gate alone (the CPU busy with the build).
for m in gemq4km smol; do
  $B bench --backend cuda --model /tmp/ab/$m.gguf --stages 1 --arms batched --batch 8 --steps 128 2>&1 \
    | awk -v m=$m -v t=$(( $(date +%s) - T0 )) '/eager +\(/ {e=$(NF-3)} /batched +\(/ {b=$(NF-3)} END {print t "s", m, "ppn (during the build) eager", e, "B=8", b}' >> "$R"
done
while ! grep -q BUILD-OK /tmp/lcb.log 2>/dev/null; do sleep 2; [ $(( $(date +%s) - T0 )) -gt 520 ] && { echo "build not done at 520 s" >> "$R"; exit 0; }; done
echo "$(( $(date +%s) - T0 ))s llama.cpp built" >> "$R"
LB=/tmp/lcb/llama.cpp/build/bin
for round in 1 2 3; do
  for m in gemq4km smol; do
    $B bench --backend cuda --model /tmp/ab/$m.gguf --stages 1 --arms batched --batch 8 --steps 128 2>&1 \
      | awk -v m=$m -v r=$round -v t=$(( $(date +%s) - T0 )) '/eager +\(/ {e=$(NF-3)} /batched +\(/ {b=$(NF-3)} END {print t "s round " r, m, "ppn eager", e, "B=8", b}' >> "$R"
    $LB/llama-bench -m /tmp/ab/$m.gguf -ngl 99 -p 0 -n 128 -r 5 -o json 2>/dev/null \
      | python3 -c 'import json,sys; t=[x for x in json.load(sys.stdin) if x["n_gen"]==128][0]; print("%.1f %.1f" % (t["avg_ts"], t["stddev_ts"]))' \
      | awk -v m=$m -v r=$round '{print "round " r, m, "llama tg128", $1, "sd", $2}' >> "$R"
    $LB/llama-batched-bench -m /tmp/ab/$m.gguf -ngl 99 -c 4096 -npp 16 -ntg 64 -npl 1,8 --output-format jsonl 2>/dev/null \
      | python3 -c 'import json,sys
for l in sys.stdin:
    l=l.strip()
    if l.startswith("{"):
        d=json.loads(l)
        if d.get("pl")==8: print("%.1f" % d["speed_tg"])' \
      | awk -v m=$m -v r=$round '{print "round " r, m, "llama B=8", $1}' >> "$R"
  done
done
cat "$R"
