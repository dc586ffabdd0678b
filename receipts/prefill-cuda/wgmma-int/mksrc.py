#!/usr/bin/env python3
"""Issue 30, step 47 (BENCH.md): writes eng_src.cu for probe.cu from a tree's kernels
(python3 mksrc.py KERNELS_DIR): the engine's Q4_K GEMM module as src/backend/cuda/mma.rs
assembles it (mma_module_head for slot 2, mma_gemm; then MMA_SOURCES in order), and the narrow
GEMM (slot 3, mma_gemm_n) from the same macros, so the probe runs the engine's own kernels as
the engine picks them. Not part of the build."""
import os, sys
K = sys.argv[1]
head = "#define MMA_Q4K\n#define MMA_SET 0\n#define MMA_SLOT 2\n"
src = head + "".join("// ---- %s\n%s\n" % (n, open(os.path.join(K, n)).read())
                     for n in ["common.cu", "ffn.cu", "matvec.cu", "mma.cu"])
src += "// ---- the narrow GEMM (slot 3)\nMMA_K3(MF_Q4K, )\n"
open("eng_src.cu", "w").write(src)
