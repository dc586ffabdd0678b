#!/usr/bin/env python3
"""The instruction mix of each loop in a kernel's SASS (a backward branch's body): its length
and its most frequent opcodes. Proves where a kernel's per-iteration issue goes, from the
compiled code alone (no GPU): e.g. the prefill GEMM's super-block loop (issue 30, steps 30
and 31: receipts/decode-profile-cuda/int-mma/sass-counts.txt).

Usage: NVRTC_ARCH=sm_90 ONLY="mma set 0 kernel 2" python3 scripts/nvrtc-check.py --cubin DIR
       cuobjdump -sass DIR/*.cubin > K.sass; python3 scripts/sass-loop-mix.py K.sass [TOP]
"""
import re
import sys

ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/")
BRANCH = re.compile(r"\bBRA (0x[0-9a-f]+)")
OPCODE = re.compile(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def addr(line):
    m = ADDR.search(line)
    return int(m.group(1), 16) if m else None


def main():
    lines = open(sys.argv[1]).read().splitlines()
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 14
    code = [(addr(l), l) for l in lines if addr(l) is not None]
    for at, line in code:
        m = BRANCH.search(line)
        if not m or int(m.group(1), 16) >= at:
            continue  # not a backward branch: no loop ends here
        start = int(m.group(1), 16)
        body = [l for a, l in code if start <= a <= at]
        ops = {}
        for l in body:
            o = OPCODE.search(l)
            if o:
                ops[o.group(1)] = ops.get(o.group(1), 0) + 1
        mix = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda t: -t[1])[:top])
        print(f"loop {start:#x}..{at:#x}: {len(body)} instructions; {mix}")


if __name__ == "__main__":
    main()
