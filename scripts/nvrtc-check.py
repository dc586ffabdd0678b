#!/usr/bin/env python3
"""Compile every CUDA kernel module of the engine with NVRTC, on a machine without a GPU.

NVRTC needs no driver and no device, so kernel source errors show up here instead of on the
GPU machine. The modules are assembled as src/backend/cuda/mod.rs assembles them (the main
module: every source in order; a matvec module: a #define head, then common.cu, ffn.cu,
matvec.cu, and mvq.cu for a vectorized kind or mma.cu for the mma module) and compiled with the engine's options
(compile_options: no FMA contraction, no flush-to-zero, IEEE division and square root).

Usage: scripts/nvrtc-check.py [--all] [--cubin DIR] [--regs] [LIBNVRTC]
Default: the modules as the engine builds them: the main module, each attention kernel's
module, each mma kernel's module, every vectorized module (each rows-per-warp variant) at row
tiles 1 and 8 and every byte-wise module at tile 1 (what scripts/test.sh runs), compiled side
by side on every core as the engine does; --all: every module at tiles 1, 3 and 8, and the
whole programs (every attention and every mma kernel in one).
LIBNVRTC: default libnvrtc.so.13 from the nvidia-cuda-nvrtc wheel, found in site-packages or
in .cache/nvrtc (installed there with pip when absent). Exit 0 when every module compiles.
--cubin DIR (with NVRTC_ARCH=sm_90): each module's CUBIN into DIR, to read its SASS with
cuobjdump -sass (the nvidia-cuda-cuobjdump wheel) without a GPU. --regs (with NVRTC_ARCH=sm_90):
ptxas's registers, spill bytes and shared memory of every kernel.
"""
import ctypes, glob, os, subprocess, sys, site

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K = os.path.join(ROOT, "src/backend/cuda/kernels")
SOURCES = ["common.cu", "ffn.cu", "matvec.cu", "mvq.cu", "mma.cu", "norm.cu", "attention.cu", "sched.cu"]
MV_SOURCES = ["common.cu", "ffn.cu", "matvec.cu"]
FORMATS = 13          # GgmlType::ALL
VECTORIZED = [3, 4, 5, 6, 7, 10, 11, 12]  # fmt ids repack::is_fast takes (Q4_0..Q8_0, Q4K..Q6K)
ARCH = os.environ.get("NVRTC_ARCH", "compute_90")
ATT_WIDTHS = [64, 128, 256, 0]  # src/backend/cuda/nvrtc.rs ATT_WIDTHS
MMA_FORMATS = 6       # src/backend/cuda/mma.rs MMA_FORMATS
MMA_SET_KERNELS = 6   # src/backend/cuda/mma.rs MMA_SET
MMA_MIX_KERNELS = 2   # src/backend/cuda/mma.rs MMA_MIX_KERNELS
MMA_WG_KERNELS = 2    # src/backend/cuda/mma.rs MMA_WG: mma_prep_xg, mma_gemm_wg (set 7, sm_90a)


# The engine's compile options (src/backend/cuda/mod.rs compile_options), less the
# architecture: no FMA contraction, no flush-to-zero, IEEE division and square root.
ENGINE_OPTS = ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"]
CACHE = os.path.join(ROOT, ".cache", "nvrtc")
WHEEL = "nvidia-cuda-nvrtc==13.5.37"  # NVRTC of CUDA 13, as on the GPU machine


def find_lib(args=()):
    """libnvrtc: args[0] when given, else the wheel's (installed into .cache/nvrtc if absent)."""
    if args:
        return args[0]
    def search():
        for d in site.getsitepackages() + [site.getusersitepackages(), CACHE]:
            hits = glob.glob(os.path.join(d, "nvidia", "cu*", "lib", "libnvrtc.so.*"))
            hits = [h for h in hits if "builtins" not in h]
            if hits:
                return hits[0]
        return None
    lib = search()
    if lib is None:
        print(f"nvrtc-check: installing {WHEEL} into {CACHE}", flush=True)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", "--root-user-action=ignore", "--target", CACHE,
                            WHEEL])
        lib = search() if r.returncode == 0 else None
    if lib is None:
        sys.exit(f"nvrtc-check: libnvrtc not found and {WHEEL} could not be installed")
    return lib


