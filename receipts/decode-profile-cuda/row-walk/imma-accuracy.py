#!/usr/bin/env python3
"""Issue 30 step 29: what an integer ORDER's activations would cost in accuracy (CPU, numpy).

A Q4_K-shaped matvec (per super-block of 256: 8 sub-blocks of 32, 6-bit sc and m, 4-bit q, f16
d and dmin) against a float64 reference, with the activations represented as THE ORDER does
now (per super-block 2^E, hi = f16(x'), lo = f16(x' - hi)) and as integer pieces would (per
super-block 2^E, v = round(x / 2^E) with |v| < 2^15 (two int8 pieces) or 2^23 (three), and
llama.cpp's q8_1 (int8 per 32) for scale). Activations: RMS-normed Gaussian rows with rare
outlier channels (x50), and SiLU(g) * u rows. Prints the relative error of y (max and rms over
outputs, over rms(y)). Representation error only: the f32 accumulation is not modelled.
"""
import numpy as np

rng = np.random.default_rng(7)


def weights(n_out, n_in):
    nsb = n_in // 256
    q = rng.integers(0, 16, (n_out, nsb, 8, 32))
    sc = rng.integers(0, 64, (n_out, nsb, 8, 1))
    m = rng.integers(0, 64, (n_out, nsb, 8, 1))
    d = np.float16(rng.uniform(1e-4, 3e-4, (n_out, nsb, 1, 1))).astype(np.float64)
    dm = np.float16(rng.uniform(1e-4, 3e-4, (n_out, nsb, 1, 1))).astype(np.float64)
    return (d * sc * q - dm * m).reshape(n_out, n_in)


def acts(kind, n):
    if kind == "norm":
        x = rng.standard_normal(n)
        idx = rng.choice(n, max(1, n // 1000), replace=False)
        x[idx] *= 50
        return x
    g, u = rng.standard_normal(n) * 2, rng.standard_normal(n)
    return g / (1 + np.exp(-g)) * u


def blocks_exp(x, top):
    """Per super-block E with max|x| * 2^-E in [2^top, 2^(top+1)) (as mma_prep's E, top 14)."""
    xb = x.reshape(-1, 256)
    mx = np.abs(xb).max(axis=1, keepdims=True)
    e = np.floor(np.log2(np.where(mx > 0, mx, 1))) - top
    return xb, 2.0 ** e


def rep_f16(x):
    xb, s = blocks_exp(x, 14)
    xp = xb / s
    hi = xp.astype(np.float16).astype(np.float64)
    lo = (xp - hi).astype(np.float16).astype(np.float64)
    return ((hi + lo) * s).reshape(-1)


def rep_int(x, bits):
    xb, s = blocks_exp(x, bits - 2)  # max |v| < 2^(bits-1)
    return (np.round(xb / s) * s).reshape(-1)


def rep_q8_1(x):
    xb = x.reshape(-1, 32)
    dd = np.abs(xb).max(axis=1, keepdims=True) / 127
    dd = np.where(dd > 0, dd, 1)
    return (np.round(xb / dd) * dd).reshape(-1)


for n_in, kind in [(4096, "norm"), (14336, "silu")]:
    W = weights(512, n_in)
    errs = {k: [] for k in ["f16 hi+lo (now)", "int 24-bit (3 x int8)", "int 16-bit (2 x int8)", "q8_1 (llama.cpp)"]}
    for _ in range(8):
        x = acts(kind, n_in)
        y = W @ x
        r = np.sqrt(np.mean(y * y))
        for k, f in zip(errs, [rep_f16, lambda v: rep_int(v, 24), lambda v: rep_int(v, 16), rep_q8_1]):
            e = (W @ f(x) - y) / r
            errs[k].append((np.abs(e).max(), np.sqrt(np.mean(e * e))))
    print(f"n_in {n_in}, {kind} rows (8 rows x 512 outputs): relative error of y over rms(y)")
    for k, v in errs.items():
        v = np.array(v)
        print(f"  {k:24s} max {v[:, 0].max():.2e}  rms {np.sqrt(np.mean(v[:, 1] ** 2)):.2e}")
