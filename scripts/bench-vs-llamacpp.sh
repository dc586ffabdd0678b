#!/usr/bin/env bash
# ppn-gate against llama.cpp, side by side on the same GGUF files, in one call on the GPU
# machine (issue 12). From the repository root:
#
#   scripts/bench-vs-llamacpp.sh BIN TARBALL OUT
#
#   BIN      a prebuilt ppn-gate (no Rust needed here)
#   TARBALL  llama.cpp's source (shared/anchors/llama.cpp.tgz; carry it, it is not ours)
#   OUT      where the results go: vs-llamacpp.json, summary.txt, log.txt, raw.tar.gz
#
# What it does, in this order so that it fits one 10-minute call:
#  1. starts building llama-bench, llama-batched-bench and llama-parallel in the background (CUDA, sm_90,
#     the cmake recipe of shared/anchors/README.md; niced, two cores left to the benches);
#  2. meanwhile, per row (cheapest first): synthesizes the model into $WORK (real models come
#     from $MODELS) and runs `ppn-gate bench --arms eager --steps $STEPS` on it (eager: a
#     decode-only run) and `ppn-gate bench --arms batched --batch 8 --steps $STEPS` (batched
#     B=8: `--mma auto` picks its kernels by the run's flags, so a run that decodes 8 rows a
#     step takes the tensor cores where a decode-only one keeps FFMA, as llama-bench's tg128
#     and llama-batched-bench are runs of their own); with two GPUs also the full-depth 8B row pipelined over both
#     (`--stages 2 --devices 0,1 --arms pipelined`);
#  3. waits for the build, then runs on the same files `llama-bench -ngl 99 -p 0 -n 128 -r 5`
#     (eager, tg128) and `llama-batched-bench -ngl 99 -c 4096 -npp 16 -ntg 64 -npl 1,8` (S_TG
#     at B=8), each through its machine-readable output (-o json, --output-format jsonl);
#     and, on the SERVE_ROWS, `llama-parallel -np 8 -ns 64 -pps -n 64 --ignore-eos`
#     (continuous batching of 64 requests over 8 slots) beside `ppn-gate bench --arms serve`
#     (below: how the two workloads differ);
#     With ROUNDS=k, k - 1 more rounds of the eager and B=8 pair follow (each row's three
#     runs back to back), and those rows report the median of the rounds' ratios;
#  4. writes vs-llamacpp.json (schema ppn-gate.bench-compare/1) to OUT and to
#     $RECEIPTS/vs-llamacpp.json, and prints the table last.
#
# The serve rows (issue 29) compare continuous batching, and the workloads differ in ways
# the JSON's method says: ppn-gate's 64 requests draw prompts of 1..=32 seeded tokens and
# 0..=128 generated ones (means ~16.5 and 64), at most 8 rows a step (8 cache rows, prompt
# chunks of at most 8 positions), every row's logits read back (what the gate compares), no
# sampling (the tokens are fixed); llama-parallel's 64 requests are its built-in questions
# (~15-25 tokens each) after a shared system prompt of ~300 tokens already in the cache
# (-pps), each prompt prefilled whole in one batch beside the other slots' decode rows, up to
# 64 generated tokens (--ignore-eos; its "User:" reverse prompt may end one early), only the
# sampled rows' logits, with its default sampler. Both figures are generated tokens per
# second of the whole run (and requests per second); neither is steady-state B=8 decode,
# which the batched8 rows measure.
#
# Environment (all optional):
#   ROWS     the rows to run, space or comma separated, in the order given (default: all of
#            these, in this order): smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k
#            llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m;
#            also known, never by default: llama70b-l21-q4_k (the 70B shape 21 layers deep,
#            10.4 GB of Q4_K: ~2 minutes to synthesize, so it gets a call of its own, e.g.
#            ROWS=llama70b-l21-q4_k PREFILL_ROWS= SERVE_ROWS= RECEIPTS=receipts/bench-vs-llamacpp/deep70b);
#            and smollm2-shape-q4_1, gemma3-shape-q5_0, gemma3-shape-q4_k_m: synthetic files of the
#            two real models' shapes (scripts/shapes.sh smol, gem and gemq4km; the last is the
#            real Gemma file's own type mix, matrix for matrix), for a call that cannot carry the real
#            files (98 and 253 MB, several calls of chunks: shared DEVICE.md)
#   MODELS   directory of the real models (default models/); a row whose file is missing is
#            skipped, and the JSON says why
#   PIPE2    1: run the two-GPU pipelined row, 0: don't, auto (default): when 2+ GPUs answer
#   COMMIT   the commit to record (default: the one the binary was built from)
#   WORK     scratch directory for the build and the models (default /tmp/bench-vs-llamacpp)
#   JOBS     build jobs (default: cores - 2)
#   LLAMA_BIN  a directory that already holds llama-bench and llama-batched-bench: no build
#   LLAMA_WAIT_LOG  with LLAMA_BIN: the log of a build still running (started by an earlier
#            call), waited on before step 3 until it holds a line BUILD-OK
#   DEADLINE_S seconds after the start by which the JSON must be written (default 560, inside
#            the 10-minute call): every step runs under the time left, a row that no longer
#            fits is skipped with "out of time", and the build is stopped if still running
#   PPN_FLAGS  extra flags for every `ppn-gate bench` (e.g. --no-cache)
#   PREFILL_ROWS rows that also get a prefill512 row (default: llama8b-l8-q4_k smollm2-q4_1
#            gemma3-270m-q4_k_m;
#            empty: none): `ppn-gate bench --arms prime --chunk 512 --prompt-len 512`, one
#            stage, beside `llama-bench -p 512 -n 0` (pp512) on the same file (issue 13)
#   SERVE_ROWS rows that also get a serve row (default: smollm2-q4_1 llama8b-l8-q4_k; empty:
#            none): `ppn-gate bench --arms serve` beside llama-parallel on the same file
#   RECEIPTS directory the JSON is copied to (default receipts/bench-vs-llamacpp; empty: none)
#   ROUNDS   rounds of the eager and B=8 comparison (default 1): after the first (ppn-gate's
#            bench during the build, then llama.cpp's), ROUNDS - 1 more, each row's ppn-gate
#            bench, llama-bench and llama-batched-bench back to back; each eager and batched8
#            row then holds every round's pair (`rounds`), its ratio is the median of the
#            rounds' ratios (`ratio_min`, `ratio_max` beside it) and each side's figure its
#            median. Why: within one call on one H200 llama.cpp's tg128 moved 5 % and its B=8
#            10 % between rounds, ppn-gate's 3 % and 0.5 % (BENCH.md, issue 30 step 19): one
#            run of each side does not say on which side of a bar 2 % away a ratio is
#   DRY_RUN=1  a CPU rehearsal of the whole flow (parsing included): --backend cpu, the same
#            row names on small synthetic shapes (the real models as they are), short runs;
#            writes OUT only, never receipts/bench-vs-llamacpp (that file holds GPU figures only)
set -uo pipefail
. "$(dirname "$0")"/shapes.sh
BIN=${1:?usage: scripts/bench-vs-llamacpp.sh BIN TARBALL OUT}
TGZ=${2:?usage: scripts/bench-vs-llamacpp.sh BIN TARBALL OUT}
OUT=${3:?usage: scripts/bench-vs-llamacpp.sh BIN TARBALL OUT}
BIN=$(realpath "$BIN")
MODELS=${MODELS:-models}
WORK=${WORK:-/tmp/bench-vs-llamacpp}
DRY=${DRY_RUN:-0}
ALL_ROWS="smollm2-q4_1 gemma3-270m-q4_k_m llama8b-l8-q4_k llama8b-l8-q4_k_m llama8b-l8-q8_0 llama70b-l2-q4_k llama8b-l32-q4_k_m"
KNOWN_ROWS="$ALL_ROWS llama70b-l21-q4_k smollm2-shape-q4_1 gemma3-shape-q5_0 gemma3-shape-q4_k_m"
ROWS=${ROWS:-$ALL_ROWS}
ROWS=${ROWS//,/ }
CORES=$(nproc)
JOBS=${JOBS:-$((CORES > 4 ? CORES - 2 : 2))}
mkdir -p "$OUT" "$WORK/m" "$WORK/raw"
rm -f "$WORK"/raw/*
LOG="$OUT/log.txt"
: >"$LOG"
# Progress goes to stderr (and the log): stdout of helpers is their result.
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }
T0=$(date +%s)
DEADLINE=${DEADLINE_S:-560}
# left: seconds until the deadline, less a margin for writing the JSON.
left() { echo $((DEADLINE - 15 - ($(date +%s) - T0))); }
# within SECONDS_MIN CMD...: CMD under the time left; refuses (status 124) below SECONDS_MIN.
within() {
    local min=$1 l
    shift
    l=$(left)
    [ "$l" -ge "$min" ] || return 124
    timeout "$l" "$@"
}

for r in $ROWS; do
    [[ " $KNOWN_ROWS " == *" $r "* ]] || { echo "ROWS: unknown row '$r' (known: $KNOWN_ROWS)" >&2; exit 2; }
done
[ -x "$BIN" ] || { echo "BIN $BIN: not an executable" >&2; exit 2; }
ROUNDS=${ROUNDS:-1}
[[ "$ROUNDS" =~ ^[1-9][0-9]{0,2}$ ]] || { echo "ROUNDS: '$ROUNDS' is not a whole number from 1 to 999" >&2; exit 2; }
[ -n "${LLAMA_BIN:-}" ] || [ -f "$TGZ" ] || { echo "TARBALL $TGZ: no such file" >&2; exit 2; }

if [ "$DRY" = 1 ]; then
    BACKEND=cpu STEPS=${STEPS:-16} TG_N=16 TG_R=2 BB_NTG=16 NGL=0
    CMAKE_FLAGS="-DGGML_OPENMP=OFF"
    NGPU=0
else
    BACKEND=cuda STEPS=${STEPS:-128} TG_N=128 TG_R=5 BB_NTG=64 NGL=99
    CMAKE_FLAGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
    NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
fi
PIPE2=${PIPE2:-auto}
[ "$PIPE2" = auto ] && PIPE2=$([ "$NGPU" -ge 2 ] && echo 1 || echo 0)
# The two-GPU run only has a row to run on if the full-depth row is selected.
[[ " $ROWS " == *" llama8b-l32-q4_k_m "* ]] || PIPE2=0

# ---- 1. llama.cpp, in the background --------------------------------------------------
if [ -n "${LLAMA_BIN:-}" ]; then
    LB="$LLAMA_BIN"
    log "llama.cpp: prebuilt binaries in $LB"
    BUILD_PID=
else
    LB="$WORK/lc/llama.cpp/build/bin"
    rm -rf "$WORK/lc"
    mkdir -p "$WORK/lc"
    # Its own session, so that the whole build can be stopped at the deadline or on exit.
    setsid bash -c '
        tar xzf "$0" -C "$1/lc" &&
            cd "$1/lc/llama.cpp" &&
            cmake -B build $2 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
                -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release &&
            nice -n 19 cmake --build build -j"$3" --target llama-bench llama-batched-bench llama-parallel
    ' "$TGZ" "$WORK" "$CMAKE_FLAGS" "$JOBS" >"$WORK/raw/llama-build.log" 2>&1 &
    BUILD_PID=$!
    trap 'kill -- -"$BUILD_PID" 2>/dev/null' EXIT
    log "llama.cpp: building in the background (pid $BUILD_PID, -j$JOBS, $CMAKE_FLAGS)"
fi

# ---- 2. the models and ppn-gate's figures ---------------------------------------------
# model_file ROW: the GGUF path of a row (synthesized on first use); empty + reason on stderr
# when a real model is missing.
# synth_flags ROW: the synth flags of a synthetic row. The rehearsal keeps each row's preset
# and quant but shrinks the shape (explicit flags override the preset's).
synth_flags() {
    local preset layers quant
    case $1 in
    llama8b-l8-q4_k) preset=llama8b layers=8 quant=q4_k ;;
    llama8b-l8-q4_k_m) preset=llama8b layers=8 quant=q4_k_m ;;
    llama8b-l8-q8_0) preset=llama8b layers=8 quant=q8_0 ;;
    llama70b-l2-q4_k) preset=llama70b layers=2 quant=q4_k ;;
    llama70b-l21-q4_k) preset=llama70b layers=21 quant=q4_k ;;
    llama8b-l32-q4_k_m) preset=llama8b layers=32 quant=q4_k_m ;;
    smollm2-shape-q4_1 | gemma3-shape-q5_0 | gemma3-shape-q4_k_m)
        # The real models' shapes, whole (the rehearsal: a 4-layer slice of each, narrower).
        local s=gem
        [ "$1" = smollm2-shape-q4_1 ] && s=smol
        [ "$1" = gemma3-shape-q4_k_m ] && s=gemq4km
        if [ "$DRY" = 1 ]; then
            echo "${SHAPES[$s]}" | sed -E 's/--layers [0-9]+/--layers 4/; s/--vocab [0-9]+/--vocab 4096/'
        else
            echo "${SHAPES[$s]}"
        fi
        return
        ;;
    esac
    if [ "$DRY" = 1 ]; then
        echo "--preset $preset --quant $quant --layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 512 --vocab 2048"
    else
        echo "--preset $preset --layers $layers --quant $quant"
    fi
}
model_file() {
    local row=$1
    case $row in
    smollm2-q4_1) f="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    gemma3-270m-q4_k_m) f="$MODELS/gemma-3-270m-q4_k_m.gguf" ;;
    *)
        f="$WORK/m/$row.gguf"
        local flags
        flags=$(synth_flags "$row")
        if [ ! -f "$f" ] || [ "$(cat "$f.flags" 2>/dev/null)" != "$flags" ]; then
            log "synth $row: $flags"
            # shellcheck disable=SC2086
            within 30 "$BIN" synth $flags -o "$f" >>"$LOG" 2>&1 || {
                echo "synth failed or out of time (exit $?, log.txt)" >"$WORK/raw/$row.skip"
                rm -f "$f"
                return 1
            }
            echo "$flags" >"$f.flags"
        fi
        ;;
    esac
    [ -f "$f" ] || { echo "no file $f" >"$WORK/raw/$row.skip"; return 1; }
    echo "$f"
}

# ppn_pair ROW FILE SFX: ppn-gate's eager figure of a row (a decode-only run) into
# raw/ROW.ppeSFX.json and its B=8 figure (a run with the batched arm, --batch 8) into
# raw/ROW.ppnSFX.json; SFX is "" for the first round, .rN for round N (ROUNDS).
ppn_pair() {
    log "ppn-gate bench $1$3 (eager)"
    within 20 "$BIN" bench --backend "$BACKEND" --model "$2" --stages 1 --arms eager \
        --steps "$STEPS" ${PPN_FLAGS:-} --receipt "$WORK/raw/$1.ppe$3.json" >>"$LOG" 2>&1 ||
        log "$1: ppn-gate bench$3 (eager) failed (exit $?, see log.txt)"
    log "ppn-gate bench $1$3 (B=8)"
    within 20 "$BIN" bench --backend "$BACKEND" --model "$2" --stages 1 --arms batched --batch 8 \
        --steps "$STEPS" ${PPN_FLAGS:-} --receipt "$WORK/raw/$1.ppn$3.json" >>"$LOG" 2>&1 ||
        log "$1: ppn-gate bench$3 failed (exit $?, see log.txt)"
}
# llama_pair ROW FILE SFX: llama.cpp's, llama-bench tg$TG_N into raw/ROW.lbSFX.json and
# llama-batched-bench into raw/ROW.bbSFX.txt (its results on stdout, its log on stderr in
# .bb.err: apart, so that no log line can split a result line).
llama_pair() {
    log "llama-bench $1$3"
    within 10 "$LB/llama-bench" -m "$2" -ngl "$NGL" -p 0 -n "$TG_N" -r "$TG_R" -o json \
        >"$WORK/raw/$1.lb$3.json" 2>>"$WORK/raw/$1.lb.err" ||
        log "$1: llama-bench$3 failed (raw/$1.lb.err)"
    log "llama-batched-bench $1$3"
    within 10 "$LB/llama-batched-bench" -m "$2" -ngl "$NGL" -c 4096 -npp 16 -ntg "$BB_NTG" -npl 1,8 \
        --output-format jsonl >"$WORK/raw/$1.bb$3.txt" 2>>"$WORK/raw/$1.bb.err" ||
        log "$1: llama-batched-bench$3 failed (raw/$1.bb.err)"
}

declare -A FILE
for row in $ROWS; do
    f=$(model_file "$row") || { log "$row: skipped: $(cat "$WORK/raw/$row.skip")"; continue; }
    FILE[$row]=$f
    ppn_pair "$row" "$f" ""
done
if [ "$PIPE2" = 1 ] && [ -n "${FILE[llama8b-l32-q4_k_m]:-}" ]; then
    log "ppn-gate bench llama8b-l32-q4_k_m pipelined over devices 0,1"
    within 20 "$BIN" bench --backend "$BACKEND" --model "${FILE[llama8b-l32-q4_k_m]}" --stages 2 \
        --devices 0,1 --arms pipelined --steps "$STEPS" ${PPN_FLAGS:-} \
        --receipt "$WORK/raw/llama8b-l32-q4_k_m.pipe2.json" >>"$LOG" 2>&1 ||
        log "pipelined 2-GPU bench failed (exit $?, see log.txt)"
fi

PREFILL_ROWS=${PREFILL_ROWS-llama8b-l8-q4_k smollm2-q4_1 gemma3-270m-q4_k_m}
PP_N=512
[ "$DRY" = 1 ] && PP_N=64
for row in $PREFILL_ROWS; do
    f=${FILE[$row]:-}
    [ -n "$f" ] || continue
    log "ppn-gate bench $row prefill $PP_N"
    within 20 "$BIN" bench --backend "$BACKEND" --model "$f" --stages 1 --arms prime --chunk "$PP_N" \
        --prompt-len "$PP_N" --steps 16 ${PPN_FLAGS:-} --receipt "$WORK/raw/$row.pp.json" >>"$LOG" 2>&1 ||
        log "$row: ppn-gate prefill bench failed (exit $?, see log.txt)"
done

SERVE_ROWS=${SERVE_ROWS-smollm2-q4_1 llama8b-l8-q4_k}
SV_FLAGS="--requests 64 --max-rows 8 --prefill-chunk 8 --prompt-len 32 --gen-len 128"
LP_FLAGS="-np 8 -ns 64 -pps -n 64 --ignore-eos -c 32768 --seed 1"
[ "$DRY" = 1 ] && SV_FLAGS="--requests 16 --max-rows 4 --prefill-chunk 4 --prompt-len 16 --gen-len 32" &&
    LP_FLAGS="-np 4 -ns 16 -pps -n 16 --ignore-eos -c 4096 --seed 1"
for row in $SERVE_ROWS; do
    f=${FILE[$row]:-}
    [ -n "$f" ] || continue
    log "ppn-gate bench $row serve"
    # shellcheck disable=SC2086
    within 20 "$BIN" bench --backend "$BACKEND" --model "$f" --stages 1 --arms serve $SV_FLAGS \
        --steps 16 ${PPN_FLAGS:-} --receipt "$WORK/raw/$row.serve.json" >>"$LOG" 2>&1 ||
        log "$row: ppn-gate serve bench failed (exit $?, see log.txt)"
done

# ---- 3. llama.cpp on the same files ---------------------------------------------------
if [ -n "$BUILD_PID" ]; then
    log "waiting for the llama.cpp build"
    while kill -0 "$BUILD_PID" 2>/dev/null && [ "$(left)" -gt 30 ]; do sleep 2; done
    if kill -0 "$BUILD_PID" 2>/dev/null; then
        log "llama.cpp build still running at the deadline: stopped"
        kill -- -"$BUILD_PID" 2>/dev/null
    fi
    if ! wait "$BUILD_PID"; then
        log "llama.cpp build FAILED; its log:"
        tail -30 "$WORK/raw/llama-build.log" | tee -a "$LOG" >&2
    fi
    log "llama.cpp build ended after $(($(date +%s) - T0)) s"
elif [ -n "${LLAMA_WAIT_LOG:-}" ]; then
    # A build an earlier call started (it outlives calls; DEVICE.md): done when its log
    # holds BUILD-OK.
    log "waiting for the llama.cpp build of $LLAMA_WAIT_LOG"
    while ! grep -q BUILD-OK "$LLAMA_WAIT_LOG" 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
    grep -q BUILD-OK "$LLAMA_WAIT_LOG" 2>/dev/null || log "llama.cpp build not finished at the deadline"
fi
for row in $ROWS; do
    f=${FILE[$row]:-}
    [ -n "$f" ] || continue
    if [ ! -x "$LB/llama-bench" ]; then
        echo "llama.cpp was not built (raw/llama-build.log)" >"$WORK/raw/$row.lcskip"
        continue
    fi
    if [ "$(left)" -lt 20 ]; then
        echo "out of time" >"$WORK/raw/$row.lcskip"
        continue
    fi
    llama_pair "$row" "$f" ""
    if [ -f "$WORK/raw/$row.serve.json" ]; then
        log "llama-parallel $row"
        # shellcheck disable=SC2086
        within 10 "$LB/llama-parallel" -m "$f" -ngl "$NGL" $LP_FLAGS \
            >"$WORK/raw/$row.par.txt" 2>&1 || log "$row: llama-parallel failed (raw/$row.par.txt)"
    fi
    if [ -f "$WORK/raw/$row.pp.json" ]; then
        log "llama-bench $row pp$PP_N"
        within 10 "$LB/llama-bench" -m "$f" -ngl "$NGL" -p "$PP_N" -n 0 -r "$TG_R" -o json \
            >"$WORK/raw/$row.lbpp.json" 2>>"$WORK/raw/$row.lb.err" ||
            log "$row: llama-bench pp failed (raw/$row.lb.err)"
    fi
done

# ---- 3b. more rounds of the eager and B=8 pair (ROUNDS) --------------------------------
# Round i's files carry .r$i; the first round's are the ones above. Each row's three runs
# back to back, so that a drift of the machine between rounds lands on both sides.
for ((i = 2; i <= ROUNDS; i++)); do
    [ -x "$LB/llama-bench" ] || break
    for row in $ROWS; do
        f=${FILE[$row]:-}
        [ -n "$f" ] || continue
        if [ "$(left)" -lt 40 ]; then
            log "round $i: out of time, rounds stop here"
            break 2
        fi
        ppn_pair "$row" "$f" ".r$i"
        llama_pair "$row" "$f" ".r$i"
    done
done

# ---- 4. the comparison ----------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    MACHINE="$(uname -m), $CORES cores, cpu backend (dry run)"
else
    MACHINE="$NGPU x $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | sed 's/, / (driver /;s/$/)/'), $CORES cores"
fi
DEST="$OUT/vs-llamacpp.json"
ROWS="$ROWS" RAW="$WORK/raw" DEST="$DEST" MACHINE="$MACHINE" DRY="$DRY" TG_N="$TG_N" \
    TG_R="$TG_R" NGL="$NGL" BB_NTG="$BB_NTG" STEPS="$STEPS" COMMIT="${COMMIT:-}" PP_N="$PP_N" ROUNDS="$ROUNDS" \
    SV_FLAGS="$SV_FLAGS" LP_FLAGS="$LP_FLAGS" \
    python3 - <<'PY' | tee "$OUT/summary.txt"
import json, os, datetime

raw = os.environ["RAW"]
rows_wanted = os.environ["ROWS"].split()
tg_n, bb_ntg, ngl = int(os.environ["TG_N"]), int(os.environ["BB_NTG"]), os.environ["NGL"]


def read(path):
    try:
        # errors="replace": llama-parallel's log echoes a synthetic model's random bytes.
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def llama_bench_stats(text, n_prompt, n_gen):
    """(avg_ts, stddev_ts) of the (n_prompt, n_gen) test in llama-bench's -o json array."""
    try:
        tests = json.loads(text)
    except (TypeError, ValueError):
        return None, None
    for t in tests if isinstance(tests, list) else []:
        if isinstance(t, dict) and t.get("n_prompt") == n_prompt and t.get("n_gen") == n_gen:
            try:
                sd = t.get("stddev_ts")
                return float(t["avg_ts"]), (float(sd) if sd is not None else None)
            except (KeyError, TypeError, ValueError):
                return None, None
    return None, None


def llama_bench_ts(text, n_prompt, n_gen):
    """avg_ts of the (n_prompt, n_gen) test in llama-bench's -o json array."""
    return llama_bench_stats(text, n_prompt, n_gen)[0]


def over_rounds(pairs):
    """The headline of one path over rounds: pairs [(ppn, llama.cpp, extra)], either side
    None where its run failed. The ratio is the median of the complete rounds' ratios, each
    side's figure its median over those rounds; with no complete round, round 1's figures
    and no ratio (ppn-gate's alone when llama.cpp did not run)."""
    import statistics
    full = [(m, t) for m, t, _ in pairs if m and t]
    rounds = [dict({"ppn_tok_s": m, "llamacpp_tok_s": t, "ratio": (m / t) if m and t else None}, **x)
              for m, t, x in pairs]
    if not full:
        m, t, _ = pairs[0]
        return {"ppn_tok_s": m, "llamacpp_tok_s": t, "ratio": None, "rounds": rounds}
    ratios = [m / t for m, t in full]
    return {
        "ppn_tok_s": statistics.median(m for m, _ in full),
        "llamacpp_tok_s": statistics.median(t for _, t in full),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rounds": rounds,
    }


pp_n = int(os.environ["PP_N"])


def batched_bench_tg(text, pl):
    """speed_tg (S_TG) of the run with pl parallel sequences, from --output-format jsonl."""
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("pl") == pl and d.get("tg") == bb_ntg:
            return float(d["speed_tg"])
    return None


def parallel_totals(text):
    """(requests, prompt tokens, generated tokens, gen tok/s) from llama-parallel's summary:
    "n_sequences = N" and "Total gen tokens: G, speed: S t/s"."""
    import re
    t = text or ""
    ns = re.findall(r"n_sequences = (\d+)", t)
    pr = re.search(r"Total prompt tokens:\s*(\d+), speed:\s*([\d.]+)", t)
    gen = re.search(r"Total gen tokens:\s*(\d+), speed:\s*([\d.]+)", t)
    if not (ns and gen):
        return None
    return int(ns[-1]), int(pr.group(1)) if pr else None, int(gen.group(1)), float(gen.group(2))


rows, skipped, commit = [], [], os.environ.get("COMMIT") or None
for name in rows_wanted:
    why = read(f"{raw}/{name}.skip")
    if why:
        skipped.append({"model": name, "reason": why.strip()})
        continue
    ppn_text = read(f"{raw}/{name}.ppn.json")
    ppn = json.loads(ppn_text) if ppn_text else None
    if ppn is None:
        skipped.append({"model": name, "reason": "ppn-gate bench wrote no receipt (log.txt)"})
    commit = commit or (ppn or {}).get("tool", {}).get("git_commit")
    lcskip = read(f"{raw}/{name}.lcskip")
    if lcskip:
        skipped.append({"model": name, "reason": "llama.cpp: " + lcskip.strip()})
    wb = ppn["model"]["weight_bytes"] if ppn else None
    floor = ppn.get("floor_tok_s") if ppn else None
    # Every round's pair (round 1: the files without a suffix; ROUNDS in the script).
    eager, batched = [], []
    bb1 = None
    ppe = None
    for i in range(1, int(os.environ.get("ROUNDS", "1")) + 1):
        sfx = "" if i == 1 else f".r{i}"
        p_text = ppn_text if i == 1 else read(f"{raw}/{name}.ppn{sfx}.json")
        p = json.loads(p_text) if p_text else None
        # The eager figure: the decode-only run's (.ppe) alone. Where that run failed the
        # round has no eager figure: the B=8 run's eager arm ran other kernels (its own
        # field, ppn_eager_same_run_tok_s), so it never stands in.
        e_text = read(f"{raw}/{name}.ppe{sfx}.json")
        e = json.loads(e_text) if e_text else None
        if i == 1:
            ppe = e
        lb_text = read(f"{raw}/{name}.lb{sfx}.json")
        if i > 1 and p is None and lb_text is None:
            continue  # a round that did not run (out of time)
        lb, lb_sd = llama_bench_stats(lb_text, 0, tg_n)
        # Its results are on stdout (.bb.txt), its log on stderr (.bb.err): kept apart so
        # that no log line can split a result line.
        bb_text = read(f"{raw}/{name}.bb{sfx}.txt")
        if i == 1:
            bb1 = batched_bench_tg(bb_text, 1)
        eager.append((e and e["tok_s"]["eager"], lb, {"llamacpp_sd_tok_s": lb_sd}))
        # The B=8 run's own eager arm beside it: what its kernels cost one row.
        batched.append((p and p["tok_s"]["batched"], batched_bench_tg(bb_text, 8),
                        {"ppn_eager_same_run_tok_s": p and p["tok_s"]["eager"]}))
    if ppe is None:
        skipped.append({"model": name, "reason": "ppn-gate eager bench wrote no receipt (log.txt)"})
    for path, pairs, extra, run in [
        ("eager", eager, {}, ppe),
        ("batched8", batched, {"llamacpp_b1_tok_s": bb1}, ppn),
    ]:
        row = {"model": name, "weight_bytes": wb, "path": path}
        row.update(over_rounds(pairs))
        row["floor_tok_s"] = floor
        row.update(extra)
        # Which matvec kernels ran (the receipt's backend.mma: --mma auto's choice and why).
        row["ppn_kernels"] = (run or {}).get("backend", {}).get("mma")
        rows.append(row)
    pp_text = read(f"{raw}/{name}.pp.json")
    if pp_text:
        pp = json.loads(pp_text)
        # The ratio's figure is the prefill with the last position's logits (what pp512
        # computes); the prime arm's walk, every position's logits, is recorded beside it.
        rate = next((r for r in pp.get("prefill", []) if r["chunk"] == pp_n), {})
        mine = rate.get("last_one_stage_tok_s")
        every = rate.get("one_stage_tok_s")
        theirs = llama_bench_ts(read(f"{raw}/{name}.lbpp.json"), pp_n, 0)
        rows.append({
            "model": name,
            "weight_bytes": pp["model"]["weight_bytes"],
            "path": f"prefill{pp_n}",
            "ppn_tok_s": mine,
            "llamacpp_tok_s": theirs,
            "ratio": (mine / theirs) if mine and theirs else None,
            "floor_tok_s": None,
            "ppn_every_logits_tok_s": every,
            "ppn_kernels": pp.get("backend", {}).get("mma"),
        })
    sv_text = read(f"{raw}/{name}.serve.json")
    if sv_text:
        sv = json.loads(sv_text)["serve"]
        lp = parallel_totals(read(f"{raw}/{name}.par.txt"))
        lp_req_s = None
        if lp and lp[3] > 0:
            # Its wall time is generated tokens / their rate (both over the whole run).
            lp_req_s = lp[0] / (lp[2] / lp[3])
        rows.append({
            "model": name,
            "weight_bytes": wb,
            "path": "serve",
            "ppn_tok_s": sv["generated_tok_s"],
            "llamacpp_tok_s": lp[3] if lp else None,
            "ratio": (sv["generated_tok_s"] / lp[3]) if lp and lp[3] else None,
            "floor_tok_s": None,
            "ppn_req_s": sv["requests_per_s"],
            "llamacpp_req_s": lp_req_s,
            "ppn_serve": sv,
            "llamacpp_parallel": {"requests": lp[0], "prompt_tokens": lp[1],
                                  "generated_tokens": lp[2], "gen_tok_s": lp[3]} if lp else None,
            "ppn_kernels": json.loads(sv_text).get("backend", {}).get("mma"),
        })
        if not lp:
            skipped.append({"model": name, "reason": "llama-parallel: no summary (raw/" + name + ".par.txt)"})
    pipe_text = read(f"{raw}/{name}.pipe2.json")
    if pipe_text:
        p2 = json.loads(pipe_text)
        pt, pe = p2["tok_s"]["pipelined"], p2["tok_s"]["eager"]
        rows.append({
            "model": name,
            "weight_bytes": p2["model"]["weight_bytes"],
            "path": "pipelined-2gpu",
            "ppn_tok_s": pt,
            "llamacpp_tok_s": None,
            "ratio": None,
            "floor_tok_s": floor,
            # Against the one-GPU eager figure of the same file (the issue's bar: >= 1.8x),
            # and the same run's two-stage eager.
            "x_ppn_eager_1gpu": pt / ppe["tok_s"]["eager"] if ppe else None,
            "x_ppn_eager_2stage": pt / pe,
            "placement": p2["config"]["placement"],
        })

out = {
    "schema": "ppn-gate.bench-compare/1",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": os.environ["MACHINE"],
    "commit": commit,
    "dry_run": os.environ["DRY"] == "1",
    "method": {
        "ppn": f"ppn-gate bench --model FILE --stages 1 --arms eager --steps {os.environ['STEPS']}"
               " (eager: a decode-only run) and ppn-gate bench --model FILE --stages 1 --arms batched"
               f" --batch 8 --steps {os.environ['STEPS']} (batched B=8 aggregate; its eager arm is"
               " ppn_eager_same_run_tok_s): --mma auto picks each run's kernels by its flags"
               " (ppn_kernels)",
        "llamacpp_eager": f"llama-bench -m FILE -ngl {ngl} -p 0 -n {tg_n} -r {os.environ['TG_R']}"
                          " -o json (avg_ts)",
        "llamacpp_batched8": f"llama-batched-bench -m FILE -ngl {ngl} -c 4096 -npp 16 -ntg {bb_ntg}"
                             " -npl 1,8 --output-format jsonl (speed_tg at pl 8)",
        "ppn_prefill": f"ppn-gate bench --model FILE --stages 1 --arms prime --chunk {pp_n}"
                       f" --prompt-len {pp_n} (last_one_stage_tok_s: the last position's logits,"
                       " as pp512; ppn_every_logits_tok_s: one_stage_tok_s, every position's)",
        "llamacpp_prefill": f"llama-bench -m FILE -ngl {ngl} -p {pp_n} -n 0 -o json (avg_ts)",
        "ppn_serve": f"ppn-gate bench --model FILE --stages 1 --arms serve {os.environ['SV_FLAGS']}"
                     " (generated tokens and requests per second of the schedule's walk, every"
                     " row's logits read back, no sampling)",
        "llamacpp_serve": f"llama-parallel -m FILE -ngl {ngl} {os.environ['LP_FLAGS']} (Total gen"
                          " tokens speed; requests = n_sequences over gen tokens / speed): its"
                          " built-in questions after a cached ~300-token system prompt, whole"
                          " prompts per batch, its default sampler",
        "floor": "device bandwidth measured by ppn-gate bench in the same run / weight_bytes",
        "rounds": f"{os.environ.get('ROUNDS', '1')} round(s) of the eager and batched8 pairs, each"
                  " row's ppn-gate bench, llama-bench and llama-batched-bench back to back (round"
                  " 1: ppn-gate's during the llama.cpp build); a row's ratio is the median of its"
                  " rounds' ratios (ratio_min, ratio_max), each side's figure its median",
    },
    "rows": rows,
    "skipped": skipped,
}
with open(os.environ["DEST"], "w") as f:
    f.write(json.dumps(out, indent=2) + "\n")

fmt = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"
print(f"{'model':<22} {'path':<15} {'weight MB':>9} {'ppn tok/s':>10} {'llama.cpp':>10} {'ratio':>6} {'floor':>8}")
for r in rows:
    wb = r["weight_bytes"]
    ratio = r["ratio"] if r["ratio"] is not None else r.get("x_ppn_eager_1gpu")
    tag = "" if r["ratio"] is not None or ratio is None else " (x eager)"
    print(f"{r['model']:<22} {r['path']:<15} {fmt(wb and wb / 1e6, 0):>9} {fmt(r['ppn_tok_s']):>10}"
          f" {fmt(r['llamacpp_tok_s']):>10} {fmt(ratio, 2):>6} {fmt(r['floor_tok_s'], 0):>8}{tag}"
          f"  {(r.get('ppn_kernels') or '').split(' (')[0]}"
          + (f"  [{r['ratio_min']:.2f}-{r['ratio_max']:.2f} over {full} rounds]"
             if (full := sum(1 for x in r.get("rounds", []) if x["ratio"])) > 1 else ""))
    if r["path"] == "serve":
        rr = (r["ppn_req_s"] / r["llamacpp_req_s"]) if r.get("llamacpp_req_s") else None
        print(f"{'':<22} {'serve req/s':<15} {'':>9} {fmt(r['ppn_req_s'], 2):>10}"
              f" {fmt(r.get('llamacpp_req_s'), 2):>10} {fmt(rr, 2):>6}")
for s in skipped:
    print(f"skipped {s['model']}: {s['reason']}")
print(f"commit {commit}; {out['machine']}; {out['date']}")
PY
RECEIPTS=${RECEIPTS-receipts/bench-vs-llamacpp}
if [ "$DRY" != 1 ] && [ -s "$DEST" ] && [ -n "$RECEIPTS" ]; then
    mkdir -p "$RECEIPTS"
    cp "$DEST" "$RECEIPTS/vs-llamacpp.json"
fi
tar czf "$OUT/raw.tar.gz" -C "$WORK" raw 2>/dev/null
log "done in $(($(date +%s) - T0)) s"
