#!/usr/bin/env python3
"""Compile mma_q4k.cu with NVRTC (no GPU needed) in every variant bench.py builds.

Options as the engine's (scripts/nvrtc-check.py): no FMA contraction, no flush-to-zero, IEEE
division and square root, architecture sm_90 (a CUBIN, so ptxas runs too and register spills
show up). Usage: compile_check.py [--cubin DIR] [LIBNVRTC]. LIBNVRTC: default libnvrtc.so.13
found as scripts/nvrtc-check.py finds it (site-packages or the repo's .cache/nvrtc, where that
script installs the nvidia-cuda-nvrtc wheel). Exit 0 when every variant compiles.
"""
import ctypes, importlib.util, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "mma_q4k.cu")
sys.path.insert(0, HERE)
from variants import VARIANTS  # noqa: E402  (the -D sets bench.py compiles)

# The engine's NVRTC loader and compile step (scripts/nvrtc-check.py: its options, its
# libnvrtc lookup), loaded by path (the file name has a hyphen).
_spec = importlib.util.spec_from_file_location("nvrtc_check", os.path.join(ROOT, "scripts", "nvrtc-check.py"))
nvrtc_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nvrtc_check)


def compile_one(lib, name, defines, cubin_dir):
    with open(SRC) as f:
        text = f.read()
    extra = ["-lineinfo"] + [f"-D{k}={v}" for k, v in defines.items()]
    return nvrtc_check.compile_module(lib, name, text, arch="sm_90", extra=extra, cubin=cubin_dir)


def main():
    args = sys.argv[1:]
    cubin = None
    if "--cubin" in args:
        i = args.index("--cubin")
        cubin = args[i + 1]
        del args[i:i + 2]
    lib = ctypes.CDLL(nvrtc_check.find_lib(args))
    bad = 0
    for name, defines in VARIANTS.items():
        err = compile_one(lib, name, defines, cubin)
        if err:
            bad += 1
            print(err)
        else:
            print(f"{name}: ok {defines}")
    print(f"compile_check: {len(VARIANTS) - bad} variants compiled, {bad} failed (sm_90)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
