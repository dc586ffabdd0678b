#!/usr/bin/env bash
# The serve arm's CPU bar (issue 29), on inputs the repository's tests do not contain:
#
#   scripts/serve-cpu-bar.sh BIN OUT [MODELS]
#
# What it proves, on the cpu backend, each line of OUT/summary.txt ok or WRONG:
#  1. serve PASSes on seeded schedules of several hundred requests over models synthesized
#     here with seeds and shapes no test uses (llama, qwen2, qwen3, gemma3; q8_0, q4_k, q5_0,
#     q4_k_m, f16), and on the real SmolLM2 and Gemma-3 files when MODELS has them, at
#     N = 1..8 stages, --max-rows from 1 to 64, prefill chunks 1..M, windows 1..6, uneven
#     splits: every position of every request bit-identical to that request run alone;
#  2. each serve fault FAILs 20/20 where it opens (`soak --runs 20`, exit 1, every run FAIL):
#     stale-cache (a reused cache row keeps its previous request's length) and
#     row-count-order (a row's matvec order depends on its step's row count), on a model
#     and a placement no selftest recipe uses;
#  3. the gate refuses each fault where it cannot open (exit 2 naming why).
# Every gate's receipt and every soak's summary stays under OUT (not committed: the
# summary is the evidence).
set -uo pipefail
BIN=$(realpath "${1:?usage: scripts/serve-cpu-bar.sh BIN OUT [MODELS]}")
OUT=${2:?usage: scripts/serve-cpu-bar.sh BIN OUT [MODELS]}
MODELS=${3:-models}
mkdir -p "$OUT/m" "$OUT/r"
SUM="$OUT/summary.txt"
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
say "# serve CPU bar: $("$BIN" --version 2>/dev/null | head -1), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores"

# synth NAME FLAGS...: a model of ours nobody committed.
synth() {
    local n=$1
    shift
    [ -f "$OUT/m/$n.gguf" ] || "$BIN" synth "$@" -o "$OUT/m/$n.gguf" >/dev/null || {
        say "WRONG synth $n $*"
        return 1
    }
}
synth qwen3-a --arch qwen3 --layers 8 --embd 256 --heads 4 --kv-heads 2 --ff 768 --vocab 1024 --quant q4_k --seed 4101
synth qwen2-b --arch qwen2 --layers 5 --embd 192 --heads 6 --kv-heads 2 --ff 384 --vocab 1500 --quant q5_0 --seed 977
synth gemma3-c --arch gemma3 --layers 6 --embd 256 --heads 4 --kv-heads 1 --ff 512 --vocab 2048 --quant q4_k_m --seed 31337
synth llama-d --arch llama --layers 16 --embd 96 --heads 3 --kv-heads 3 --ff 256 --vocab 777 --quant f16 --seed 2929 --tied
synth llama-e --arch llama --layers 9 --embd 256 --heads 8 --kv-heads 2 --ff 640 --vocab 3000 --quant q8_0 --seed 555 --rope-freqs

# gate ID MODEL FLAGS...: one serve gate that must PASS.
n_ok=0 n_bad=0
gate() {
    local id=$1 m=$2
    shift 2
    local t0 out rc
    t0=$(date +%s.%N)
    out=$("$BIN" --backend cpu --model "$m" --arms serve "$@" --receipt "$OUT/r/$id.json" -q 2>&1)
    rc=$?
    local dt
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    local reqs
    reqs=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['arms'][0]['serve']; print(len(a['requests']), len(a['schedule']), max(len(s['rows']) for s in a['schedule']), a['cache_rows'])" "$OUT/r/$id.json" 2>/dev/null)
    if [ $rc -eq 0 ] && [[ $out == *"serve      PASS"* ]]; then
        n_ok=$((n_ok + 1))
        say "ok    $id: $(basename "$m") $* -> ${out##*serve      } (requests, steps, widest step, cache rows: $reqs) ${dt%.*}s"
    else
        n_bad=$((n_bad + 1))
        say "WRONG $id: $(basename "$m") $* -> exit $rc: $out"
    fi
}

