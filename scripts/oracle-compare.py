#!/usr/bin/env python3
"""Compare a gate receipt's reference top-k with an HF oracle file (tests/data/oracle/*.json).

usage: oracle-compare.py [--tol T] RECEIPT.json ORACLE.json
The receipt must come from a gate run on the oracle's own tape (--tape ORACLE.json) with
--topk 20. Prints the top-1 agreement and the max |logit difference| over the oracle's top-20
ids (where the receipt's top-20 has them); exit 1 if top-1 differs at a step whose oracle
top-2 margin is >= 1e-3 or a difference exceeds T (default 1e-2; the synthetic qwen oracles
and the llama.cpp rope_freqs comparison use 1e-3), else 0. The "oracle" may be any file of
the oracle format (tape, steps[i].top_ids/top_logits): HF transformers' or llama.cpp's.
"""
import json
import sys

args = sys.argv[1:]
tol = 1e-2
if args[:1] == ["--tol"]:
    tol = float(args[1])
    args = args[2:]
if len(args) != 2:
    sys.exit(__doc__)
rec = json.load(open(args[0]))
orc = json.load(open(args[1]))
steps = rec["reference"]["steps"]
assert rec["reference"]["tokens"][: len(orc["tape"])] == orc["tape"], "receipt is not on the oracle's tape"
worst, bad, agree, missing = 0.0, [], 0, 0
for i, o in enumerate(orc["steps"]):
    got = dict((int(a), float(b)) for a, b in steps[i]["topk"])
    ids, logits = o["top_ids"], o["top_logits"]
    top1 = max(got.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    margin = logits[0] - logits[1]
    if top1 == ids[0]:
        agree += 1
    elif margin >= 1e-3:
        bad.append(f"step {i}: top-1 {top1} vs oracle {ids[0]} (margin {margin:.2e})")
    for t, l in zip(ids, logits):
        if t in got:
            worst = max(worst, abs(got[t] - l))
        else:
            missing += 1
if worst > tol:
    bad.append(f"max |diff| {worst:.3e} > {tol:g}")
print(f"{args[0]}: top-1 {agree}/{len(orc['steps'])}, max |logit diff| over oracle top-20 = {worst:.3e}"
      f" ({missing} oracle ids outside our top-20)")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
