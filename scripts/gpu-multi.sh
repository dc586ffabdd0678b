#!/usr/bin/env bash
# Issue 31 on a box of four or eight GPUs, in calls of at most ten minutes (SECTIONS picks):
#
#   scripts/gpu-multi.sh BIN OUT          (BE=cpu: a rehearsal on the CPU backend)
#
# What it proves, each line of OUT/summary.txt ok or WRONG:
#   gates   in one process, `--stages N --devices 0,..,N-1` for N in NS (default 4, and 8
#           where 8 GPUs answer) on SmolLM2, Gemma-3 and a synthetic 4096-wide Q4_K_M file of
#           8+ GB (synth llama8b, 60 layers): every arm (eager, pipelined, batched, prime,
#           verify, serve) PASS under the default transport and under --transport host; the
#           receipt shows the transport of every boundary (peer on CUDA by default, host
#           when asked) and every stage's scratch and cache (and, on CUDA, weights) on the
#           stage's own device
#   soak    x20 soaks of N = 4 and N = 8 pipelined across the devices, 20/20; then 100 runs
#           of N = 4 (SOAK100=0 leaves it out), 100/100
#   procs   stages as processes: `launch --procs N --transport nccl` (BE=cpu: ipc) PASS
#           with the one-process gate's logits hashes (every arm's every step), a x20 soak
#           of it (soak --procs N), and the link fault rx-no-wait FAILs
#   selftest  `ppn-gate selftest` on the box: every fault that opens here caught in every run
#   bench   `bench --arms pipelined` at N = 4 and 8 against its eager, the full-depth 8B shape
# Environment: SECTIONS (default "gates soak procs selftest bench"), NS, MODELS (default
# models/), BE (cuda; cpu rehearses on the built-in model and small synthetic files),
# SOAK100. Exit 0 when every line is ok.
set -u
BIN=${1:?usage: scripts/gpu-multi.sh BIN OUT}
OUT=${2:?usage: scripts/gpu-multi.sh BIN OUT}
BE=${BE:-cuda}
MODELS=${MODELS:-models}
SECTIONS=${SECTIONS:-"gates soak procs selftest bench"}
W=/tmp/gpu-multi
mkdir -p "$OUT" $W/r $W/m
: > "$OUT/summary.txt"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }
row() { echo "$1 $2" | tee -a "$OUT/summary.txt"; }   # row ok|WRONG "what"
if [ "$BE" = cpu ]; then
  GPUS=8; COMMON="--backend cpu --cpu-devices 8"; NCCL=ipc
else
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l); COMMON="--backend cuda"; NCCL=nccl
fi
if [ -z "${NS:-}" ]; then NS=""; for n in 4 8; do [ "$GPUS" -ge $n ] && NS="$NS $n"; done; fi
[ -n "$NS" ] || { log "fewer than 4 GPUs ($GPUS): nothing to run"; exit 2; }
devs() { seq -s, 0 $(($1 - 1)); }
# The files: the real models where MODELS has them, and the 8+ GB synthetic one (BE=cpu:
# the built-in model and a small Q4_K_M file of the same mix).
FILES=()
for f in "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODELS/gemma-3-270m-q4_k_m.gguf"; do
  if [ -f "$f" ]; then FILES+=("$f"); else row WRONG "missing $f (scripts/fetch-models.sh)"; fi
done
if [ "$BE" = cpu ]; then
  [ -f $W/m/big.gguf ] || $BIN synth --arch llama --layers 8 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048 --quant q4_k_m -o $W/m/big.gguf > /dev/null
else
  [ -f $W/m/big.gguf ] || $BIN synth --preset llama8b --layers 60 --quant q4_k_m -o $W/m/big.gguf > /dev/null