gate s01 "$OUT/m/qwen3-a.gguf" --stages 8 --requests 300 --max-rows 64 --prefill-chunk 17 --prompt-len 20 --gen-len 12 --window 5 --seed 11
gate s02 "$OUT/m/qwen2-b.gguf" --stages 5 --requests 400 --max-rows 1 --prefill-chunk 1 --prompt-len 6 --gen-len 6 --window 2 --seed 12
gate s03 "$OUT/m/gemma3-c.gguf" --stages 3 --splits 1,5 --requests 250 --max-rows 33 --prefill-chunk 33 --prompt-len 40 --gen-len 30 --window 6 --seed 13
gate s04 "$OUT/m/llama-d.gguf" --stages 8 --splits 1,2,3,9,10,11,15 --requests 500 --max-rows 7 --prefill-chunk 3 --prompt-len 9 --gen-len 9 --window 1 --seed 14
gate s05 "$OUT/m/llama-e.gguf" --stages 4 --requests 300 --max-rows 16 --prefill-chunk 5 --prompt-len 25 --gen-len 20 --window 4 --seed 15
gate s06 "$OUT/m/qwen3-a.gguf" --stages 2 --requests 200 --max-rows 2 --prefill-chunk 2 --prompt-len 3 --gen-len 40 --window 3 --seed 16
gate s07 "$OUT/m/gemma3-c.gguf" --stages 6 --requests 300 --max-rows 64 --prefill-chunk 1 --prompt-len 12 --gen-len 0 --window 2 --seed 17
gate s08 "$OUT/m/llama-e.gguf" --stages 1 --requests 350 --max-rows 48 --prefill-chunk 48 --prompt-len 60 --gen-len 4 --window 3 --seed 18
gate s09 "$OUT/m/qwen2-b.gguf" --stages 5 --requests 300 --max-rows 24 --prefill-chunk 11 --prompt-len 14 --gen-len 14 --window 4 --cpu-devices 3 --devices 0,1,2,0,1 --seed 19
gate s10 "$OUT/m/llama-d.gguf" --stages 7 --requests 200 --max-rows 9 --prefill-chunk 4 --prompt-len 8 --gen-len 8 --window 3 --transport host --seed 20
for f in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    if [ -f "$MODELS/$f" ]; then
        gate "real-${f%%-*}-n4" "$MODELS/$f" --stages 4 --requests 200 --max-rows 32 --prefill-chunk 8 --prompt-len 12 --gen-len 10 --window 3 --seed 21
        gate "real-${f%%-*}-n8" "$MODELS/$f" --stages 8 --requests 120 --max-rows 5 --prefill-chunk 5 --prompt-len 6 --gen-len 8 --window 2 --seed 22
    else
        say "skip  $f: not in $MODELS (scripts/fetch-models.sh)"
    fi
done

# soak20 ID FLAGS...: the fault's gate x20, every run a FAIL (exit 1, 20 FAIL in the summary).
soak20() {
    local id=$1
    shift
    "$BIN" soak --runs 20 --out "$OUT/$id" --backend cpu "$@" >"$OUT/$id.txt" 2>&1
    local rc=$?
    local fails
    fails=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sum(1 for x in s['runs'] if x['verdict']=='FAIL'))" "$OUT/$id/summary.json" 2>/dev/null)
    local line
    line=$(grep -m1 -E "^[0-9]+/20 (FAIL|PASS)|FAIL" "$OUT/$id.txt" | head -1)
    if [ $rc -eq 1 ] && [ "$fails" = 20 ]; then
        n_ok=$((n_ok + 1))
        say "ok    $id: $* -> 20/20 FAIL ($(grep -m1 -iE 'determin|timing' "$OUT/$id.txt"))"
    else
        n_bad=$((n_bad + 1))
        say "WRONG $id: $* -> exit $rc, FAIL runs: ${fails:-?} ($line)"
    fi
}
soak20 f-stale-cache --model "$OUT/m/gemma3-c.gguf" --stages 3 --arms serve --requests 40 --max-rows 3 --prefill-chunk 2 --prompt-len 5 --gen-len 5 --seed 23 --fault stale-cache
soak20 f-row-count-order --model "$OUT/m/qwen2-b.gguf" --stages 5 --arms serve --requests 30 --max-rows 6 --prefill-chunk 3 --prompt-len 6 --gen-len 6 --seed 24 --fault row-count-order

# refused ID WANT FLAGS...: exit 2 and the message contains WANT.
refused() {
    local id=$1 want=$2
    shift 2
    local out rc
    out=$("$BIN" --backend cpu "$@" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && [[ $out == *"$want"* ]]; then
        n_ok=$((n_ok + 1))
        say "ok    $id: $* -> exit 2 ($want)"
    else
        n_bad=$((n_bad + 1))
        say "WRONG $id: $* -> exit $rc: $out"
    fi
}
refused r-stale-no-reuse "no arm here reuses one" --model "$OUT/m/llama-e.gguf" --stages 2 --arms serve --requests 4 --max-rows 8 --fault stale-cache
refused r-rowcount-one-row "step one row at a time" --model "$OUT/m/llama-e.gguf" --stages 2 --arms serve --requests 9 --max-rows 1 --prefill-chunk 1 --fault row-count-order
say "# $n_ok ok, $n_bad WRONG"
[ "$n_bad" -eq 0 ]
