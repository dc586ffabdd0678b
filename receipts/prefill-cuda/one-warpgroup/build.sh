#!/usr/bin/env bash
# Issue 30 step 50 (BENCH.md "One warpgroup a wgmma GEMM block"): builds, on this machine (no
# GPU needed), the binaries call1.sh, call2.sh and call3.sh compare, into .stage/bin
# (gitignored), by scripts/build-variant.sh:
#   M  = 23e374e (step 48's kernel: 2 warpgroups a block, two blocks an SM, 128 registers);
#   R  = M + r.patch: WG_NWG 1 (kernels/mma.cu default, cuda/mma.rs MMA_WG_NWG) and
#        __launch_bounds__(128, 3): one warpgroup a block, three an SM, 168 registers, the
#        pick rule counting the new 4-m-tile blocks (call 1's build);
#   R2 = R + r2.patch: CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT 100 on the kernels
#        given dynamic shared memory (nvrtc.rs load_kernel), to see whether the driver's own
#        choice of carveout held R to fewer blocks an SM (it did not: R2 = R in call 1);
#   L  = main with step 50 (R, the pick rule counted in step 48's 8-m-tile blocks).
# Proves nothing by itself: the patches apply and build.
#   bash receipts/prefill-cuda/one-warpgroup/build.sh         [LAND=commit of L, default HEAD]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bv=$here/../../../scripts/build-variant.sh
CHECK_ONLY=1 "$bv" R2 23e374e "$here"/r.patch "$here"/r2.patch
"$bv" M 23e374e
"$bv" R 23e374e "$here"/r.patch
"$bv" R2 23e374e "$here"/r.patch "$here"/r2.patch
"$bv" L "$(git -C "$here" rev-parse "${LAND:-HEAD}")"