fi
FILES+=("$W/m/big.gguf")
ARMS="--arms eager,pipelined,batched,prime,verify,serve --batch 8 --requests 16 --prompt-len 16 --gen-len 16"
# check RECEIPT TRANSPORT: PASS, every boundary's transport, every stage's memory on its device.
check() {
  python3 - "$1" "$2" "$BE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); want = sys.argv[2]; be = sys.argv[3]
p = r["placement"]; bad = []
if r["verdict"] != "PASS": bad.append("verdict " + str(r["verdict"]))
if any(t != want for t in p["transports"]): bad.append("transports %s, want %s" % (p["transports"], want))
for st in p["resident"]:
    kinds = ["scratch", "cache"] + (["weights"] if be == "cuda" else [])
    for k in kinds:
        for m in st[k]:
            if m["device"] != st["placed"]: bad.append("stage %d %s on %s" % (st["stage"], k, m["device"]))
if p["misplaced"]: bad.append("misplaced %s" % p["misplaced"])
print("; ".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
}
hashes() { python3 -c "
import json,sys; r=json.load(open(sys.argv[1]))
print(json.dumps([(a['name'],[s['logits_blake3'] for s in a['steps']]) for a in r['arms']]))" "$1"; }
for sec in $SECTIONS; do case $sec in
gates)
  for n in $NS; do for f in "${FILES[@]}"; do
    for tr in default host; do
      if [ $tr = host ]; then T="--transport host" want=host; else T=""; want=$([ "$BE" = cpu ] && echo host || echo peer); fi
      rc=0; $BIN $COMMON --model "$f" --stages $n --devices $(devs $n) $T $ARMS --receipt $W/r/g.json -q > $W/r/g.txt 2>&1 || rc=$?
      c=$(check $W/r/g.json $want 2>&1); log "gate N=$n $(basename "$f") $tr: exit $rc, $c"
      [ $rc = 0 ] && [ "$c" = ok ] && row ok "gate N=$n $(basename "$f") transport $tr" || row WRONG "gate N=$n $(basename "$f") transport $tr: exit $rc, $c"
    done
  done; done ;;
soak)
  S=${FILES[0]}
  for n in $NS; do
    rc=0; $BIN soak --runs 20 $COMMON --model "$S" --stages $n --devices $(devs $n) --arms pipelined --gen-len 32 --out $W/soak$n -q > $W/r/s.txt 2>&1 || rc=$?
    log "soak x20 N=$n: exit $rc $(tail -1 $W/r/s.txt)"; [ $rc = 0 ] && row ok "soak x20 N=$n pipelined" || row WRONG "soak x20 N=$n: exit $rc"
  done
  if [ "${SOAK100:-1}" = 1 ]; then
    rc=0; $BIN soak --runs 100 $COMMON --model "$S" --stages 4 --devices 0,1,2,3 --arms pipelined --gen-len 32 --out $W/soak100 -q > $W/r/s.txt 2>&1 || rc=$?
    log "soak x100 N=4: exit $rc $(tail -1 $W/r/s.txt)"; [ $rc = 0 ] && row ok "soak x100 N=4 pipelined" || row WRONG "soak x100 N=4: exit $rc"
  fi ;;
procs)
  S=${FILES[0]} A="--arms eager,pipelined,batched --batch 8 --gen-len 16"
  for n in $NS; do
    D="--stages $n --devices $(devs $n)"
    $BIN $COMMON --model "$S" $D $A --receipt $W/r/one.json -q > /dev/null 2>&1
    rc=0; $BIN launch --procs $n --transport $NCCL $COMMON --model "$S" $D $A --receipt $W/r/procs.json -q > $W/r/p.txt 2>&1 || rc=$?
    same=$([ "$(hashes $W/r/one.json)" = "$(hashes $W/r/procs.json)" ] && echo same || echo differ)
    log "launch --procs $n --transport $NCCL: exit $rc, hashes $same as one process"
    [ $rc = 0 ] && [ $same = same ] && row ok "launch --procs $n $NCCL, hashes of one process" || row WRONG "launch --procs $n: exit $rc, hashes $same"
    rc=0; $BIN soak --runs 20 --procs $n --transport $NCCL $COMMON --model "$S" $D --arms pipelined --gen-len 16 --out $W/psoak$n -q > $W/r/s.txt 2>&1 || rc=$?
    log "soak x20 --procs $n: exit $rc"; [ $rc = 0 ] && row ok "soak x20 --procs $n" || row WRONG "soak x20 --procs $n: exit $rc"
    rc=0; $BIN launch --procs $n --transport $NCCL $COMMON --model "$S" $D --arms pipelined --gen-len 16 --fault rx-no-wait --receipt $W/r/f.json -q > $W/r/f.txt 2>&1 || rc=$?
    log "launch --procs $n --fault rx-no-wait: exit $rc (1: caught)"; [ $rc = 1 ] && row ok "link fault rx-no-wait caught at --procs $n" || row WRONG "rx-no-wait at --procs $n: exit $rc"
  done ;;
selftest)
  rc=0; $BIN selftest $COMMON --out $W/selftest > $W/r/st.txt 2>&1 || rc=$?
  log "selftest: exit $rc $(tail -1 $W/r/st.txt)"; [ $rc = 0 ] && row ok "selftest" || row WRONG "selftest: exit $rc" ;;
bench)
  if [ "$BE" = cpu ]; then L=$W/m/big.gguf; else L=$W/m/l32.gguf; [ -f $L ] || $BIN synth --preset llama8b --layers 32 --quant q4_k_m -o $L > /dev/null; fi
  for n in $NS; do
    rc=0; $BIN bench $COMMON --model $L --stages $n --devices $(devs $n) --arms pipelined --steps 64 > $W/r/b.txt 2>&1 || rc=$?
    log "bench N=$n: exit $rc $(grep -E 'pipelined +\(' $W/r/b.txt)"; cat $W/r/b.txt >> "$OUT/bench.txt"
    [ $rc = 0 ] && row ok "bench N=$n pipelined: $(grep -oE '[0-9.]+x eager' $W/r/b.txt)" || row WRONG "bench N=$n: exit $rc"
  done ;;
*) row WRONG "unknown section $sec"; ;;
esac; done
cat "$OUT/summary.txt"
! grep -q '^WRONG' "$OUT/summary.txt"
