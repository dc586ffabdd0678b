#!/usr/bin/env python3
"""Issue 30, step 21 (BENCH.md): writes eng_src.cu for probe.cu from a tree's kernels
(python3 mksrc.py KERNELS_DIR): the engine's Q4_K GEMM module exactly as the engine builds it
(src/backend/cuda/mma.rs mma_module_head for mma_gemm, then MMA_SOURCES in order), so the
probe times and compares against the engine's own kernel. Not part of the build."""
import os, sys
K = sys.argv[1]
head = "#define MMA_Q4K\n#define MMA_SET 0\n#define MMA_SLOT 2\n"
src = head + "".join("// ---- %s\n%s\n" % (n, open(os.path.join(K, n)).read())
                     for n in ["common.cu", "ffn.cu", "matvec.cu", "mma.cu"])
open("eng_src.cu", "w").write(src)
