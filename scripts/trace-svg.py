#!/usr/bin/env python3
"""Draw a ppn-gate trace (`--trace FILE`, either backend) as an SVG timeline.

    scripts/trace-svg.py TRACE.json OUT.svg [--phase pipelined] [--steps 0:8] [--flows]

One lane per track (stream) that ran something in the window, slices as rectangles coloured
by their piece of the step (input, embed, layers, tx, rx, head, readback; event waits grey,
other ops light), each labelled with its step where it is wide enough; `--flows` also draws
the event-wait arrows. `--phase` picks the arm (default pipelined; `all` for the whole run),
`--steps A:B` the steps A..B-1 of it. Python standard library only.
"""
import argparse
import json
import sys
from html import escape

COLOURS = {
    "input": "#9e9ac8",
    "embed": "#6a51a3",
    "layers": "#3182bd",
    "tx": "#e6550d",
    "rx": "#fd8d3c",
    "head": "#31a354",
    "readback": "#c51b8a",
    "event wait": "#d9d9d9",
}
OTHER = "#bdbdbd"
LANE, GAP, LEFT, TOP, WIDTH = 22, 6, 230, 40, 1400


def kind(e):
    a = e.get("args", {})
    return a.get("piece") or e.get("name", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--phase", default="pipelined")
    ap.add_argument("--steps", default=None, help="A:B, the steps A..B-1")
    ap.add_argument("--flows", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            ev = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"trace-svg: {a.trace}: not a trace file ({e})")
    lo, hi = 0, None
    if a.steps:
        try:
            lo, hi = (int(x) for x in a.steps.split(":"))
        except ValueError:
            sys.exit(f"trace-svg: --steps {a.steps!r}: expected A:B")

    def wanted(e):
        args = e.get("args", {})
        if a.phase != "all" and args.get("phase") != a.phase:
            return False
        k = args.get("step")
        return hi is None or (k is not None and lo <= k < hi)

    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M"}
    sl = [e for e in ev if e.get("ph") == "X" and wanted(e)]
    if not sl:
        sys.exit(f"trace-svg: {a.trace}: no slices in phase {a.phase!r} steps {a.steps}")
    t0 = min(e["ts"] for e in sl)
    t1 = max(e["ts"] + e["dur"] for e in sl)
    span = max(t1 - t0, 1e-9)
    tids = sorted({e["tid"] for e in sl})
    lane = {t: i for i, t in enumerate(tids)}
    x = lambda t: LEFT + (t - t0) / span * WIDTH
    y = lambda tid: TOP + lane[tid] * (LANE + GAP)
    height = TOP + len(tids) * (LANE + GAP) + 50
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" '
        f'height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="20" font-size="13">{escape(a.trace)}: phase {escape(a.phase)}'
        f'{", steps " + escape(a.steps) if a.steps else ""}, {span / 1e3:.2f} ms</text>',
    ]
    for tid in tids:
        out.append(
            f'<text x="10" y="{y(tid) + LANE * 0.7:.1f}">{escape(names.get(tid, str(tid)))}</text>'
        )
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + WIDTH}" y1="{y(tid) + LANE:.1f}" '
            f'y2="{y(tid) + LANE:.1f}" stroke="#eee"/>'
        )
    for e in sorted(sl, key=lambda e: kind(e) != "event wait"):
        k = kind(e)
        x0, w = x(e["ts"]), max(e["dur"] / span * WIDTH, 0.5)
        step = e.get("args", {}).get("step")
        slot = e.get("args", {}).get("slot")
        title = f'{e.get("name")} {k} step {step}' + (f" slot {slot}" if slot is not None else "")
        title += f' {e["dur"]:.1f} us'
        h = LANE * (0.5 if k == "event wait" else 1.0)
        yy = y(e["tid"]) + (LANE - h)
        out.append(
            f'<rect x="{x0:.2f}" y="{yy:.1f}" width="{w:.2f}" height="{h:.1f}" '
            f'fill="{COLOURS.get(k, OTHER)}"><title>{escape(title)}</title></rect>'
        )
        if step is not None and k != "event wait" and w > 14:
            out.append(
                f'<text x="{x0 + w / 2:.1f}" y="{y(e["tid"]) + LANE * 0.72:.1f}" '
                f'text-anchor="middle" fill="white" font-size="10">{step}</text>'
            )
    if a.flows:
        s_ev = {e["id"]: e for e in ev if e.get("ph") == "s"}
        for f in (e for e in ev if e.get("ph") == "f"):
            s = s_ev.get(f["id"])
            if s is None or s["tid"] not in lane or f["tid"] not in lane:
                continue
            if not (t0 <= s["ts"] <= t1 and t0 <= f["ts"] <= t1) or s["tid"] == f["tid"]:
                continue
            out.append(
                f'<line x1="{x(s["ts"]):.2f}" y1="{y(s["tid"]) + LANE / 2:.1f}" '
                f'x2="{x(f["ts"]):.2f}" y2="{y(f["tid"]) + LANE / 2:.1f}" '
                f'stroke="#555" stroke-width="0.5" stroke-opacity="0.6"/>'
            )
    # Time axis and legend.
    ya = TOP + len(tids) * (LANE + GAP) + 10
    for i in range(11):
        t = span * i / 10
        out.append(
            f'<text x="{LEFT + WIDTH * i / 10:.1f}" y="{ya + 4}" text-anchor="middle">'
            f"{t / 1e3:.2f} ms</text>"
        )
    lx = LEFT
    for k, c in list(COLOURS.items()) + [("other op", OTHER)]:
        out.append(f'<rect x="{lx}" y="{ya + 16}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{lx + 16}" y="{ya + 26}">{escape(k)}</text>')
        lx += 100
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"trace-svg: {a.out}: {len(tids)} lanes, {len(sl)} slices, {span / 1e3:.2f} ms")


if __name__ == "__main__":
    main()