def src(name):
    with open(os.path.join(K, name)) as f:
        return f.read()


def compile_module(lib, what, text, arch=ARCH, extra=(), cubin=None, verbose=False):
    """Compile `text` with the engine's options for `arch` (plus `extra`); with `cubin`, write
    the CUBIN there as WHAT.cubin. None when it compiles, else the error and log."""
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), b"ppn_gate_kernels.cu", 0, None, None)
    if r != 0:
        return f"{what}: nvrtcCreateProgram {r}"
    opts = [o.encode() for o in ENGINE_OPTS + [f"--gpu-architecture={arch}"] + list(extra)]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if r == 0 and cubin:
        n = ctypes.c_size_t()
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, buf)
        os.makedirs(cubin, exist_ok=True)
        with open(os.path.join(cubin, what.replace(" ", "_") + ".cubin"), "wb") as f:
            f.write(buf.raw)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    text_log = log.value.decode(errors="replace").strip()
    if r != 0:
        return f"{what}: compile failed ({r}):\n{text_log}"
    if verbose:
        print(f"{what}:\n{text_log}")
    elif "warning" in text_log:
        print(f"{what}: warnings:\n{text_log}")
    return None


def main():
    argv = sys.argv[1:]
    cubin = None  # --cubin DIR: also write each module's sm_XX CUBIN there (cuobjdump -sass)
    if "--cubin" in argv:
        i = argv.index("--cubin")
        cubin = argv[i + 1]
        del argv[i:i + 2]
    regs = "--regs" in argv
    argv = [a for a in argv if a != "--regs"]
    if regs and not ARCH.startswith("sm_"):
        sys.exit("nvrtc-check: --regs needs NVRTC_ARCH=sm_XX (registers are assigned for a real GPU)")
    all_ = "--all" in argv
    lib = ctypes.CDLL(find_lib([a for a in argv if a != "--all"]))
    whole = "".join(f"// ---- {n}\n{src(n)}\n" for n in SOURCES)
    # The main module (no attention kernel), then each attention kernel's module as the
    # engine builds them (src/backend/cuda/nvrtc.rs MAIN_HEAD, att_module): the one-row
    # kernels per head-width class, and attention_rows; with --all also the whole program.
    modules = [("main module", "#define ATT_KERNEL -1\n" + whole)]
    for k in (0, 1):
        for hd in ATT_WIDTHS:
            modules.append((f"attention {k} hd {hd}", f"#define ATT_KERNEL {k}\n#define ATT_HD {hd}\n" + whole))
    modules.append(("attention rows", "#define ATT_KERNEL 2\n" + whole))
    if all_:
        modules.append(("whole program", whole))
    for tile in (1, 3, 8) if all_ else (1, 8):
        for kind in list(range(FORMATS)) + ["generic"]:
            if not all_ and tile != 1:
                continue
            head = "#define MV_GENERIC\n" if kind == "generic" else f"#define MV_FMT {kind}\n"
            modules.append((f"matvec {kind} tile {tile}",
                            head + f"#define MV_RT {tile}\n" + "".join(src(n) for n in MV_SOURCES)))
        for fmt in VECTORIZED:
            # One module per rows-per-warp variant (MVQ_NW), as the engine builds them.
            # The dense one-row walk (mvq_d8, MVQ_NW 8) only in one-row modules.
            for nw in (1, 2, 4, 8) if tile == 1 else (1, 2, 4):
                modules.append((f"mvq {fmt} tile {tile} nw {nw}",
                                f"#define MVQ_FMT {fmt}\n#define MV_RT {tile}\n#define MVQ_NW {nw}\n"
                                + "".join(src(n) for n in MV_SOURCES + ["mvq.cu"])))
                # The folding module (gemma3's post-norm add in the prologue: MVQ_PRE_BASE
                # kinds, nvrtc.rs build_mv), built at one row only.
                if tile == 1:
                    modules.append((f"mvq pre {fmt} tile {tile} nw {nw}",
                                    f"#define MVQ_FMT {fmt}\n#define MV_RT {tile}\n#define MVQ_NW {nw}\n"
                                    "#define MVQ_PRE\n"
                                    + "".join(src(n) for n in MV_SOURCES + ["mvq.cu"])))
    # The mixed one-row modules (MVQ_MIX_BASE kinds, nvrtc.rs build_mv: two formats side by
    # side, folding, mvq_x1 / mvq_x2): gemma3's Q5_0|Q8_0 and a Q4_K_M layer's Q4_K|Q6_K;
    # with --all every pair of vectorized formats.
    pairs = [(a, b) for a in VECTORIZED for b in VECTORIZED if a < b] if all_ else [(5, 7), (10, 12)]
    for fa, fb in pairs:
        for nw in (1, 2):
            modules.append((f"mvq mix {fa}|{fb} tile 1 nw {nw}",
                            f"#define MVQ_FMT {fa}\n#define MVQ_FMT2 {fb}\n#define MV_RT 1\n"
                            f"#define MVQ_NW {nw}\n#define MVQ_PRE\n"
                            + "".join(src(n) for n in MV_SOURCES + ["mvq.cu"])))
    # The tensor-core kernels (--mma on), one module each as the engine builds them
    # (src/backend/cuda/mma.rs mma_module_head): mma_prep alone (MMA_SET -1), then kernel
    # MMA_SLOT of format MMA_SET's set; with --all also the whole program, every kernel.
    mma_src = "".join(src(n) for n in MV_SOURCES + ["mma.cu"])
    modules.append(("mma prep", "#define MMA_Q4K\n#define MMA_SET -1\n" + mma_src))
    for fset in range(MMA_FORMATS):
        for slot in range(MMA_SET_KERNELS):
            modules.append((f"mma set {fset} kernel {slot}",
                            f"#define MMA_Q4K\n#define MMA_SET {fset}\n#define MMA_SLOT {slot}\n" + mma_src))
    # The mixed Q4_K-then-Q6_K decode (mma.rs MMA_MIX: set 6, slots 0 and 1 only).
    for slot in range(MMA_MIX_KERNELS):
        modules.append((f"mma set {MMA_FORMATS} kernel {slot}",
                        f"#define MMA_Q4K\n#define MMA_SET {MMA_FORMATS}\n#define MMA_SLOT {slot}\n" + mma_src))
    if all_:
        modules.append(("mma q4k", "#define MMA_Q4K\n" + "".join(src(n) for n in MV_SOURCES + ["mma.cu"])))
    # The wgmma Q4_K GEMM and its prep (mma.rs MMA_WG: set 7, slots 0 and 1), built by the
    # engine for compute capability 9.0 only, for sm_90a (nvrtc.rs Target::sm90a): compiled
    # so here whatever NVRTC_ARCH says (its sm_ form: sm_90a, for --regs and --cubin).
    wg_arch = "sm_90a" if ARCH.startswith("sm_") else "compute_90a"
    for slot in range(MMA_WG_KERNELS):
        modules.append((f"mma set {MMA_FORMATS + 1} kernel {slot}",
                        f"#define MMA_Q4K\n#define MMA_SET {MMA_FORMATS + 1}\n#define MMA_SLOT {slot}\n" + mma_src,
                        wg_arch))
    only = os.environ.get("ONLY")
    modules = [m for m in modules if not only or only in m[0]]
    # NVRTC releases the GIL inside ctypes calls: one module per core at a time.
    from concurrent.futures import ThreadPoolExecutor
    extra = ["--ptxas-options=-v"] if regs else []
    with ThreadPoolExecutor(max_workers=1 if regs else (os.cpu_count() or 1)) as pool:
        errs = list(pool.map(lambda m: compile_module(lib, m[0], m[1], arch=m[2] if len(m) > 2 else ARCH,
                                                      cubin=cubin, extra=extra, verbose=regs), modules))
    bad = 0
    for err in errs:
        if err:
            bad += 1
            print(err)
    print(f"nvrtc-check: {len(modules) - bad} modules compiled, {bad} failed ({ARCH})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
