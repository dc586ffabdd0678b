#!/usr/bin/env python3
"""Global loads inside a kernel's loops whose value is read within a few instructions. Proves,
from the compiled code alone (no GPU), where a warp waits a whole memory latency right after
issuing a load: a walk that loads the next item while the current one computes overlaps
nothing if the next item's value is consumed at once (issue 30 step 38: the Q8_0 FFMA unit
widened its f16 scale in load(), HADD2.F32 six instructions after the LDG).

Usage: NVRTC_ARCH=sm_90 ONLY="mvq" python3 scripts/nvrtc-check.py --cubin DIR
       cuobjdump -sass DIR/mvq_7_tile_1_nw_2.cubin > K.sass
       python3 scripts/sass-load-use.py K.sass [WITHIN]
WITHIN: the most instructions between a load and the first read of its value that count as
"at once" (default 12). Prints one line a kernel with such loads (address, opcode, distance,
reader); exit 0 either way, 2 when K.sass is missing or holds no SASS.
A read is any later instruction naming one of the load's destination registers as a source
(a store's registers included), scanning straight down the code (branches not followed), so
a hit is a candidate to read in the SASS, not a verdict.
"""
import re
import sys

ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA (0x[0-9a-f]+)")
FUNC = re.compile(r"Function : (\S+)")
GUARD = re.compile(r"^@!?U?P\w+\s+")
REG = re.compile(r"\bR(\d+)\b")


def width(op):
    """Registers a load writes: .128 four, .64 two, else one."""
    return 4 if ".128" in op else 2 if ".64" in op else 1


def kernels(text):
    """{kernel: [(address, instruction without its guard)]} of a cuobjdump -sass listing."""
    out, cur = {}, None
    for line in text.splitlines():
        m = FUNC.search(line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        m = ADDR.search(line)
        if m and cur:
            out[cur].append((int(m.group(1), 16), GUARD.sub("", m.group(2))))
    return out


def early_reads(code, within):
    """(address, opcode, distance, reader) of each in-loop global load read within `within`."""
    loops = []
    for at, ins in code:
        m = BRANCH.search(ins)
        if m and int(m.group(1), 16) < at:
            loops.append((int(m.group(1), 16), at))
    hits = []
    for i, (at, ins) in enumerate(code):
        op = ins.split()[0]
        if not op.startswith("LDG") or not any(s <= at <= e for s, e in loops):
            continue
        args = ins[len(op):].split(",")
        dst = REG.findall(args[0])
        if not dst:
            continue
        regs = {str(int(dst[0]) + k) for k in range(width(op))}
        for j in range(i + 1, min(i + 1 + within, len(code))):
            ins2 = code[j][1]
            op2 = ins2.split()[0]
            parts = ins2[len(op2):].split(",")
            srcs = parts if op2.startswith(("ST", "RED", "ATOM")) else parts[1:]
            if any(set(REG.findall(p)) & regs for p in srcs):
                hits.append((at, op, j - i, f"{op2}@{code[j][0]:#x}"))
                break
            if parts and not op2.startswith(("ST", "BRA")) and set(REG.findall(parts[0])) & regs:
                break  # overwritten before any read
    return hits


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: sass-load-use.py K.sass [WITHIN]", file=sys.stderr)
        return 2
    try:
        text = open(sys.argv[1]).read()
    except OSError as e:
        print(f"sass-load-use: {sys.argv[1]}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        within = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    except ValueError:
        within = -1
    if within < 1:
        print(f"sass-load-use: WITHIN {sys.argv[2]!r} is not a count of instructions (1 or more)", file=sys.stderr)
        return 2
    ks = kernels(text)
    if not any(ks.values()):
        print(f"sass-load-use: {sys.argv[1]} holds no SASS (cuobjdump -sass output expected)", file=sys.stderr)
        return 2
    for name, code in ks.items():
        hits = early_reads(code, within)
        if hits:
            print(f"{name}: {len(hits)} in-loop loads read within {within}: " +
                  "; ".join(f"{a:#x} {op} +{d} {r}" for a, op, d, r in hits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
