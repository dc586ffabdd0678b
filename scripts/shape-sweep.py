#!/usr/bin/env python3
"""Gates on model shapes no test wrote: the verdict holds on every shape a seed draws.

Proves, for MODELS synthetic models whose shapes are drawn from --seed (architecture, block
format, widths, heads and kv heads, head width, ff, vocabulary, depth, tied head, rope
factors, gemma3's window), each gated with drawn flags (stages, splits, arms, prompt and
generated lengths or a tape of tokens drawn over the vocabulary, batch, chunks, draft,
window, serve's requests, the gate's seed; on CUDA also --mma, --graphs, --pdl):
  1. the clean gate PASSes (exit 0, receipt verdict PASS): a FAIL here is the runtime or
     the gate wrong on a shape, a panic (exit 101) or any other code a finding;
  2. the same gate with a bit planted in the prime arm's first judged logit
     (`--plant-defect stages=N,chunk=C`) FAILs (exit 1), naming the prime arm: the
     comparison sees one ULP on every shape.
A draw that synth or the gate refuses (exit 2, a clear error: a width its block format
does not tile, a prompt past the context) is redrawn and counted, never a finding; a gate
whose backend "cannot run this model" (the CUDA kernels' widths: a multiple of 32) redraws
the shape. Twenty gates of one model refused in a row is a finding.
Writes OUT/summary.txt (one line a model, the tally last), OUT/refusals.txt (each redrawn
draw with its error, to read that every refusal is one) and OUT/findings.txt; exit 0
when every model held, 1 on any finding.

  python3 scripts/shape-sweep.py BIN --out DIR [--seed S] [--models N] [--backend cpu|cuda]
                                 [--budget-s T]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

QUANTS = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
          "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m"]
ARMS = ["eager", "pipelined", "batched", "prime", "verify", "serve"]


def draw_shape(r):
    arch = r.choice(["llama", "qwen2", "qwen3", "gemma3"])
    quant = r.choice(QUANTS)
    # k formats tile 256, the others 32: mostly widths that tile, sometimes not (a refusal).
    unit = 256 if quant.endswith("_k") else 32
    if r.random() < 0.1:
        unit = 32
    embd = unit * r.randint(1, 4 if unit == 256 else 12)
    heads = r.choice([1, 2, 3, 4, 6, 8, 9, 12])
    kv = r.choice([k for k in range(1, heads + 1) if heads % k == 0])
    flags = ["--arch", arch, "--layers", str(r.randint(1, 6)), "--embd", str(embd),
             "--heads", str(heads), "--kv-heads", str(kv),
             "--ff", str(unit * r.randint(1, 6 if unit == 256 else 16)),
             "--vocab", str(r.randint(260, 2000)), "--quant", quant,
             "--seed", str(r.randint(0, 10**6))]
    if arch in ("qwen3", "gemma3") or r.random() < 0.4:
        flags += ["--head-dim", str(r.choice([16, 32, 48, 64, 128]))]
    if arch != "gemma3" and r.random() < 0.3:
        flags.append("--tied")
    if arch == "llama" and r.random() < 0.3:
        flags.append("--rope-freqs")
    if arch == "gemma3":
        flags += ["--sliding-window", str(r.randint(2, 24))]
    return flags


def draw_gate(r, layers, vocab, backend, tape_path):
    arms = [a for a in ARMS if r.random() < 0.5] or [r.choice(ARMS)]
    if "prime" not in arms:
        arms.append("prime")  # the planted control needs it
    stages = r.randint(1, min(4, layers))
    prompt, gen = r.randint(1, 24), r.randint(1, 12)
    flags = ["--stages", str(stages), "--arms", ",".join(arms),
             "--seed", str(r.randint(0, 10**6)), "--window", str(r.randint(1, 4))]
    if r.random() < 0.3:
        # A tape of tokens drawn over the whole vocabulary (not the model's greedy path: the
        # arms are teacher-forced on it), with its own prompt_len.
        toks = [r.randrange(vocab) for _ in range(prompt + gen)]
        json.dump({"tokens": toks, "prompt_len": prompt}, open(tape_path, "w"))
        flags += ["--tape", tape_path]
    else:
        flags += ["--prompt-len", str(prompt), "--gen-len", str(gen)]
    if stages > 1 and r.random() < 0.5:
        cuts = sorted(r.sample(range(1, layers), stages - 1))
        flags += ["--splits", ",".join(map(str, cuts))]
    chunk = r.randint(1, prompt)
    chunks = sorted({chunk, r.randint(1, prompt)})
    flags += ["--chunk", ",".join(map(str, chunks)), "--repeat", str(r.randint(1, 2))]
    if "batched" in arms:
        flags += ["--batch", str(r.randint(1, 6))]
    if "verify" in arms:
        flags += ["--draft", str(r.randint(1, 5))]
    if "serve" in arms:
        rows = r.randint(1, 6)
        flags += ["--requests", str(r.randint(1, 6)), "--max-rows", str(rows),
                  "--prefill-chunk", str(r.randint(1, rows))]
    if backend == "cuda":
        flags += ["--mma", r.choice(["auto", "on", "off"]),
                  "--graphs", r.choice(["on", "off"]), "--pdl", r.choice(["on", "off"])]
    return flags, stages, chunk


def run(cmd, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t
    except subprocess.TimeoutExpired:
        return "timeout", "", "", time.time() - t


def first_err(text):
    """The first error line (a note before it, such as one stage's, is not the cause)."""
    lines = [l for l in text.splitlines() if l.strip()]
    errs = [l for l in lines if "error:" in l]
    return (errs or lines or [""])[0][:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="draw no model after this many seconds (the tally says how many ran)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    r = random.Random(a.seed)
    lines, findings, refusals = [], [], []
    refused = {"synth": 0, "gate": 0, "backend": 0}
    held = 0
    t0 = time.time()
    ran = 0
    for m in range(a.models):
        if a.budget_s is not None and time.time() - t0 > a.budget_s:
            break
        ran += 1
        model = os.path.join(a.out, f"m{m:03d}.gguf")
        base = [a.bin, "--backend", a.backend, "--model", model, "-q"]
        synth_bad = False
        for _ in range(50):
            shape = draw_shape(r)
            code, out, err, _ = run([a.bin, "synth", *shape, "-o", model], 60)
            if code == 2:
                refused["synth"] += 1
                refusals.append(f"synth {' '.join(shape)}: {first_err(err)}")
                continue
            if code != 0:
                findings.append(f"m{m:03d} synth exit {code}: {' '.join(shape)}: {first_err(err)}")
                synth_bad = True
                break
            layers = int(shape[shape.index("--layers") + 1])
            vocab = int(shape[shape.index("--vocab") + 1])
            for _ in range(20):
                tape = os.path.join(a.out, f"m{m:03d}.tape.json")
                gate, stages, chunk = draw_gate(r, layers, vocab, a.backend, tape)
                rec = os.path.join(a.out, f"m{m:03d}.json")
                code, out, err, secs = run([*base, *gate, "--receipt", rec], a.timeout)
                if code != 2 or "cannot run this model" in err:
                    break
                refused["gate"] += 1
                refusals.append(f"gate m{m:03d} {' '.join(gate)}: {first_err(err)}")
            if code == 2 and "cannot run this model" in err:
                refused["backend"] += 1
                refusals.append(f"backend {' '.join(shape)}: {first_err(err)}")
                continue
            break
        else:
            findings.append(f"m{m:03d}: 50 shapes refused in a row (last: {first_err(err)})")
            continue
        if synth_bad:
            continue
        what = f"m{m:03d} [{' '.join(shape)}] [{' '.join(gate)}]"
        verdict = None
        if code == 0:
            verdict = json.load(open(rec)).get("verdict")
        if code != 0 or verdict != "PASS":
            findings.append(f"{what}: clean gate exit {code}, verdict {verdict}: {first_err(err or out)}")
            lines.append(f"{what}: clean {code} FINDING")
            continue
        plant = f"stages={stages},chunk={chunk}"
        prec = os.path.join(a.out, f"m{m:03d}-planted.json")
        pcode, pout, perr, psecs = run(
            [*base, *gate, "--plant-defect", plant, "--receipt", prec], a.timeout)
        pfail = []
        if pcode == 1:
            pr = json.load(open(prec))
            pfail = [x["name"] for x in pr.get("arms", []) if x.get("verdict") == "FAIL"]
        ok = pcode == 1 and pfail == ["prime"]
        if not ok:
            findings.append(f"{what}: planted {plant}: exit {pcode}, failing arms {pfail}: {first_err(perr or pout)}")
        held += ok
        lines.append(f"{what}: clean PASS {secs:.1f}s, planted {plant} "
                     f"{'FAIL (prime)' if ok else 'FINDING'} {psecs:.1f}s")
        os.remove(model)
    lines.append(f"models {ran}, held {held}, findings {len(findings)}, "
                 f"redrawn: {refused['synth']} shapes synth refused, {refused['backend']} the "
                 f"backend refused, {refused['gate']} gates refused (exit 2); "
                 f"backend {a.backend}, seed {a.seed}, {time.time() - t0:.0f} s")
    open(os.path.join(a.out, "summary.txt"), "w").write("\n".join(lines) + "\n")
    open(os.path.join(a.out, "refusals.txt"), "w").write("\n".join(refusals) + "\n")
    open(os.path.join(a.out, "findings.txt"), "w").write("\n".join(findings) + ("\n" if findings else ""))
    print(lines[-1])
    for f in findings:
        print("FINDING", f)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
