#!/usr/bin/env bash
# Everything a GPU session verifies, in one entry point (never in CI: CI has no GPU). What it
# proves, on the machine it runs on, each row of the table at the end ok or WRONG:
#   battery   the one-GPU battery gates/gpu-1.json PASSes (and gates/gpu-multi.json with two
#             or more GPUs): the real models at N = 2..8, uneven splits, tapes, jitter, B=8,
#             host transport, every arm bit-identical to the one-stage reference
#   selftest  `ppn-gate selftest`: every fault that can open on this machine is caught in every
#             run, every clean control passes (the negative controls)
#   soak      x20 soaks: SmolLM2 N=4 all arms, a prime soak (--repeat 5) and, with two GPUs,
#             the same over both: 20/20 PASS
#   oracle    the committed HF transformers tapes (tests/data/oracle: the real models, the
#             synthetic qwen2/qwen3 files) through the CUDA reference: top-1 at every step,
#             top-20 within 1e-3 (scripts/oracle-compare.py), every arm PASS, under --mma auto
#             and on; prime/verify at N = 1, 2, 4, 8; three fingerprints (11 primes, one
#             fingerprint); CUDA against the CPU backend per block format
#             (scripts/cmp-receipts.py); the same gate twice `diff`s same
#   mma       the tensor-core path (--mma on) on small files of every format it takes (Q4_K,
#             Q8_0, Q4_0, Q4_1, Q5_0, Q6_K, a Q4_K_M mix; 576/640-wide partial super-blocks):
#             decode and chunk gates PASS, the planted `mma-row-order` FAILs; --pdl off and
#             --graphs off `diff` same as on
#   verdicts  the gate's verdicts at the edges, with inputs the tests do not contain: HF tapes
#             made on the machine (ORACLE_STAGE, below) on 4096-wide Q4_K_M, Q8_0 and qwen2
#             files, every arm at N = 1, 2, 3 under --mma auto and on, prime's ladder reaches
#             the prompt, verify starts after it; launch --procs 2 (ipc) PASS; a NaN
#             rope.freq_base exits 2; a CPU and a CUDA receipt of one gate `diff` differs; a
#             negative control (no-rollback) FAILs on an HF tape; model shapes drawn by
#             scripts/shape-sweep.py (SHAPE_MODELS, SHAPE_SEED): each gate PASSes, each with
#             a planted bit FAILs
#   serve     the serve arm (continuous batching, every request bit-identical to itself
#             alone): SmolLM2, Gemma-3 and a 4096-wide Q4_K_M file at N = 1, 2, 4 under --mma
#             auto and on; with every other arm; 64-row steps; --trace passes trace-check's
#             bars on the serve phase, every serve slice naming its requests; `stale-cache`
#             and `row-count-order` (--mma off: both FFMA kernel families) FAIL every run of
#             a soak, their controls PASS, auto refuses row-count-order; a serve soak x
#             SOAK_RUNS PASS; bench's serve row
#   trace     --trace changes no bit (`diff` same), the 8B shape's N=4 trace passes
#             trace-check on pipelined and eager FAILs its overlap bar, a traced soak, the
#             tracing cost in bench, the picture (scripts/trace-svg.py)
#   cache     the module cache: a fresh cache compiles, a second gate reads every module
#             (< 1 s), a damaged entry is rebuilt; every receipt `diff`s same as --no-cache's
#   nccl      with two GPUs: launch --procs 2 --transport nccl PASS with the one-process
#             gate's logits hashes, its faults FAIL; with one: nccl-check's one-rank send/recv
#   cli       the commands around the gate on this backend, with the built-in model: a battery
#             of three gates with --junit, then against its own receipts as --golden (same);
#             a soak x10 of N = 4 pipelined with --junit; a clean hunt of 6 trials and one
#             pinned to a fault (every trial that opens it catches it); an output inside a
#             live soak's --out refused (exit 2) and free once it ends; a refused soak leaves
#             no --out; a battery given two SIGTERMs exits 130 with its lock removed and its
#             --junit standing
#   bench     bench on the real models (N = 1, 2, 4; B=8), prefill at C = 64, 128, 512 and,
#             with LLAMA_BIN, scripts/bench-vs-llamacpp.sh beside llama.cpp (BENCH.md)
#   multi     four and eight GPUs (issue 31; skipped with fewer than four): `--stages N
#             --devices 0,..,N-1` (N = 4, and 8 where 8 GPUs answer) on SmolLM2, Gemma-3 and a
#             4096-wide Q4_K_M synth of 8+ GB, every arm PASS under the default transport and
#             under --transport host, the receipt showing each boundary's transport (peer by
#             default on CUDA) and each stage's scratch, cache and weights on its own device;
#             x20 soaks of N = 4 and 8 pipelined and x100 of N = 4 (SOAK100=0: not); launch
#             --procs N --transport nccl with the one-process hashes, its x20 soak, rx-no-wait
#             FAILs; bench pipelined against eager at N = 4 and 8 on the full-depth 8B shape.
#             BE=cpu rehearses it on the CPU backend's eight devices (ipc for nccl)
#
# Usage, from the repository root:  scripts/gpu-validate.sh BIN OUT
#   SECTIONS="battery selftest ..." picks sections (default all, run in the order above).
#   MODELS=DIR     the real models (default models/, scripts/fetch-models.sh fills it).
#   ORACLE_STAGE=DIR  a folder with oracle_gpu.py (HF transformers' own greedy continuation
#                  of seeded prompts) and the gguf wheel: verdicts' fresh HF tapes. Without
#                  it, verdicts runs on the committed synthetic qwen tapes only.
#   RUNS=N         runs per selftest row (default 5); SOAK_RUNS=N soak runs (default 20).
#   SERVE_MODELS="smol gemma l8b"  the models of serve's N x --mma table (default all).
#   BE=cpu         rehearses the flow on the CPU backend (no GPU; no --mma; the CUDA-only
#                  sections and rows report "skipped"; small shapes, fewer runs).
# OUT gets summary.txt (the table, printed last), log.txt and receipts.tar.gz. Exit 0 when
# every row is ok (skipped rows do not count), 1 otherwise.
set -u
BIN=$(realpath "${1:?usage: scripts/gpu-validate.sh BIN OUT}")
OUT=${2:?usage: scripts/gpu-validate.sh BIN OUT}
cd "$(dirname "$0")/.."
ROOT=$PWD
BE=${BE:-cuda}
SECTIONS=${SECTIONS:-battery selftest soak oracle mma verdicts serve trace cache nccl cli bench multi}
MODELS=${MODELS:-models}
WORK=${WORK:-/tmp/gpu-validate}
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK/r" "$WORK/m"
SUM="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUM"
: >"$LOG"
SMOL="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$MODELS/gemma-3-270m-q4_k_m.gguf"
ORC=tests/data/oracle
BAD=0
T0=$(date +%s)
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
row() { printf '%-74s %s\n' "$1" "$2" | tee -a "$SUM" >/dev/null; }
ok() { row "$1" "ok${2:+ ($2)}"; }
wrong() { row "$1" "WRONG${2:+ ($2)}"; BAD=1; }
skip() { row "$1" "skipped: $2"; }
cuda() { [ "$BE" = cuda ]; }
# mma MODE: the flag (the CPU refuses --mma, so none there).
mma() { cuda && echo "--mma $1"; }
if cuda; then NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); else NGPU=1; fi
cuda && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1 | tee -a "$SUM" >/dev/null
row "binary" "$("$BIN" --version 2>&1), backend $BE, $NGPU GPU(s)"
# SOAK/selftest sizes; the CPU rehearsal keeps them short.
RUNS=${RUNS:-$(cuda && echo 5 || echo 1)}
SOAK_RUNS=${SOAK_RUNS:-$(cuda && echo 20 || echo 2)}

