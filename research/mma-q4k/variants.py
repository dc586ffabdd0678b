"""The compile-time variants of mma_q4k.cu that bench.py builds (and compile_check.py checks).

Every variant must give the same bits for every output (THE ORDER in mma_q4k.cu does not
depend on MT/KP/GMT/GNT/GWM/GWN); only `plant` differs, by design (the negative control).
Decode: MT m-tiles per block (rows per block = 16 MT), KP warps = super-blocks in flight.
GEMM: GMT x GNT mma tiles per warp, GWM x GWN warps per block.
"""
VARIANTS = {
    "d1k8": {"MT": 1, "KP": 8},
    "d2k8": {"MT": 2, "KP": 8},
    "d2k16": {"MT": 2, "KP": 16},
    "d4k8": {"MT": 4, "KP": 8},
    "g2x4w2x4": {"GMT": 2, "GNT": 4, "GWM": 2, "GWN": 4},
    "g4x2w4x2": {"GMT": 4, "GNT": 2, "GWM": 4, "GWN": 2},
    "g2x2w4x4": {"GMT": 2, "GNT": 2, "GWM": 4, "GWN": 4},
    "plant": {"MT": 2, "KP": 8, "PLANT": 1},
}
DECODE = [k for k in VARIANTS if k.startswith("d")]
GEMM = [k for k in VARIANTS if k.startswith("g")]
