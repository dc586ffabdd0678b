#!/usr/bin/env python3
"""What one kernel launch's instructions were, from Nsight Compute's source page (no GPU
needed to read it): the executed warp instructions and warp-state samples by opcode, the hot
regions of the SASS (runs of executed instructions, largest first, each with its share), and
the stall reasons summed over the launch, and the instructions with the most excess
shared-memory wavefronts (bank conflicts). Proves where a launch's issue slots and waits went,
e.g. attention_rows' output loop (BENCH.md issue 30 step 37).

Usage, on the GPU machine (scripts/ncu-source.sh does both, gzipping the CSV):
  ncu --set full --import-source no -k regex:NAME --launch-skip S --launch-count 1 -o R BIN ARGS
  ncu -i R.ncu-rep --page source --csv --print-source sass > R.csv
then anywhere: scripts/ncu-source-mix.py R.csv[.gz] [REGIONS]
"""
import collections
import csv
import gzip
import sys


def fail(msg):
    print(f"ncu-source-mix: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) not in (2, 3):
        fail("usage: scripts/ncu-source-mix.py SOURCE.csv[.gz] [REGIONS]")
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        fail(f"{sys.argv[1]}: {e}")
    if len(sys.argv) > 2 and not sys.argv[2].isdigit():
        fail(f"REGIONS {sys.argv[2]!r}: not a count")
    nreg = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    head = next((i for i, r in enumerate(rows) if "Instructions Executed" in r), None)
    if head is None or "Source" not in rows[head]:
        fail(f"{sys.argv[1]}: no source-page header (ncu -i R.ncu-rep --page source --csv --print-source sass)")
    hdr, data = rows[head], [r for r in rows[head + 1:] if len(r) == len(rows[head])]
    ix = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]
    n_by, s_by, st = collections.Counter(), collections.Counter(), collections.Counter()
    code = []
    for i, r in enumerate(data):
        src = r[ix["Source"]].split()
        op = (src[1] if src and src[0].startswith("@") and len(src) > 1 else src[0] if src else "?")
        op = op.split(".")[0]
        n = int(r[ix["Instructions Executed"]] or 0)
        s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
        n_by[op] += n
        s_by[op] += s
        for c in stalls:
            st[c] += int(r[ix[c]] or 0) if r[ix[c]].isdigit() else 0
        if n:
            code.append((i, n))
    if not code:
        fail(f"{sys.argv[1]}: no executed instruction")
    tot, samp = sum(n_by.values()), max(1, sum(s_by.values()))
    print(f"{tot} warp instructions executed, {samp} warp-state samples")
    print("by opcode (instructions, share; samples, share):")
    for op, n in n_by.most_common(14):
        print(f"  {op:10s} {n:10d} {100 * n / tot:5.1f} %  {s_by[op]:6d} {100 * s_by[op] / samp:5.1f} %")
    runs, cur = [], [code[0]]
    for c in code[1:]:
        if c[0] - cur[-1][0] > 3:
            runs.append(cur)
            cur = [c]
        else:
            cur.append(c)
    runs.append(cur)
    print(f"the {nreg} largest regions (SASS lines of executed instructions, a gap over 3 ends one):")
    for r in sorted(sorted(runs, key=lambda r: -sum(n for _, n in r))[:nreg]):
        s = sum(n for _, n in r)
        print(f"  lines {r[0][0]:6d}-{r[-1][0]:6d}: {len(r):5d} instructions, {s:10d} executed ({100 * s / tot:5.1f} %), the most-run line {max(n for _, n in r)} times")
    sall = max(1, sum(st.values()))
    print("stall reasons (samples, share):")
    for c, v in st.most_common(10):
        print(f"  {c[6:]:18s} {v:6d} {100 * v / sall:5.1f} %")
    # Bank conflicts: the instructions whose shared-memory wavefronts exceed the ideal
    # (pages without the column, from older Nsight Compute, skip this part).
    ex, wf = "L1 Wavefronts Shared Excessive", "L1 Wavefronts Shared"
    if ex in ix and wf in ix:
        num = lambda r, c: int(r[ix[c]]) if r[ix[c]].isdigit() else 0
        hit = sorted(((num(r, ex), num(r, wf), r[ix["Source"]].strip()) for r in data), key=lambda t: -t[0])
        etot = sum(t[0] for t in hit)
        print(f"excess shared-memory wavefronts: {etot} of {sum(t[1] for t in hit)}; the largest (excess, all, instruction):")
        for e, w, src in hit[:8]:
            if e:
                print(f"  {e:10d} {w:10d}  {src[:70]}")


if __name__ == "__main__":
    main()