# expect NAME WANT_RC ARGS...: one ppn-gate command, its exit code against WANT_RC; its
# output in $WORK/last.out and the log.
expect() {
    local name=$1 want=$2
    shift 2
    echo "=== $name: $BIN $*" >>"$LOG"
    timeout "${TMO:-300}" "$BIN" "$@" >"$WORK/last.out" 2>&1
    local rc=$?
    cat "$WORK/last.out" >>"$LOG"
    local v
    v=$(grep -oE '^[a-z]+ +(PASS|FAIL)' "$WORK/last.out" | awk '{printf "%s %s, ", $1, $2}')
    if [ "$rc" = "$want" ]; then ok "$name" "exit $rc${v:+; ${v%, }}"; else wrong "$name" "exit $rc, want $want${v:+; ${v%, }}"; fi
    return 0
}
# rec NAME: the receipt path of the gate row NAME (its odd characters as _).
rec() { echo "$WORK/r/$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_').json"; }
# gate NAME WANT_RC ARGS...: a gate on $BE with its receipt at $(rec NAME).
gate() { local n=$1 w=$2; shift 2; expect "$n" "$w" --backend "$BE" -q "$@" --receipt "$(rec "$n")"; }
# same NAME A B [--ignore PATH..]: `diff` of two receipts must say same (a same-bits check
# of two settings names the setting's field to leave out, e.g. --ignore backend.graphs).
same() {
    local o rc n=$1 a=$2 b=$3
    shift 3
    o=$("$BIN" diff "$a" "$b" "$@" 2>&1)
    rc=$?
    echo "=== diff $a $b $*"$'\n'"$o" >>"$LOG"
    [ $rc = 0 ] && ok "$n" "same" || wrong "$n" "diff exit $rc: $(echo "$o" | head -2 | tail -1 | cut -c1-60)"
}
# failsoak NAME RUNS ARGS...: a soak of a fault's gate; every run must FAIL (exit 1, RUNS
# FAIL runs in its summary).
failsoak() {
    local n=$1 k=$2
    shift 2
    local d
    d=$(rec "$n" | sed 's/\.json$//')
    TMO=900 expect "$n" 1 soak --runs "$k" --backend "$BE" -q --out "$d" "$@"
    local f
    f=$(python3 -c "import json,sys; print(sum(1 for r in json.load(open(sys.argv[1]))['runs'] if r['verdict'] == 'FAIL'))" "$d/summary.json" 2>/dev/null)
    if [ "$f" = "$k" ]; then ok "  $n: every run" "$f/$k FAIL"; else wrong "  $n: every run" "${f:-?}/$k FAIL"; fi
}
# soakrow NAME RUNS ARGS...: a soak; every run must PASS.
soakrow() {
    local n=$1 k=$2
    shift 2
    TMO=900 expect "$n" 0 soak --runs "$k" --backend "$BE" -q --out "$(rec "$n" | sed 's/\.json$//')" "$@"
    grep -oE "^[0-9]+/$k PASS" "$WORK/last.out" | head -1 | sed "s/^/  /" | tee -a "$SUM" >/dev/null
}
# synth FILE ARGS...: a synthetic model (kept across sections).
synth() { local f=$1; shift; [ -f "$f" ] || "$BIN" synth "$@" -o "$f" >>"$LOG" 2>&1 || wrong "synth $(basename "$f")" "exit $?"; }
# devs N [GPUS]: the --devices list of N stages: all on 0, or (GPUS=2) the second half on 1.
devs() {
    local n=$1 g=${2:-1} i l=
    for ((i = 0; i < n; i++)); do
        if [ "$g" = 2 ] && [ $((2 * i)) -ge "$n" ]; then l+=1; else l+=0; fi
        [ $i -lt $((n - 1)) ] && l+=,
    done
    echo "$l"
}
have_real() { [ -f "$SMOL" ] && [ -f "$GEMMA" ]; }
# need_real SECTION: the real files a section runs every gate on are here; else one WRONG row
# naming them, and the section's gates are not run (each would fail on the missing file, a
# row apiece that says nothing of the build).
need_real() {
    have_real && return 0
    wrong "$1" "missing $SMOL or $GEMMA (scripts/fetch-models.sh, or MODELS=DIR); not run"
    return 1
}
# same_hashes A B: two receipts of one gate (processes against one process) hold the same
# reference and the same logits hashes at every step of every arm.
same_hashes() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
h = lambda r: [[s["logits_blake3"] for s in x["steps"]] for x in r["arms"]]
sys.exit(0 if h(a) == h(b) and a["reference"] == b["reference"] else 1)
EOF
}
# placed RECEIPT TRANSPORT: every boundary of the receipt's placement has TRANSPORT and every
# stage's scratch, cache and (CUDA) weights live on the stage's device; prints what is not.
placed() {
    python3 - "$1" "$2" "$BE" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); want = sys.argv[2]; be = sys.argv[3]
p = r["placement"]; bad = []
if any(t != want for t in p["transports"]): bad.append("transports %s, want %s" % (p["transports"], want))
for st in p["resident"]:
    for k in ["scratch", "cache"] + (["weights"] if be == "cuda" else []):
        bad += ["stage %d %s on %s" % (st["stage"], k, m["device"]) for m in st[k] if m["device"] != st["placed"]]
bad += p["misplaced"]
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF
}
# The CPU rehearsal runs the real-model rows on a small llama instead (the real files take
# minutes per gate on two cores).
if ! cuda; then
    synth "$WORK/m/small.gguf" --arch llama --layers 8 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048 --quant q4_1
    SMOL="$WORK/m/small.gguf"
    GEMMA="$WORK/m/small.gguf"
