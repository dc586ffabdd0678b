#!/usr/bin/env python3
"""Generate the reference vectors that pin `crate::quant` bit-for-bit to the python
`gguf.quants` package (itself a port of ggml's reference C code).

For every format this writes tests/data/quant/<name>.json with:
  dequant.src  raw block bytes (hex), random but valid: every f16 scale field is finite
  dequant.out  gguf.quants.dequantize(src) as little-endian f32 bytes (hex)
and, for formats where gguf.quants has a quantizer:
  quant.src    float input as little-endian f32 bytes (hex)
  quant.out    gguf.quants.quantize(src) bytes (hex)

Floats are stored as raw bit patterns so the Rust test compares bits, not decimal text.
Deterministic: numpy's PCG64 seeded with a fixed seed per format.

Usage: python3 scripts/gen-quant-vectors.py [out_dir]   (default tests/data/quant)
"""

import json
import os
import sys

import importlib.metadata

import numpy as np
import gguf.quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

# name as the Rust GgmlType::name() spells it -> gguf enum name
FORMATS = {
    "f32": "F32",
    "f16": "F16",
    "bf16": "BF16",
    "q4_0": "Q4_0",
    "q4_1": "Q4_1",
    "q5_0": "Q5_0",
    "q5_1": "Q5_1",
    "q8_0": "Q8_0",
    "q2_k": "Q2_K",
    "q3_k": "Q3_K",
    "q4_k": "Q4_K",
    "q5_k": "Q5_K",
    "q6_k": "Q6_K",
}

# Byte offsets of the f16 scale fields inside one block (ggml block structs). They are
# overwritten with finite values: a NaN/inf scale is not a meaningful weight and NaN
# payloads are not something either side promises to preserve.
F16_FIELDS = {
    "Q4_0": [0],
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "Q2_K": [80, 82],
    "Q3_K": [108],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
}

N_BLOCKS = 8  # block-quantized formats
N_FLOAT = 256  # elements for F32/F16/BF16


def finite_f16_bits(rng, n):
    """Random f16 bit patterns: half of them 'moderate' (|v| in [2^-12, 4]), the rest any
    finite value (subnormals, zero, large) so edge cases of the conversion are covered."""
    out = np.empty(n, dtype=np.uint16)
    for i in range(n):
        if i % 2 == 0:
            mag = 2.0 ** rng.uniform(-12, 2)
            sign = -1.0 if rng.integers(0, 2) else 1.0
            out[i] = np.array([sign * mag], dtype=np.float16).view(np.uint16)[0]
        else:
            while True:
                b = int(rng.integers(0, 1 << 16))
                if (b >> 10) & 0x1F != 0x1F:  # exponent all-ones = inf/NaN
                    break
            out[i] = b
    return out


def dequant_src(rng, name):
    qt = T[name]
    if name == "F32":
        bits = rng.integers(0, 1 << 32, size=N_FLOAT, dtype=np.uint64).astype(np.uint32)
        # keep finite: force exponent away from all-ones
        bad = ((bits >> 23) & 0xFF) == 0xFF
        bits[bad] &= np.uint32(0xBFFFFFFF)
        return bits.view(np.uint8)
    if name == "F16":
        return finite_f16_bits(rng, N_FLOAT).view(np.uint8)
    if name == "BF16":
        bits = rng.integers(0, 1 << 16, size=N_FLOAT, dtype=np.uint32).astype(np.uint16)
        bad = ((bits >> 7) & 0xFF) == 0xFF
        bits[bad] &= np.uint16(0xBFFF)
        return bits.view(np.uint8)
    _, type_size = GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(N_BLOCKS, type_size), dtype=np.uint8)
    fields = F16_FIELDS[name]
    scales = finite_f16_bits(rng, N_BLOCKS * len(fields)).reshape(N_BLOCKS, len(fields))
    for b in range(N_BLOCKS):
        for k, off in enumerate(fields):
            raw[b, off : off + 2] = np.array([scales[b, k]], dtype=np.uint16).view(np.uint8)
    # one block with every scale exactly zero (the d == 0 path)
    for off in fields:
        raw[N_BLOCKS - 1, off : off + 2] = 0
    return raw.reshape(-1)


def quant_src(rng, name):
    """Float inputs with the cases quantizers treat specially: zero block, constant block,
    negative vs positive extreme, outliers, ties for round-half rules, tiny/huge values."""
    if name in ("F16", "BF16", "F32"):
        v = rng.standard_normal(N_FLOAT).astype(np.float32) * np.float32(3.0)
        specials = [0.0, -0.0, 1.0, -1.0, 65504.0, 65520.0, 70000.0, -1e6, 1e-8, -6e-8,
                    3e-5, 1.00048828125, 1.000244140625, 1.0009765625, 3.4e38, -3.4e38,
                    np.float32(1.0 + 2.0 ** -8), np.float32(1.0 + 2.0 ** -8 + 2.0 ** -20),
                    np.inf, -np.inf]
        v[: len(specials)] = np.array(specials, dtype=np.float32)
        # bf16 ties: low 16 bits exactly 0x8000, with even and odd kept bits
        ties = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x40490000 | 0x8000], dtype=np.uint32)
        v[32 : 32 + len(ties)] = ties.view(np.float32)
        return v
    block = 32
    blocks = []
    for b in range(N_BLOCKS):
        if b == 0:
            x = np.zeros(block, dtype=np.float32)
        elif b == 1:
            x = np.full(block, 0.75, dtype=np.float32)
        elif b == 2:
            x = rng.standard_normal(block).astype(np.float32)
            x[5] = -9.0  # largest magnitude is negative
        elif b == 3:
            x = rng.standard_normal(block).astype(np.float32)
            x[17] = 9.0  # largest magnitude is positive
        elif b == 4:
            # multiples of a power of two: many exact .5 ties after scaling
            x = (rng.integers(-16, 17, size=block) * 0.125).astype(np.float32)
        elif b == 5:
            x = (rng.standard_normal(block) * 1e-4).astype(np.float32)
        elif b == 6:
            x = (rng.standard_normal(block) * 300.0).astype(np.float32)
        else:
            x = rng.uniform(-1.0, 2.0, size=block).astype(np.float32)
        blocks.append(x)
    return np.concatenate(blocks)


def hexs(a):
    return np.ascontiguousarray(a).view(np.uint8).tobytes().hex()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant"))
    os.makedirs(out_dir, exist_ok=True)
    for seed, (rname, gname) in enumerate(FORMATS.items()):
        qt = T[gname]
        rng = np.random.default_rng(20240601 + seed)
        src = dequant_src(rng, gname)
        deq = gguf.quants.dequantize(src.copy(), qt).astype(np.float32, copy=False)
        doc = {
            "type": rname,
            "generator": "scripts/gen-quant-vectors.py with gguf "
            + importlib.metadata.version("gguf") + ", numpy " + np.__version__,
            "dequant": {"n_elements": int(deq.size), "src": hexs(src), "out": hexs(deq)},
        }
        x = quant_src(rng, gname)
        try:
            # F16 overflow to inf is one of the pinned cases: silence numpy's warning.
            with np.errstate(over="ignore"):
                q = gguf.quants.quantize(x.copy(), qt)
        except NotImplementedError:
            q = None
        if q is not None:
            doc["quant"] = {"n_elements": int(x.size), "src": hexs(x), "out": hexs(q)}
        path = os.path.join(out_dir, rname + ".json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"{path}: dequant {deq.size} elems" + (f", quant {x.size} elems" if q is not None else ""))


if __name__ == "__main__":
    main()
