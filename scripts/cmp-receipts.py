#!/usr/bin/env python3
"""Compare the reference logits of two gate receipts of one model on one tape (e.g. the CPU
backend's and the CUDA backend's).

usage: cmp-receipts.py [--tol T] A.json B.json
Both must be gate receipts recorded with --topk 20 on the same tokens (--tape). Prints the
max |logit difference| over A's top-k ids, the top-1 agreement and how many steps are
bit-identical (same logits_blake3); exit 1 if the tokens differ, a top-1 differs at a step
whose top-2 margin in A is >= 1e-3, or a difference exceeds T (default 1e-3), else 0.
"""
import json
import sys

args = sys.argv[1:]
tol = 1e-3
if args[:1] == ["--tol"]:
    tol = float(args[1])
    args = args[2:]
if len(args) != 2:
    sys.exit(__doc__)
ra, rb = (json.load(open(p))["reference"] for p in args)
if ra["tokens"] != rb["tokens"]:
    print(f"{args[0]} vs {args[1]}: different tokens")
    sys.exit(1)
worst, top1, same, bad = 0.0, 0, 0, []
for i, (sa, sb) in enumerate(zip(ra["steps"], rb["steps"])):
    ta, tb = dict(map(tuple, sa["topk"])), dict(map(tuple, sb["topk"]))
    for tok, v in ta.items():
        worst = max(worst, abs(v - tb[tok])) if tok in tb else float("inf")
    margin = sa["topk"][0][1] - sa["topk"][1][1]
    if sa["topk"][0][0] == sb["topk"][0][0]:
        top1 += 1
    elif margin >= 1e-3:
        bad.append(f"step {i}: top-1 {sb['topk'][0][0]} vs {sa['topk'][0][0]} (margin {margin:.2e})")
    same += sa["logits_blake3"] == sb["logits_blake3"]
if worst > tol:
    bad.append(f"max |diff| {worst:.3e} > {tol:g}")
n = len(ra["steps"])
print(f"top-k max|diff| {worst:.3e}  top-1 agree {top1}/{n}  bit-identical steps {same}/{n}")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