fi
TAPE() { python3 -c "import json; print(json.dumps({'tokens': [(i * 7919 + 13) % $1 for i in range(24)]}))"; }

if want battery; then
    if cuda; then
        have_real || wrong "battery" "missing $SMOL or $GEMMA (scripts/fetch-models.sh)"
        [ -e models ] || ln -s "$MODELS" models
        expect "battery gates/gpu-1.json" 0 battery gates/gpu-1.json --out "$WORK/r/battery-1"
        if [ "$NGPU" -ge 2 ]; then
            expect "battery gates/gpu-multi.json" 0 battery gates/gpu-multi.json --out "$WORK/r/battery-multi"
        else
            skip "battery gates/gpu-multi.json" "$NGPU GPU"
        fi
    else
        scripts/synth-models.sh "$BIN" target/synth >>"$LOG" 2>&1
        expect "battery gates/cpu.json against receipts/golden" 0 battery gates/cpu.json --out "$WORK/r/battery-cpu" --golden receipts/golden
    fi
    grep -E '^battery ' "$WORK/last.out" | sed 's/^/  /' | tee -a "$SUM" >/dev/null
fi

if want selftest; then
    expect "selftest --backend $BE --runs $RUNS" 0 selftest --backend "$BE" --runs "$RUNS" --out "$WORK/r/selftest"
    grep -E '^selftest ' "$WORK/last.out" | cut -c1-150 | sed 's/^/  /' | tee -a "$SUM" >/dev/null
fi

if want soak && need_real soak; then
    soakrow "soak x$SOAK_RUNS smol N=4 all arms" "$SOAK_RUNS" --model "$SMOL" --stages 4
    soakrow "soak x$SOAK_RUNS smol N=4 prime --repeat 5" "$SOAK_RUNS" --model "$SMOL" --stages 4 --arms prime --repeat 5 --prompt-len 23 --gen-len 16
    if [ "$NGPU" -ge 2 ]; then
        soakrow "soak x$SOAK_RUNS smol N=4 over 2 GPUs all arms" "$SOAK_RUNS" --model "$SMOL" --stages 4 --devices "$(devs 4 2)"
        soakrow "soak x$SOAK_RUNS gemma N=4 over 2 GPUs prime --repeat 5" "$SOAK_RUNS" --model "$GEMMA" --stages 4 --devices "$(devs 4 2)" --arms prime --repeat 5 --prompt-len 23 --gen-len 16
    else
        skip "soaks over 2 GPUs" "$NGPU GPU"
    fi
fi

# fingerprints RECEIPT: distinct fingerprints of a receipt's primes (the hash of each prime's
# logits hashes), and whether the one left is the reference's.
fingerprints() {
    python3 - "$1" <<'EOF'
import hashlib, json, sys
r = json.load(open(sys.argv[1]))
ref = hashlib.sha256("".join(s["logits_blake3"] for s in r["reference"]["steps"]).encode()).hexdigest()
by = {}
for a in r["arms"]:
    if a["name"] == "prime":
        for s in a["steps"]:
            by.setdefault((s["chunk"], s["repeat"]), []).append(s["logits_blake3"])
fps = {k: hashlib.sha256("".join(v).encode()).hexdigest() for k, v in by.items()}
d = sorted(set(fps.values()))
print(("ok" if d == [ref] else "WRONG"), f"{len(d)} fingerprint(s) over {len(fps)} primes, the reference's: {d == [ref]}")
EOF
}
# cmp_be NAME MODEL TAPE TOL: the tape's reference on the CPU backend and on $BE, top-20 compared.
cmp_be() {
    local n=$1 m=$2 t=$3 tol=$4 be o rc
    for be in cpu $BE; do
        "$BIN" --backend $be -q --model "$m" --stages 1 --arms eager --tape "$t" --topk 20 --receipt "$WORK/r/cmp-$n-$be.json" >>"$LOG" 2>&1
    done
    o=$(python3 scripts/cmp-receipts.py --tol "$tol" "$WORK/r/cmp-$n-cpu.json" "$WORK/r/cmp-$n-$BE.json" 2>&1)
    rc=$?
    echo "$o" >>"$LOG"
    [ $rc = 0 ] && ok "cpu vs $BE $n (tol $tol)" "$(echo "$o" | tail -1 | cut -c1-70)" || wrong "cpu vs $BE $n (tol $tol)" "$(echo "$o" | tail -1 | cut -c1-70)"
}
# hf NAME RECEIPT TAPE: the receipt's reference against the HF tape (top-1, top-20 within 1e-3).
hf() {
    local o rc
    o=$(python3 scripts/oracle-compare.py --tol 1e-3 "$2" "$3" 2>&1)
    rc=$?
    echo "$o" >>"$LOG"
    [ $rc = 0 ] && ok "$1" "$(echo "$o" | head -1 | sed 's/^[^:]*: //' | cut -c1-60)" || wrong "$1" "$(echo "$o" | head -1 | cut -c1-70)"
}

