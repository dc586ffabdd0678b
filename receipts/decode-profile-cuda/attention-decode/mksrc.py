#!/usr/bin/env python3
"""Issue 30, steps 16 and 17 (BENCH.md): writes att_src.cu for probe.cu from a tree's kernels
(python3 mksrc.py KERNELS_DIR): common.cu + prefetch_l2 + attention.cu, with PSTOP hooks in
att_fused (probe builds only: the kernel exits after phase PSTOP, its values consumed so that
their loads stay). Not part of the build."""
import os, re, sys
K = sys.argv[1]
common = open(os.path.join(K, "common.cu")).read()
mv = open(os.path.join(K, "matvec.cu")).read()
i = mv.index("__device__ __forceinline__ void prefetch_l2")
j = mv.index("\n}\n", i) + 3
att = open(os.path.join(K, "attention.cu")).read()
def ins_after(s, anchor, text):
    assert s.count(anchor) == 1, anchor
    return s.replace(anchor, anchor + text)
def ins_before(s, anchor, text):
    assert s.count(anchor) == 1, anchor
    return s.replace(anchor, text + anchor)
OUT = "if (tid < hd) out[(size_t)h * hd + tid] = z; return;"
att = ins_after(att, "    if (!live) return;  // uniform over the block\n",
 "#if defined(PSTOP) && PSTOP == 0\n    { float z = qa + qb + ka + kb + v0 + v1 + (float)p; " + OUT + " }\n#endif\n")
VV = "if constexpr (EARLY) {\n#pragma unroll\n for (int u = 0; u < (EARLY ? ATT_VDEPTH : 1); u++) z += vv0[u]; }\n"
KV = "if constexpr (PER > 0 && EARLY) {\n#pragma unroll\n for (int j = 0; j < (PER > 0 ? P : 1); j++)\n#pragma unroll\n for (int u = 0; u < (PER > 0 ? PER : 1); u++) z += kv[j][u]; }\n"
att = ins_before(att, "    // (3) Rotate in registers",
 "#if defined(PSTOP) && PSTOP == 1\n    { float z = c + s + qa + ka + v0;\n" + KV + VV + OUT + " }\n#endif\n")
att = ins_after(att, "    for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, red[4 + w]);\n",
 "#if defined(PSTOP) && PSTOP == 2\n    { float z = m;\n" + VV + OUT + " }\n#endif\n")
att = ins_after(att, "    const float inv = red[2];\n",
 "#if defined(PSTOP) && PSTOP == 3\n    { float z = inv;\n" + VV + OUT + " }\n#endif\n")
open("att_src.cu", "w").write(common + "\n" + mv[i:j] + "\n" + att)
