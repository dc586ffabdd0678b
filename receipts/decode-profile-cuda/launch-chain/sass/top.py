import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
# find header row
hi = next(i for i, r in enumerate(rows) if any("Address" in c for c in r))
h = rows[hi]; body = [r for r in rows[hi + 1:] if len(r) == len(h)]
print("columns:", " | ".join(h))
def col(name):
    for i, c in enumerate(h):
        if name in c: return i
    return None
ia, isrc = col("Address"), col("Source")
iall, inot = col("Warp Stall Sampling (All"), col("Warp Stall Sampling (Not")
iex = col("Instructions Executed")
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
tot = sum(num(r[iall]) for r in body)
print(f"instructions {len(body)}, stall samples {tot:.0f}")
# cumulative samples along the program order, in 16 slices, to see which phase holds them
n = len(body); acc = 0
for s in range(16):
    part = body[s * n // 16:(s + 1) * n // 16]
    v = sum(num(r[iall]) for r in part); acc += v
    print(f"slice {s:2d} lines {s*n//16:5d}-{(s+1)*n//16:5d}: {100*v/max(tot,1):5.1f} %  first: {part[0][isrc][:60] if part else ''}")
print("--- top 40 by samples (address, samples, not-issued, executed, sass)")
for r in sorted(body, key=lambda r: -num(r[iall]))[:40]:
    print(f"{r[ia]:>8} {num(r[iall]):7.0f} {num(r[inot]) if inot is not None else 0:7.0f} {r[iex] if iex is not None else '':>10}  {r[isrc][:90]}")
reasons = [i for i, c in enumerate(h) if c.startswith("stall_") and "Not Issued" not in c]
print("--- top 8 lines: samples by reason")
for r in sorted(body, key=lambda r: -num(r[iall]))[:8]:
    rs = sorted(((num(r[i]), h[i]) for i in reasons), reverse=True)[:4]
    print(f"{r[ia]:>8} {r[isrc][:50]:50s} " + ", ".join(f"{n} {v:.0f}" for v, n in rs if v > 0))
print("--- whole kernel: samples by reason")
rs = sorted(((sum(num(r[i]) for r in body), h[i]) for i in reasons), reverse=True)
print(", ".join(f"{n} {100*v/max(tot,1):.1f} %" for v, n in rs if v > 0))
print("--- the program, lines with >= 0.3 % of samples, in order")
for r in body:
    if num(r[iall]) >= 0.003 * tot:
        print(f"{r[ia]:>8} {100*num(r[iall])/tot:5.1f} %  {r[isrc][:100]}")