if want oracle; then
    MODES=$(cuda && echo "auto on" || echo "cpu")
    if cuda; then
        for spec in "smollm2-135m-q4_1:$SMOL" "gemma3-270m-q4_k_m:$GEMMA"; do
            name=${spec%%:*} f=${spec#*:}
            for t in tapeA tapeT; do
                for md in $MODES; do
                    gate "oracle-$name-$t-$md" 0 $(mma $md) --model "$f" --stages 2 --tape "$ORC/$name.$t.json" --topk 20
                    hf "  HF $name $t --mma $md" "$(rec "oracle-$name-$t-$md")" "$ORC/$name.$t.json"
                done
            done
        done
    fi
    for q in synth-qwen2-L4-E256 synth-qwen3-L4-E256; do
        for md in $MODES; do
            gate "oracle-$q-n3-$md" 0 $(mma $md) --model "$ORC/synth/$q.gguf" --stages 3 --splits 1,3 --tape "$ORC/synth/$q.tapeA.json" --topk 20
            hf "  HF $q --mma $md" "$(rec "oracle-$q-n3-$md")" "$ORC/synth/$q.tapeA.json"
        done
    done
    for mdl in smol gemma; do
        f=$SMOL
        [ $mdl = gemma ] && f=$GEMMA
        for n in 1 2 4 8; do
            gate "prime,verify $mdl N=$n" 0 --model "$f" --stages $n --devices "$(devs $n)" --arms prime,verify --prompt-len 23 --gen-len 16
        done
        [ "$NGPU" -ge 2 ] && gate "prime,verify $mdl N=2 over 2 GPUs" 0 --model "$f" --stages 2 --devices 0,1 --arms prime,verify --prompt-len 23 --gen-len 16
        for c in 24 8; do
            n="three-fingerprints $mdl N=4 chunk $c"
            gate "$n" 0 --model "$f" --stages 4 --arms prime --chunk $c --repeat 11 --prompt-len 24 --gen-len 0
            [ -f "$(rec "$n")" ] && { o=$(fingerprints "$(rec "$n")"); [[ $o == ok* ]] && ok "  one fingerprint" "${o#ok }" || wrong "  one fingerprint" "${o#WRONG }"; }
        done
        gate "twice-$mdl-a" 0 --model "$f" --stages 2
        gate "twice-$mdl-b" 0 --model "$f" --stages 2
        same "  the same gate twice ($mdl)" "$(rec "twice-$mdl-a")" "$(rec "twice-$mdl-b")"
    done
    # CUDA against the CPU backend, per block format (the small shapes of every format).
    if cuda; then
        TAPE 2000 >"$WORK/tape2000.json"
        for q in q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k f16 bf16 f32; do
            synth "$WORK/m/fmt-$q.gguf" --arch llama --layers 3 --embd 256 --heads 8 --kv-heads 2 --ff 512 --vocab 2048 --quant $q
            cmp_be "llama-$q" "$WORK/m/fmt-$q.gguf" "$WORK/tape2000.json" 1e-3
        done
        synth "$WORK/m/fmt-gemma3-q4_k.gguf" --arch gemma3 --layers 6 --embd 256 --heads 4 --kv-heads 1 --ff 512 --vocab 4096 --quant q4_k
        cmp_be gemma3-q4_k "$WORK/m/fmt-gemma3-q4_k.gguf" "$WORK/tape2000.json" 1e-3
        cmp_be smollm2 "$SMOL" "$WORK/tape2000.json" 1e-2
        cmp_be gemma3-270m "$GEMMA" "$WORK/tape2000.json" 1e-2
    else
        skip "cpu vs cuda per format" "BE=cpu"
    fi
fi

if want mma; then
    if cuda; then
        small="--arch llama --layers 2 --embd 512 --heads 8 --kv-heads 2 --ff 1536 --vocab 2048"
        for q in q4_k q8_0 q4_1 q5_0 q4_0 q6_k q4_k_m; do synth "$WORK/m/mma-$q.gguf" $small --quant $q; done
        synth "$WORK/m/mma-smol576.gguf" --arch llama --layers 2 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 2048 --quant q4_1 --tied
        synth "$WORK/m/mma-gemma640.gguf" --arch gemma3 --layers 2 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 2048 --quant q5_0
        DEC="--arms eager,pipelined,batched --batch 8 --gen-len 24"
        CHK="--arms prime,verify --prompt-len 40 --chunk 1,8,16,40 --gen-len 8"
        for m in q4_k q8_0 q4_1 q5_0 q4_0 q6_k q4_k_m smol576 gemma640; do
            for n in 1 2; do
                gate "mma on $m N=$n decode" 0 --mma on --model "$WORK/m/mma-$m.gguf" --stages $n --devices "$(devs $n)" $DEC
                gate "mma on $m N=$n chunks" 0 --mma on --model "$WORK/m/mma-$m.gguf" --stages $n --devices "$(devs $n)" $CHK
            done
        done
        # Both forms of mma_prep's plant: Q4_K's and Q6_K's integer pieces (x rounded toward
        # zero on launches of 2+ rows), the other formats' f16 hi and lo swapped.
        gate "fault mma-row-order q4_k batched B=8 (must FAIL)" 1 --mma on --model "$WORK/m/mma-q4_k.gguf" --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
        gate "fault mma-row-order q4_k prime C=40 (must FAIL)" 1 --mma on --model "$WORK/m/mma-q4_k.gguf" --stages 1 --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault mma-row-order
        gate "fault mma-row-order q8_0 batched B=8 (must FAIL)" 1 --mma on --model "$WORK/m/mma-q8_0.gguf" --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
        gate "fault mma-row-order smol576 prime C=40 (must FAIL)" 1 --mma on --model "$WORK/m/mma-smol576.gguf" --stages 1 --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault mma-row-order
        gate "fault mma-row-order q6_k batched B=8 (must FAIL)" 1 --mma on --model "$WORK/m/mma-q6_k.gguf" --stages 2 --devices 0,0 --arms batched --batch 8 --gen-len 8 --fault mma-row-order
        gate "fault mma-row-order q6_k prime C=40 (must FAIL)" 1 --mma on --model "$WORK/m/mma-q6_k.gguf" --stages 1 --arms prime --prompt-len 40 --chunk 40 --gen-len 4 --fault mma-row-order
        gate "fault no-rollback q4_k verify (must FAIL)" 1 --mma on --model "$WORK/m/mma-q4_k.gguf" --stages 2 --devices 0,0 --arms verify --prompt-len 40 --gen-len 16 --fault no-rollback
        for sw in pdl graphs; do
            for m in q4_k q4_k_m; do
                gate "mma on $m N=2 B=8 --$sw off" 0 --mma on --$sw off --model "$WORK/m/mma-$m.gguf" --stages 2 --devices 0,0 $DEC
                same "  --$sw off = on ($m)" "$(rec "mma on $m N=2 decode")" "$(rec "mma on $m N=2 B=8 --$sw off")" --ignore backend.graphs
            done
        done
    else
        skip "mma" "the CPU backend has no --mma"
    fi
fi

if want verdicts; then
    W=$WORK/v
    mkdir -p "$W"
    TAPES=()
    for q in synth-qwen2-L4-E256 synth-qwen3-L4-E256; do
        cp "$ORC/synth/$q.gguf" "$W/"
        cp "$ORC/synth/$q.tapeA.json" "$W/$q.tapeA.json"
        TAPES+=("$q:tapeA")
    done
    if cuda; then
        synth "$W/l8b-q4km.gguf" --preset llama8b --layers 4 --quant q4_k_m --seed 5
        synth "$W/l8b-q80.gguf" --preset llama8b --layers 4 --quant q8_0 --seed 6
        synth "$W/q7b-q4km.gguf" --preset qwen7b --layers 4 --quant q4_k_m --seed 7
        if [ -n "${ORACLE_STAGE:-}" ] && [ -f "$ORACLE_STAGE/oracle_gpu.py" ]; then
            python3 -m pip install -q --no-index --no-deps --target "$WORK/site" "$ORACLE_STAGE"/gguf-*.whl >>"$LOG" 2>&1
            # HF tapes: prompts of 24 (seed 11) and 15 (seed 12) tokens, 12 generated each.
            for m in l8b-q4km l8b-q80 q7b-q4km synth-qwen2-L4-E256 synth-qwen3-L4-E256; do
                for pl in 24 15; do
                    if PYTHONPATH=$WORK/site PYTHONUNBUFFERED=1 python3 "$ORACLE_STAGE/oracle_gpu.py" "$W/$m.gguf" $((pl - 3)) $pl 12 20 "$W/$m.p$pl.json" >>"$LOG" 2>&1; then
                        TAPES+=("$m:p$pl")
                    else
                        wrong "oracle_gpu.py $m p$pl" "failed, see log.txt"
                    fi
                done
            done
        else
            skip "fresh HF tapes on the 4096-wide files" "no ORACLE_STAGE"
        fi
    fi
    for spec in "${TAPES[@]}"; do
        m=${spec%%:*} t=${spec#*:}
        tape="$W/$m.$t.json"
        pl=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_len"])' "$tape")
        for n in 1 2 3; do
            for md in $(cuda && echo "auto on" || echo cpu); do
                gate "v-$m-$t-n$n-$md" 0 $(mma $md) --model "$W/$m.gguf" --tape "$tape" --stages $n \
                    --arms eager,pipelined,batched,prime,verify --batch 3 --topk 20
            done
        done
        r=$(rec "v-$m-$t-n1-$(cuda && echo auto || echo cpu)")
        [ -f "$r" ] || continue
        chk=$(python3 - "$r" "$pl" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); p = int(sys.argv[2])
arms = {a["name"]: a for a in r["arms"]}
chunks = sorted({s.get("chunk", s.get("key", {}).get("chunk")) for s in arms["prime"]["steps"]} - {None})
rounds = arms["verify"]["rounds"]
ok = p in chunks and rounds and rounds[0]["start"] == p
print(("ok" if ok else "WRONG"), "chunks", chunks, "first round at", rounds[0]["start"] if rounds else None)
EOF
)
        [[ $chk == ok* ]] && ok "  $m $t: prime reaches $pl, verify starts after it" "${chk#ok }" || wrong "  $m $t: prime reaches $pl, verify starts after it" "${chk#WRONG }"
        hf "  $m $t: the reference against HF" "$r" "$tape"
    done
    q2="$W/synth-qwen2-L4-E256"
    # Stages as processes with a tape, prime and verify: ipc on the CPU; on CUDA NCCL, which
    # needs a GPU per process.
    NCCL_DIR=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
    if ! cuda; then
        X=(--transport ipc)
    elif [ "$NGPU" -ge 2 ] && [ -n "$NCCL_DIR" ]; then
        X=(--transport nccl --nccl-lib "$NCCL_DIR" --devices 0,1)
    else
        X=()
    fi
    if [ ${#X[@]} -gt 0 ]; then
        expect "launch --procs 2 ${X[1]} qwen2 tapeA eager,prime,verify" 0 launch --procs 2 --backend "$BE" -q "${X[@]}" \
            --model "$q2.gguf" --tape "$q2.tapeA.json" --stages 2 --arms eager,prime,verify --receipt "$WORK/r/launch2.json"
    else
        skip "launch --procs 2 with a tape" "NCCL needs 2 GPUs and libnccl"
    fi
    # A NaN rope.freq_base (patched in a copy) must exit 2, naming the key.
    python3 - "$q2.gguf" "$W/nan-rope.gguf" >>"$LOG" 2>&1 <<'EOF'
import sys, struct
b = bytearray(open(sys.argv[1], "rb").read())
k = b"rope.freq_base"; i = b.index(k) + len(k)
assert struct.unpack_from("<I", b, i)[0] == 6  # f32
struct.pack_into("<f", b, i + 4, float("nan"))
open(sys.argv[2], "wb").write(b)
EOF
    expect "rope.freq_base NaN -> exit 2" 2 --backend "$BE" -q --model "$W/nan-rope.gguf" --stages 2
    grep -q 'freq_base' "$WORK/last.out" && ok "  the message names rope.freq_base" || wrong "  the message names rope.freq_base" "$(head -1 "$WORK/last.out" | cut -c1-60)"
    if cuda; then
        "$BIN" --backend cpu -q --model "$q2.gguf" --stages 2 --receipt "$WORK/r/cpu.json" >>"$LOG" 2>&1
        "$BIN" --backend cuda -q --model "$q2.gguf" --stages 2 --receipt "$WORK/r/cuda.json" >>"$LOG" 2>&1
        "$BIN" diff "$WORK/r/cpu.json" "$WORK/r/cuda.json" >>"$LOG" 2>&1
        rc=$?
        [ $rc = 1 ] && ok "diff of a cpu and a cuda receipt of one gate" "exit 1: differs" || wrong "diff of a cpu and a cuda receipt of one gate" "exit $rc"
    else
        skip "diff of a cpu and a cuda receipt" "BE=cpu"
    fi
    t=${TAPES[0]}
    [ ${#TAPES[@]} -gt 2 ] && t=${TAPES[2]}
    expect "--fault no-rollback on ${t/:/ }, verify (must FAIL)" 1 --backend "$BE" -q --model "$W/${t%%:*}.gguf" \
        --tape "$W/${t%%:*}.${t#*:}.json" --stages 2 --arms verify --fault no-rollback
    # Shapes no test wrote (scripts/shape-sweep.py): every drawn model's gate PASSes and its
    # planted one-bit prime FAILs; OUT/shapes keeps the summary and any finding.
    n=${SHAPE_MODELS:-$(cuda && echo 60 || echo 10)}
    python3 scripts/shape-sweep.py "$BIN" --backend "$BE" --out "$WORK/shapes" --models "$n" \
        --seed "${SHAPE_SEED:-7}" >>"$LOG" 2>&1
    rc=$?
    mkdir -p "$OUT/shapes" && cp "$WORK"/shapes/*.txt "$OUT/shapes/"
    t=$(tail -1 "$WORK/shapes/summary.txt" | cut -d, -f1-3)
    [ $rc = 0 ] && ok "$n drawn shapes: clean PASS, planted bit FAILs" "$t" || wrong "$n drawn shapes" "exit $rc: $t"
fi

if want serve; then
    SV="--arms serve --requests 24 --max-rows 16 --prefill-chunk 8 --prompt-len 24 --gen-len 12"
    synth "$WORK/m/l8b-q4km.gguf" --preset llama8b --layers 4 --quant q4_k_m --seed 5
    L8B="$WORK/m/l8b-q4km.gguf"
    cuda || L8B="$WORK/m/small.gguf"
    # SERVE_MODELS: the models of the N x --mma table (default all three).
    for m in ${SERVE_MODELS:-smol gemma l8b}; do
        case $m in smol) f=$SMOL ;; gemma) f=$GEMMA ;; l8b) f=$L8B ;; esac
        for n in 1 2 4; do
            for md in auto on; do
                cuda || [ $md = auto ] || continue
                gate "serve $m N=$n --mma $md" 0 $(mma $md) --model "$f" --stages $n $SV --seed $n
            done
        done
    done
    gate "serve smol N=2 with every arm" 0 --model "$SMOL" --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 20 --max-rows 8
    gate "serve l8b N=2 64-row steps, 60 requests" 0 --model "$L8B" --stages 2 --arms serve --requests 60 --max-rows 64 --prefill-chunk 32 --prompt-len 40 --gen-len 8
    gate "serve smol N=3 --fault stale-cache FAILs" 1 --model "$SMOL" --stages 3 --arms serve --requests 20 --max-rows 4 --fault stale-cache
    # row-count-order: on CUDA planted in both FFMA families (mvq.cu for the repacked block
    # formats: SmolLM2's Q4_1, the Q4_K_M mix; matvec.cu for F16), so --mma off; the clean
    # control with the same flags PASSes; under --mma auto it is refused (exit 2).
    synth "$WORK/m/f16.gguf" --layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048 --quant f16 --seed 6
    RC="--stages 2 --arms serve --requests 16 --max-rows 6 --prefill-chunk 3"
    for m in smol l8b f16; do
        case $m in smol) f=$SMOL ;; l8b) f=$L8B ;; f16) f=$WORK/m/f16.gguf ;; esac
        gate "serve $m $(mma off) control for row-count-order" 0 $(mma off) --model "$f" $RC
        gate "serve $m $(mma off) --fault row-count-order FAILs" 1 $(mma off) --model "$f" $RC --fault row-count-order
    done
    if cuda; then
        gate "serve l8b --mma auto --fault row-count-order refused" 2 --model "$L8B" $RC --fault row-count-order
        failsoak "soak x$SOAK_RUNS l8b --mma off --fault row-count-order" "$SOAK_RUNS" --mma off --model "$L8B" $RC --fault row-count-order
    fi
    failsoak "soak x$SOAK_RUNS smol --fault stale-cache" "$SOAK_RUNS" --model "$SMOL" --stages 3 --arms serve --requests 20 --max-rows 4 --prefill-chunk 2 --fault stale-cache
    gate "serve smol N=4 traced" 0 --model "$SMOL" --stages 4 --arms serve --requests 20 --trace "$WORK/r/serve-trace.json"
    expect "trace-check --phase serve (slices name their requests)" 0 trace-check "$WORK/r/serve-trace.json" --phase serve
    grep -m1 "serve work slices" "$WORK/last.out" | cut -c1-110 | sed "s/^/  /" | tee -a "$SUM" >/dev/null
    soakrow "soak x$SOAK_RUNS smol N=4 serve" "$SOAK_RUNS" --model "$SMOL" --stages 4 --arms serve --requests 16 --max-rows 8
    # bench's serve row (the figures beside llama-parallel: scripts/bench-vs-llamacpp.sh).
    expect "bench --arms serve smol" 0 bench --backend "$BE" --model "$SMOL" --arms serve --requests 64 --max-rows 8 --prefill-chunk 8 --prompt-len 32 --gen-len 128 --steps 16
    grep -m1 "serve     (" "$WORK/last.out" | sed "s/^ */  /" | tee -a "$SUM" >/dev/null
fi

if want trace; then
    TM=$SMOL
    if cuda; then synth "$WORK/m/l8.gguf" --preset llama8b --layers 8 --quant q4_k; TM=$WORK/m/l8.gguf; fi
    for pl in "1gpu:$(devs 4)" "2gpu:0,0,1,1"; do
        tag=${pl%%:*} d=${pl#*:}
        [ $tag = 2gpu ] && [ "$NGPU" -lt 2 ] && { skip "trace N=4 over 2 GPUs" "$NGPU GPU"; continue; }
        gate "trace-$tag-plain" 0 --model "$TM" --stages 4 --devices "$d"
        gate "trace-$tag-traced" 0 --model "$TM" --stages 4 --devices "$d" --trace "$WORK/r/trace-$tag.json"
        same "  --trace changes no bit ($tag)" "$(rec "trace-$tag-plain")" "$(rec "trace-$tag-traced")"
        expect "  trace-check pipelined ($tag)" 0 trace-check "$WORK/r/trace-$tag.json" --phase pipelined
        expect "  trace-check eager must FAIL ($tag)" 1 trace-check "$WORK/r/trace-$tag.json" --phase eager
        grep -q '^FAIL  no overlap in eager' "$WORK/last.out" && ok "    the bar it FAILs is the overlap" || wrong "    the bar it FAILs is the overlap" "$(grep '^FAIL' "$WORK/last.out" | head -1 | cut -c1-50)"
    done
    soakrow "soak --runs 3 --trace" 3 --model "$TM" --stages 4 --arms pipelined --trace "$WORK/r/soak.trace.json"
    expect "bench --stages 4 --trace (the tracing cost)" 0 bench --backend "$BE" --model "$SMOL" --stages 4 --steps $(cuda && echo 64 || echo 8) --trace "$WORK/r/bench.trace.json"
    grep -E 'tracing cost|busy' "$WORK/last.out" | cut -c1-150 | sed 's/^ */  /' | tee -a "$SUM" >/dev/null
    if python3 scripts/trace-svg.py "$WORK/r/trace-1gpu.json" "$OUT/trace-n4-pipelined.svg" --steps 4:10 --flows >>"$LOG" 2>&1; then
        ok "trace-svg.py" "$OUT/trace-n4-pipelined.svg"
    else
        wrong "trace-svg.py" "exit $?"
    fi
fi

# modules RECEIPT: "ms hits misses corrupt" of timings.modules.
modules() {
    python3 -c 'import json,sys
m=json.load(open(sys.argv[1]))["timings"].get("modules") or {}
print("%.0f %d %d %d" % (m.get("ms",-1), m.get("hits",-1), m.get("misses",-1), m.get("corrupt",-1)))' "$1"
}
if want cache; then
    if cuda && need_real cache; then
        C=$WORK/cache
        CUDA_CACHE_PATH=$WORK/nvjit gate "cache nocache" 0 --no-cache --model "$SMOL" --stages 2 --gen-len 8
        for k in miss hit; do gate "cache $k" 0 --cache-dir "$C" --model "$SMOL" --stages 2 --gen-len 8; done
        read -r _ _ m _ < <(modules "$(rec "cache miss")")
        read -r hms hh hm _ < <(modules "$(rec "cache hit")")
        [ "$m" -gt 0 ] && ok "  a fresh cache compiles" "$m modules" || wrong "  a fresh cache compiles" "$m"
        [ "$hm" = 0 ] && [ "$hh" = "$m" ] && [ "$hms" -lt 1000 ] && ok "  the second gate reads every module" "$hh read in $hms ms" || wrong "  the second gate reads every module" "hits $hh misses $hm, $hms ms"
        e=$(ls "$C"/*.mod 2>/dev/null | head -1)
        [ -n "$e" ] && truncate -s $(($(stat -c %s "$e") / 2)) "$e"
        gate "cache corrupt" 0 --cache-dir "$C" --model "$SMOL" --stages 2 --gen-len 8
        read -r _ _ _ cc < <(modules "$(rec "cache corrupt")")
        [ "$cc" = 1 ] && ok "  a damaged entry is detected and rebuilt" || wrong "  a damaged entry is detected and rebuilt" "corrupt $cc"
        for k in miss hit corrupt; do same "  cache $k = nocache" "$(rec "cache nocache")" "$(rec "cache $k")"; done
    elif ! cuda; then
        skip "cache" "the module cache is CUDA's"
    fi
fi

if want nccl; then
    NCCL_DIR=${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
    if ! cuda; then
        expect "launch --procs 3 --backend cpu --stages 3 (ipc)" 0 launch --procs 3 --backend cpu --stages 3 --transport ipc --receipt "$WORK/r/ipc3.json"
        skip "nccl" "BE=cpu"
    elif [ -z "$NCCL_DIR" ]; then
        wrong "nccl" "no libnccl: pip install nvidia-nccl-cu13, or set NCCL_LIB"
    elif [ "$NGPU" -lt 2 ]; then
        expect "nccl-check --device 0 (one-rank send/recv)" 0 nccl-check --nccl-lib "$NCCL_DIR" --device 0
        skip "nccl across two processes" "$NGPU GPU (NCCL refuses two ranks on one GPU)"
    else
        NC=(--backend cuda --stages 2 --devices 0,1 --transport nccl --nccl-lib "$NCCL_DIR" -q)
        expect "nccl-check --device 1" 0 nccl-check --nccl-lib "$NCCL_DIR" --device 1
        for spec in "smol:$SMOL" "gemma:$GEMMA"; do
            t=${spec%%:*} f=${spec#*:}
            expect "launch --procs 2 nccl $t" 0 launch --procs 2 --model "$f" "${NC[@]}" --receipt "$WORK/r/nccl-$t.json"
            "$BIN" --backend cuda -q --model "$f" --stages 2 --devices 0,1 --receipt "$WORK/r/nccl-$t-1proc.json" >>"$LOG" 2>&1
            if same_hashes "$WORK/r/nccl-$t.json" "$WORK/r/nccl-$t-1proc.json"; then ok "  $t: the one-process gate's hashes"; else wrong "  $t: the one-process gate's hashes"; fi
            soakrow "soak x$SOAK_RUNS --procs 2 nccl $t pipelined" "$SOAK_RUNS" --procs 2 --model "$f" --stages 2 --devices 0,1 --transport nccl --nccl-lib "$NCCL_DIR" --arms pipelined
            for fs in "rx-no-wait:eager,pipelined:--jitter-us 200" "no-exit-publish:eager:" "no-war-guard:pipelined:--splits 1 --window 4 --jitter-us 200" "single-slot:pipelined:--splits 1 --window 4 --jitter-us 200"; do
                IFS=: read -r fault arms extra <<<"$fs"
                # shellcheck disable=SC2086
                expect "  nccl $t fault $fault (must FAIL)" 1 launch --procs 2 --model "$f" "${NC[@]}" --fault "$fault" --arms "$arms" $extra
            done
        done
    fi
fi

if want cli; then
    C=$WORK/cli
    mkdir -p "$C"
    printf '%s\n' '{"name": "cli", "gates": [' \
        "  {\"name\": \"n2\", \"args\": [\"--backend\", \"$BE\", \"--stages\", \"2\"]}," \
        "  {\"name\": \"n4-jitter\", \"args\": [\"--backend\", \"$BE\", \"--stages\", \"4\", \"--window\", \"4\", \"--jitter-us\", \"200\"]}," \
        "  {\"name\": \"n3-prime\", \"args\": [\"--backend\", \"$BE\", \"--stages\", \"3\", \"--arms\", \"prime,verify\", \"--prompt-len\", \"23\"]}" \
        ']}' >"$C/b.json"
    expect "cli: battery of 3 with --junit" 0 battery "$C/b.json" --out "$C/bat" --junit "$C/bat.xml"
    expect "cli: the battery against its receipts as --golden" 0 battery "$C/b.json" --out "$C/bat2" --golden "$C/bat"
    expect "cli: soak x10 N=4 pipelined with --junit" 0 soak --runs 10 --backend "$BE" -q --stages 4 --arms pipelined --out "$C/soak" --junit "$C/soak.xml"
    grep -oE "^[0-9]+/10 PASS" "$WORK/last.out" | head -1 | sed "s/^/  /" | tee -a "$SUM" >/dev/null
    expect "cli: hunt, 6 trials, seed 641" 0 hunt --backend "$BE" --trials 6 --seed 641 --out "$C/hunt"
    # A pinned fault is no finding where it is caught: every trial that opens it must FAIL.
    expect "cli: hunt pinned to --fault single-slot" 0 hunt --backend "$BE" --trials 6 --seed 643 --fault single-slot --out "$C/hunt-f"
    c=$(grep -oE '^fault single-slot: opened in [0-9]+ trials \([0-9]+ caught\)' "$WORK/last.out")
    o=$(echo "$c" | grep -oE 'in [0-9]+' | grep -oE '[0-9]+')
    k=$(echo "$c" | grep -oE '\([0-9]+' | tr -d '(')
    if [ -n "$o" ] && [ "$o" -gt 0 ] && [ "$o" = "$k" ]; then ok "  every trial that opened it caught it" "$k/$o"; else wrong "  every trial that opened it caught it" "${c:-no fault line}"; fi
    # An output inside a live soak's --out: refused while it runs, free once it is gone.
    "$BIN" soak --runs 400 --backend "$BE" -q --stages 2 --out "$C/live" >/dev/null 2>&1 &
    LP=$!
    for _ in $(seq 100); do [ -f "$C/live/run-001.json" ] && break; sleep 0.2; done
    expect "cli: --receipt inside a live soak's --out refused" 2 --backend "$BE" -q --receipt "$C/live/run-005.json"
    kill -TERM $LP
    wait $LP
    expect "cli: the same directory once the soak ended" 0 --backend "$BE" -q --receipt "$C/live/extra.json"
    expect "cli: a refused soak (--junit on its lock)" 2 soak --runs 2 --backend "$BE" --out "$C/nope/d" --junit "$C/nope/d/.ppn-gate.lock"
    if [ -e "$C/nope" ]; then wrong "cli: the refused soak left no --out" "$C/nope exists"; else ok "cli: the refused soak left no --out"; fi
    # Two SIGTERMs: the battery leaves at once, exit 130 (1 where a gate FAILed), no lock left.
    "$BIN" battery "$C/b.json" --out "$C/int" --junit "$C/int.xml" >/dev/null 2>&1 &
    BP=$!
    for _ in $(seq 300); do [ -f "$C/int/n2.json" ] && break; sleep 0.2; done
    kill -TERM $BP
    sleep 0.3
    kill -TERM $BP
    wait $BP
    rc=$?
    lock=removed
    [ -e "$C/int/.ppn-gate.lock" ] && lock=left
    if [ "$rc" = 130 ] && [ "$lock" = removed ] && grep -q 'name="n2"' "$C/int.xml"; then
        ok "cli: battery given two SIGTERMs" "exit 130, lock removed, --junit stands"
    else
        wrong "cli: battery given two SIGTERMs" "exit $rc, lock $lock, junit $(grep -c '<testcase' "$C/int.xml" 2>/dev/null) cases"
    fi
fi

if want bench; then
    ST=$(cuda && echo 64 || echo 8)
    for f in "$SMOL" "$GEMMA"; do
        for n in 1 2 4; do
            expect "bench $(basename "$f") N=$n B=8" 0 bench --backend "$BE" --model "$f" --stages $n --arms batched --batch 8 --steps "$ST"
            grep -E '^  (eager|pipelined|batched)' "$WORK/last.out" | cut -c1-120 | sed 's/^ */  /' | tee -a "$SUM" >/dev/null
        done
        expect "bench $(basename "$f") prefill" 0 bench --backend "$BE" --model "$f" --stages 1 --arms prime \
            --chunk $(cuda && echo 64,128,512 || echo 8,16) --prompt-len $(cuda && echo 512 || echo 16) --steps 4
        grep -E 'prefill|prime' "$WORK/last.out" | cut -c1-120 | sed 's/^ */  /' | tee -a "$SUM" >/dev/null
        [ "$SMOL" = "$GEMMA" ] && break
    done
    if [ -n "${LLAMA_BIN:-}" ]; then
        if PREFILL_ROWS="smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k" MODELS="$MODELS" bash scripts/bench-vs-llamacpp.sh "$BIN" none "$OUT/vs-llamacpp" >>"$LOG" 2>&1; then
            ok "bench-vs-llamacpp.sh" "$OUT/vs-llamacpp/summary.txt"
        else
            wrong "bench-vs-llamacpp.sh" "see log.txt"
        fi
    else
        skip "bench-vs-llamacpp.sh" "no LLAMA_BIN"
    fi
fi

if want multi; then
    # The CPU backend has eight devices by default: the rehearsal runs every row.
    MG=$(cuda && echo "$NGPU" || echo 8)
    NS=$(for n in 4 8; do [ "$MG" -ge $n ] && echo $n; done)
    if [ -z "$NS" ]; then
        skip "multi" "$MG GPU(s): four or more needed"
    else
        big="$WORK/m/multi-q4km.gguf"
        if cuda; then
            synth "$big" --preset llama8b --layers 60 --quant q4_k_m
            synth "$WORK/m/l32.gguf" --preset llama8b --layers 32 --quant q4_k_m
            L32="$WORK/m/l32.gguf" PEER=peer
            NC=(--transport nccl --nccl-lib "${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}")
        else
            synth "$big" --arch llama --layers 8 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048 --quant q4_k_m
            L32=$big PEER=host NC=(--transport ipc)
        fi
        ARMS=(--arms eager,pipelined,batched,prime,verify,serve --batch 8 --requests 16 --prompt-len 16 --gen-len 16)
        for n in $NS; do
            D=(--stages "$n" --devices "$(seq -s, 0 $((n - 1)))")
            # (the CPU rehearsal's SMOL and GEMMA are one file: once)
            for f in $(printf '%s\n' "$SMOL" "$GEMMA" "$big" | awk '!seen[$0]++'); do
                for tr in default host; do
                    t=() want=$PEER
                    [ $tr = host ] && t=(--transport host) want=host
                    name="multi N=$n $(basename "$f") transport $tr"
                    gate "$name" 0 --model "$f" "${D[@]}" "${t[@]}" "${ARMS[@]}"
                    if o=$(placed "$(rec "$name")" "$want"); then ok "  each boundary $want, each stage's memory on its device"; else wrong "  placement" "$o"; fi
                done
            done
            soakrow "multi soak x20 N=$n pipelined" 20 --model "$SMOL" "${D[@]}" --arms pipelined --gen-len 32
            name="multi launch --procs $n ${NC[1]}"
            A=(--model "$SMOL" "${D[@]}" --arms eager,pipelined,batched --batch 8 --gen-len 16)
            expect "$name" 0 launch --procs "$n" --backend "$BE" -q "${NC[@]}" "${A[@]}" --receipt "$(rec "$name")"
            "$BIN" --backend "$BE" -q "${A[@]}" --receipt "$WORK/r/multi-1proc-$n.json" >>"$LOG" 2>&1
            if same_hashes "$(rec "$name")" "$WORK/r/multi-1proc-$n.json"; then ok "  the one-process gate's hashes"; else wrong "  the one-process gate's hashes"; fi
            soakrow "multi soak x20 --procs $n ${NC[1]}" 20 --procs "$n" "${NC[@]}" --model "$SMOL" "${D[@]}" --arms pipelined --gen-len 16
            expect "  multi --procs $n fault rx-no-wait (must FAIL)" 1 launch --procs "$n" --backend "$BE" -q "${NC[@]}" --model "$SMOL" "${D[@]}" --arms pipelined --gen-len 16 --fault rx-no-wait
            expect "multi bench N=$n pipelined" 0 bench --backend "$BE" --model "$L32" "${D[@]}" --arms pipelined --steps 64
            grep -E 'pipelined +\(' "$WORK/last.out" | sed 's/^ */  /' | tee -a "$SUM" >/dev/null
        done
        [ "${SOAK100:-1}" = 1 ] && soakrow "multi soak x100 N=4 pipelined" 100 --model "$SMOL" --stages 4 --devices 0,1,2,3 --arms pipelined --gen-len 32
    fi
fi

row "total" "$(($(date +%s) - T0)) s; overall $([ $BAD = 0 ] && echo ok || echo WRONG)"
tar -czf "$OUT/receipts.tar.gz" -C "$WORK" r 2>>"$LOG"
cat "$SUM"
exit $BAD
