#!/usr/bin/env python3
"""Compile mma_q4k.cu with NVRTC (no GPU needed) in every variant bench.py builds.

Options as the engine's (scripts/nvrtc-check.py): no FMA contraction, no flush-to-zero, IEEE
division and square root, architecture sm_90 (a CUBIN, so ptxas runs too and register spills
show up). Usage: compile_check.py [--cubin DIR] [LIBNVRTC]. LIBNVRTC: default libnvrtc.so.13
found as scripts/nvrtc-check.py finds it (site-packages or the repo's .cache/nvrtc, where that
script installs the nvidia-cuda-nvrtc wheel). Exit 0 when every variant compiles.
"""
import ctypes, glob, os, site, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "mma_q4k.cu")
sys.path.insert(0, HERE)
from variants import VARIANTS  # noqa: E402  (the -D sets bench.py compiles)

OPTS = ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true",
        "--gpu-architecture=sm_90", "-lineinfo"]


def find_lib(args):
    if args:
        return args[0]
    for d in site.getsitepackages() + [site.getusersitepackages(), os.path.join(ROOT, ".cache", "nvrtc")]:
        hits = [h for h in glob.glob(os.path.join(d, "nvidia", "cu*", "lib", "libnvrtc.so.*"))
                if "builtins" not in h]
        if hits:
            return hits[0]
    sys.exit("compile_check: libnvrtc not found; run scripts/nvrtc-check.py once (it installs "
             "the wheel into .cache/nvrtc) or pass the library's path")


def compile_one(lib, name, defines, cubin_dir):
    with open(SRC) as f:
        text = f.read()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), b"mma_q4k.cu", 0, None, None):
        return f"{name}: nvrtcCreateProgram failed"
    opts = [o.encode() for o in OPTS + [f"-D{k}={v}" for k, v in defines.items()]]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    msg = log.value.decode(errors="replace").strip()
    if r == 0 and cubin_dir:
        n = ctypes.c_size_t()
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, buf)
        os.makedirs(cubin_dir, exist_ok=True)
        with open(os.path.join(cubin_dir, name + ".cubin"), "wb") as f:
            f.write(buf.raw)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    if r != 0:
        return f"{name}: compile failed ({r}):\n{msg}"
    if msg:
        print(f"{name}: log:\n{msg}")
    return None


def main():
    args = sys.argv[1:]
    cubin = None
    if "--cubin" in args:
        i = args.index("--cubin")
        cubin = args[i + 1]
        del args[i:i + 2]
    lib = ctypes.CDLL(find_lib(args))
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
