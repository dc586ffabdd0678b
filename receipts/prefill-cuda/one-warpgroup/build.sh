#!/usr/bin/env bash
# Issue 30 step 50 (BENCH.md "One warpgroup a wgmma GEMM block"): builds, on this machine (no
# GPU needed), the binaries call1.sh and verify.sh compare, into .stage/bin (gitignored):
#   M  = 23e374e (step 48's kernel: 2 warpgroups a block, two blocks an SM, 128 registers);
#   R  = M with WG_NWG 1 (kernels/mma.cu default, cuda/mma.rs MMA_WG_NWG) and
#        __launch_bounds__(128, 3): one warpgroup a block, three an SM, 168 registers, the
#        pick rule counting the new 4-m-tile blocks (call 1's build);
#   R2 = R with CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT 100 on the kernels given
#        dynamic shared memory (nvrtc.rs load_kernel), to see whether the driver's own choice
#        of carveout held R to fewer blocks an SM (it did not: R2 = R in call 1);
#   L  = main with step 50 (R, the pick rule counted in step 48's 8-m-tile blocks).
# Proves nothing by itself: the edits apply and build.
#   bash receipts/prefill-cuda/one-warpgroup/build.sh         [LAND=commit of L, default HEAD]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
wt=/tmp/step50-wt
mkdir -p "$repo/.stage/bin"
git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
trap 'git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true' EXIT
build() {  # $1: name
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/step50-target cargo build --release -q)
  strip -o "$repo/.stage/bin/$1" /tmp/step50-target/release/ppn-gate
  echo "built $1"
}
git -C "$repo" worktree add --detach "$wt" 23e374e > /dev/null
build M
cu=$wt/src/backend/cuda/kernels/mma.cu
sed -i 's/^#define WG_NWG 2$/#define WG_NWG 1/' "$cu"
sed -i 's/__launch_bounds__(WG_NWG \* 128, WG_NWG > 2 ? 1 : 2)/__launch_bounds__(WG_NWG * 128, WG_NWG > 2 ? 1 : WG_NWG == 1 ? 3 : 2)/' "$cu"
sed -i 's/^pub(crate) const MMA_WG_NWG: usize = 2;/pub(crate) const MMA_WG_NWG: usize = 1;/' "$wt/src/backend/cuda/mma.rs"
[ "$(git -C "$wt" diff --numstat | wc -l)" = 2 ] || { echo "build.sh: R's edits did not apply" >&2; exit 1; }
build R
python3 - "$wt/src/backend/cuda/nvrtc.rs" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = '''            ))
        })?;
    }
    if std::env::var_os("PPN_CUDA_PROF").is_some() {'''
new = '''            ))
        })?;
        f.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            100,
        )
        .map_err(|e| op_err(format!("{what}: kernel {name}: carveout: {e}")))?;
    }
    if std::env::var_os("PPN_CUDA_PROF").is_some() {'''
assert old in s, "R2's edit did not apply"
open(p, "w").write(s.replace(old, new))
PY
build R2
git -C "$repo" worktree remove --force "$wt"
git -C "$repo" worktree add --detach "$wt" "${LAND:-HEAD}" > /dev/null
build L
