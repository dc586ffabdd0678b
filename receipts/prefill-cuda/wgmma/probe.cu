// Issue 30, step 21 (BENCH.md "The prefill GEMM on wgmma"): what this proves.
//  1. micro: does Hopper's wgmma.mma_async m64nNk16 (f16 in, f32 accumulate, A from
//     registers, B from shared memory) give THE ORDER's per-super-block chain
//     S = mma(A_ks, Xhi_ks, S); S = mma(A_ks, Xlo_ks, S) (kernels/mma.cu) with the SAME BITS
//     as mma.sync m16n8k16 does? Same A fragments and same XF fragments in, every S compared
//     bit for bit; four descriptor variants (trans-b, LBO/SBO order), the layout found by
//     which one lands within rounding.
//  2. gemm: ten Q4_K GEMMs on wgmma (sections 2 to 4 below: a warpgroup = 4 m-tiles x BN
//     columns, the B fragments copied into shared memory once per block; main's table names
//     them) against the engine's own mma_gemm (eng_src.cu, mksrc.py from a tree), same inputs:
//     every output's bits, and the microseconds a launch on the 8B shape's matrices at 512,
//     64 and 37 columns. `probe one`: only the gate|up launch at 512 columns (call-ncu.sh).
// Research code for one GPU call, not part of the build: no engine file includes it.
// Build and run on the GPU machine (call.sh):
//   python3 mksrc.py KERNELS && nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false \
//     -prec-div=true -prec-sqrt=true -o probe probe.cu && ./probe
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include "eng_src.cu"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1);} } while (0)

// ---- wgmma helpers (sm_90a)
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Shared-memory matrix descriptor, no swizzle: start >> 4 at bits 0-13, LBO >> 4 at 16-29,
// SBO >> 4 at 32-45.
__device__ __forceinline__ u64 wg_desc(const void* p, u32 lbo, u32 sbo) {
    const u32 addr = (u32)__cvta_generic_to_shared(p);
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16) |
           ((u64)((sbo & 0x3FFFF) >> 4) << 32);
}

#define R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
              "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
template <int TN>
__device__ __forceinline__ void wg_mma64(float (&d)[32], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
        : R8(0), R8(8), R8(16), R8(24)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(TN));
}
template <int TN>
__device__ __forceinline__ void wg_mma32(float (&d)[16], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, %21;\n}\n"
        : R8(0), R8(8)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(TN));
}
template <int BN, int TN>
__device__ __forceinline__ void wg_mma(float (&d)[BN / 2], const u32 (&a)[4], u64 desc) {
    if constexpr (BN == 64) wg_mma64<TN>(d, a, desc);
    else wg_mma32<TN>(d, a, desc);
}

// The B operand of one super-block in shared memory, K-major core matrices (8 columns x 8 k,
// 16 bytes a column): byte ks * BN * 32 + (n / 8) * 256 + kh * 128 + (n % 8) * 16 holds column
// n's k = ks * 16 + 8 kh .. + 7; hi at 0, lo at 16 * BN * 32. From XF's uint4 (ks * 4 + t) =
// {hi(k0, k0+1), hi(k0+8, k0+9), lo(k0, k0+1), lo(k0+8, k0+9)}, k0 = ks * 16 + 2t.
template <int BN>
__device__ __forceinline__ void wg_fill(u8* sm, const uint4* XF, int col0, int ncol_pad, int n_sb,
                                        int sb, int tid, int nthr) {
    for (int p = tid; p < BN * 16; p += nthr) {
        const int n = p % BN, ks = p / BN;
        const int col = min(col0 + n, ncol_pad - 1);
        const uint4* src = XF + ((size_t)col * n_sb + sb) * 64 + ks * 4;
        const uint4 u0 = src[0], u1 = src[1], u2 = src[2], u3 = src[3];
        const int off = ks * (BN * 32) + (n >> 3) * 256 + (n & 7) * 16;
        u8* lo = sm + 16 * BN * 32;
        *(uint4*)(sm + off) = make_uint4(u0.x, u1.x, u2.x, u3.x);
        *(uint4*)(sm + off + 128) = make_uint4(u0.y, u1.y, u2.y, u3.y);
        *(uint4*)(lo + off) = make_uint4(u0.z, u1.z, u2.z, u3.z);
        *(uint4*)(lo + off + 128) = make_uint4(u0.w, u1.w, u2.w, u3.w);
    }
}
template <bool SWAP>
__device__ __forceinline__ u64 wg_bdesc(const u8* p) {
    return SWAP ? wg_desc(p, 256, 128) : wg_desc(p, 128, 256);
}

// THE ORDER's epilogue of one super-block for a lane's outputs: v_sb of each (rows g, g + 8 x
// the BN / 8 column pairs 2t, 2t + 1) from its chain S, then acc += v_sb, in registers or (ACCS)
// in shared memory (word i of thread tid at accS[i * blockDim + tid]). xsS / xeS: the block's
// columns' XS [BN][8] and XE [BN] of that super-block.
template <int BN, bool ACCS>
__device__ __forceinline__ void wg_epilogue(const float (&S)[BN / 2], uint2 dd, uint4 mn, const float* xsS,
                                            const float* xeS, float (&acc)[BN / 2], float* accS) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int ca = 8 * j + 2 * t;
        float xa[8], xc[8];
#pragma unroll
        for (int s = 0; s < 8; ++s) { xa[s] = xsS[ca * 8 + s]; xc[s] = xsS[ca * 8 + 8 + s]; }
        const float Sj[4] = {S[4 * j], S[4 * j + 1], S[4 * j + 2], S[4 * j + 3]};
        float v[4];
        mma_frag_values(Sj, dd, mn, xa, xc, xeS[ca], xeS[ca + 1], v);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            if constexpr (ACCS) {
                float* p = accS + (4 * j + c) * blockDim.x + threadIdx.x;
                *p = __fadd_rn(*p, v[c]);
            } else {
                acc[4 * j + c] = __fadd_rn(acc[4 * j + c], v[c]);
            }
        }
    }
}
// The lane's outputs of m-tile (m, o0) through mv_finish, columns past ncols skipped.
template <int BN, bool ACCS>
__device__ __forceinline__ void wg_store(const MvArgs& a, int m, int o0, int col0, int ncols,
                                         const float (&acc)[BN / 2], const float* accS) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int rin = g + (c >= 2 ? 8 : 0), col = col0 + 8 * j + 2 * t + (c & 1);
            if (col < ncols)
                mv_finish(a, m, o0 + rin, col, ACCS ? accS[(4 * j + c) * blockDim.x + threadIdx.x] : acc[4 * j + c], 0.0f);
        }
}

// ---- 1. micro: A fragments AF[(w * n_sb + sb) * 16 + ks][lane] (uint4 = the 4 A registers),
// XF as the engine's (64 columns); S out[(sb * 64 + row) * 64 + col].
__global__ void micro_sync(const uint4* AF, const uint4* XF, float* out, int n_sb) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int sb = 0; sb < n_sb; ++sb) {
        float S[8][4];
        for (int j = 0; j < 8; ++j) for (int c = 0; c < 4; ++c) S[j][c] = 0.0f;
        for (int ks = 0; ks < 16; ++ks) {
            const uint4 av = AF[((size_t)(w * n_sb + sb) * 16 + ks) * 32 + lane];
            const u32 a[4] = {av.x, av.y, av.z, av.w};
            for (int j = 0; j < 8; ++j) {
                const uint4 x = XF[((size_t)(8 * j + g) * n_sb + sb) * 64 + ks * 4 + t];
                mma16816(S[j], a, x.x, x.y);
                mma16816(S[j], a, x.z, x.w);
            }
        }
        for (int j = 0; j < 8; ++j)
            for (int c = 0; c < 4; ++c) {
                const int row = 16 * w + g + (c >= 2 ? 8 : 0), col = 8 * j + 2 * t + (c & 1);
                out[((size_t)sb * 64 + row) * 64 + col] = S[j][c];
            }
    }
}
template <int TN, bool SWAP>
__global__ void micro_wg(const uint4* AF, const uint4* XF, float* out, int n_sb) {
    extern __shared__ __align__(128) u8 sm[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int sb = 0; sb < n_sb; ++sb) {
        __syncthreads();
        wg_fill<64>(sm, XF, 0, 64, n_sb, sb, threadIdx.x, blockDim.x);
        fence_async_smem();
        __syncthreads();
        float S[32];
        for (int i = 0; i < 32; ++i) S[i] = 0.0f;
        wg_fence();
        for (int ks = 0; ks < 16; ++ks) {
            const uint4 av = AF[((size_t)(w * n_sb + sb) * 16 + ks) * 32 + lane];
            const u32 a[4] = {av.x, av.y, av.z, av.w};
            wg_fence();
            wg_mma64<TN>(S, a, wg_bdesc<SWAP>(sm + ks * 2048));
            wg_mma64<TN>(S, a, wg_bdesc<SWAP>(sm + 16 * 2048 + ks * 2048));
        }
        wg_commit();
        wg_wait<0>();
        for (int j = 0; j < 8; ++j)
            for (int c = 0; c < 4; ++c) {
                const int row = 16 * w + g + (c >= 2 ? 8 : 0), col = 8 * j + 2 * t + (c & 1);
                out[((size_t)sb * 64 + row) * 64 + col] = S[4 * j + c];
            }
    }
}

// ---- 2. the Q4_K GEMM on wgmma. Block: 2 warpgroups, 8 warps, warp w = m-tile
// blockIdx.x * 8 + w (a warpgroup's 4 warps = its 64 rows); BN columns from blockIdx.y * BN.
// Per super-block, in order (THE ORDER's y = y + v_sb): the block copies the BN columns' B
// fragments (and XS, XE) into shared memory, each warp builds its m-tile's A fragment of each
// k-step as mma_gemm_sb does, and the warpgroup's wgmma chain (hi, then lo, per k-step) forms
// S_sb; v_sb by mma_frag_values, added to acc in the lane's registers.
template <int BN, int MINB>
__global__ void __launch_bounds__(256, MINB) wg_gemm(MvArgs a, const uint4* XF, const float* XE,
                                              const float* XS, int n_mt, int n_sb, int ncols) {
    extern __shared__ __align__(128) u8 sm[];
    float* xsS = (float*)(sm + 2 * 16 * BN * 32);  // [BN][8]
    float* xeS = xsS + BN * 8;                      // [BN]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
    const int mt = blockIdx.x * 8 + warp, col0 = blockIdx.y * BN;
    const int ncol_pad = ((ncols + 7) >> 3) * 8;
    int m, o0;
    const u8* blk = mma_tile(a, min(mt, n_mt - 1), n_sb, MMA_BLK, &m, &o0);
    constexpr int NR = BN / 2;
    float acc[NR], S[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) acc[i] = 0.0f;
    for (int sb = 0; sb < n_sb; ++sb) {
        __syncthreads();  // every warpgroup's wgmmas of sb - 1 have completed (wait 0)
        wg_fill<BN>(sm, XF, col0, ncol_pad, n_sb, sb, threadIdx.x, 256);
        for (int p = threadIdx.x; p < BN; p += 256) {
            const int col = col0 + p;
            const bool in = col < ncols;
            const float4* q = (const float4*)(XS + ((size_t)(in ? col : 0) * n_sb + sb) * 8);
            const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
            ((float4*)xsS)[2 * p] = in ? q[0] : z;
            ((float4*)xsS)[2 * p + 1] = in ? q[1] : z;
            xeS[p] = in ? XE[(size_t)col * n_sb + sb] : 0.0f;
        }
        fence_async_smem();
        __syncthreads();
        const u8* b = blk + (size_t)sb * MMA_BLK;
        const uint4 sc = __ldg((const uint4*)(b + MMA_SC_OFF + g * 32));
        const uint4 mn = __ldg((const uint4*)(b + MMA_SC_OFF + g * 32 + 16));
        const uint2 dd = __ldg((const uint2*)(b + MMA_DD_OFF + g * 8));
#pragma unroll
        for (int i = 0; i < NR; ++i) S[i] = 0.0f;
        wg_fence();
#pragma unroll
        for (int k4 = 0; k4 < 4; ++k4) {
            const uint4 nib = __ldg((const uint4*)(b + k4 * 512 + lane * 16));
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const int ks = k4 * 4 + kk;
                const MmaKc k = mma_kconsts(mma_byte_at(sc.x, sc.y, ks >> 1), mma_byte_at(sc.z, sc.w, ks >> 1));
                u32 w4[4];
                mma_afrag(mma_comp4(nib, kk), k, w4);
                wg_fence();
                wg_mma<BN, 0>(S, w4, wg_bdesc<false>(sm + ks * BN * 32));               // hi,
                wg_mma<BN, 0>(S, w4, wg_bdesc<false>(sm + 16 * BN * 32 + ks * BN * 32));  // then lo
            }
        }
        wg_commit();
        wg_wait<0>();
        wg_epilogue<BN, false>(S, dd, mn, xsS, xeS, acc, nullptr);
    }
    if (mt >= n_mt) return;
    wg_store<BN, false>(a, m, o0, col0, ncols, acc, nullptr);
}


// ---- 3. the pipelined wgmma GEMM (wg2). The GEMM's own activation layout XG (what a prep
// variant for GEMM launches would write; the same f16 values as XF): per column and
// super-block 1024 bytes, hi of k = 0..255, then lo of k = 0..255. A stage = half a
// super-block (8 k-steps) of BN columns, copied by cp.async into a ring of WG2_NST stages
// (16-byte rows straight into the K-major core matrices), with the super-block's XS and XE
// into a ring of 4. Per warpgroup the chain of a super-block runs into S0 or S1 (alternating
// super-blocks) so that the epilogue of super-block sb - 1 (v_sb and acc += v_sb, THE ORDER)
// runs while the tensor cores work on sb (PP). Block: NW warps = NW m-tiles, BN columns;
// grid (column blocks, m-blocks): the blocks that share a matrix slice run together.
#define WG2_NST 4
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((u32)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((u32)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
template <int NR>
__device__ __forceinline__ void wg_pin(float (&d)[NR]) {
#pragma unroll
    for (int i = 0; i < NR; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The XS/XE ring of 4 super-blocks at `ring` (BN columns): super-block sb's XS [BN][8] and
// XE [BN], in slot sb & 3.
template <int BN>
__device__ __forceinline__ float* wg_xs(u8* ring, int sb) { return (float*)ring + (sb & 3) * BN * 8; }
template <int BN>
__device__ __forceinline__ float* wg_xe(u8* ring, int sb) { return (float*)ring + 4 * BN * 8 + (sb & 3) * BN; }

// Stage q's B (half q & 1 of super-block q >> 1, BN columns from col0) from XG into the stage
// at st by cp.async: 16-byte rows straight into the K-major core matrices (wg_fill's layout,
// 8 k-steps), hi at 0, lo at 8 * BN * 32.
template <int BN>
__device__ __forceinline__ void wg_copy_b(u8* st, const u8* XG, int q, int col0, int ncol_pad, int n_sb, int tid,
                                          int nthr) {
    const int sb = q >> 1, half = q & 1;
    for (int p = tid; p < BN * 16; p += nthr) {
        const int r = p & 15, n = p >> 4, ksl = r >> 1, kh = r & 1;
        const int col = min(col0 + n, ncol_pad - 1);
        const u8* src = XG + ((size_t)col * n_sb + sb) * 1024 + (half * 128 + ksl * 16 + kh * 8) * 2;
        const int off = ksl * (BN * 32) + (n >> 3) * 256 + kh * 128 + (n & 7) * 16;
        cp_async16(st + off, src);
        cp_async16(st + 8 * BN * 32 + off, src + 512);
    }
}
// Super-block sb's XS and XE of the BN columns into the ring (columns past ncols: the last one's,
// never stored).
template <int BN>
__device__ __forceinline__ void wg_copy_xs(u8* ring, const float* XE, const float* XS, int sb, int col0, int ncols,
                                           int n_sb, int tid, int nthr) {
    float* xsS = wg_xs<BN>(ring, sb);
    float* xeS = wg_xe<BN>(ring, sb);
    for (int p = tid; p < BN * 3; p += nthr) {
        const int n = p / 3, w = p % 3, col = min(col0 + n, ncols - 1);
        if (w < 2) cp_async16(xsS + n * 8 + 4 * w, XS + ((size_t)col * n_sb + sb) * 8 + 4 * w);
        else cp_async4(xeS + n, XE + (size_t)col * n_sb + sb);
    }
}

template <int BN>
struct Wg2 {
    static constexpr int STB = 16 * BN * 32;  // one stage: 8 k-steps x BN columns, hi and lo
    static constexpr int SMEM = WG2_NST * STB + 4 * BN * 9 * 4;
};

template <int BN>
__device__ __forceinline__ void wg2_issue(u8* sm, const u8* XG, const float* XE, const float* XS, int q, int Q,
                                          int col0, int ncols, int ncol_pad, int n_sb, int tid) {
    if (q < Q) {
        wg_copy_b<BN>(sm + (q % WG2_NST) * Wg2<BN>::STB, XG, q, col0, ncol_pad, n_sb, tid, blockDim.x);
        if ((q & 1) == 0)
            wg_copy_xs<BN>(sm + WG2_NST * Wg2<BN>::STB, XE, XS, q >> 1, col0, ncols, n_sb, tid, blockDim.x);
    }
    cp_async_commit();  // every thread, every call: the group count stays q's
}

// Half `half` of super-block sb into S; then the epilogue of sb - 1 (in P, its mn/dd) when
// half is 0; then the ring slot of stage q - 1 is refilled with stage q + 3.
template <int BN, bool PP, bool PF, bool ACCS>
__device__ __forceinline__ void wg2_stage(u8* sm, const u8* XG, const float* XE, const float* XS, const u8* blk,
                                          int sb, int half, int Q, int col0, int ncols, int ncol_pad, int n_sb,
                                          float (&S)[BN / 2], uint4& sc, uint4& mn, uint2& dd,
                                          float (&P)[BN / 2], const uint4& mnP, const uint2& ddP,
                                          float (&acc)[BN / 2], uint4& pn0, uint4& pn1, uint4& psc,
                                          float* accS) {
    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2;
    const int q = 2 * sb + half;
    cp_async_wait<2>();  // stages q + 1 and q + 2 may be in flight; q has landed
    fence_async_smem();  // its bytes (generic proxy) visible to wgmma (async proxy)
    __syncthreads();
    const u8* st = sm + (q % WG2_NST) * Wg2<BN>::STB;
    const u8* b = blk + (size_t)sb * MMA_BLK;
    if (half == 0) {
        sc = PF ? psc : __ldg((const uint4*)(b + MMA_SC_OFF + g * 32));
        mn = __ldg((const uint4*)(b + MMA_SC_OFF + g * 32 + 16));
        dd = __ldg((const uint2*)(b + MMA_DD_OFF + g * 8));
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) S[i] = 0.0f;
        wg_pin(S);  // (no wgmma is writing S here: its last chain, sb - 2's, is complete)
    }
    const uint4 nib0 = PF ? pn0 : __ldg((const uint4*)(b + (2 * half) * 512 + lane * 16));
    const uint4 nib1 = PF ? pn1 : __ldg((const uint4*)(b + (2 * half + 1) * 512 + lane * 16));
#pragma unroll
    for (int ksl = 0; ksl < 8; ++ksl) {
        const int ks = half * 8 + ksl;
        const MmaKc k = mma_kconsts(mma_byte_at(sc.x, sc.y, ks >> 1), mma_byte_at(sc.z, sc.w, ks >> 1));
        u32 w4[4];
        mma_afrag(mma_comp4(ksl < 4 ? nib0 : nib1, ksl & 3), k, w4);
        wg_fence();
        wg_mma<BN, 0>(S, w4, wg_bdesc<false>(st + ksl * BN * 32));                // hi,
        wg_mma<BN, 0>(S, w4, wg_bdesc<false>(st + 8 * BN * 32 + ksl * BN * 32));  // then lo
    }
    wg_commit();
    if (PF && q + 1 < Q) {  // the next stage's weights, in flight while this chain runs
        const u8* bn = blk + (size_t)(half ? sb + 1 : sb) * MMA_BLK;
        pn0 = __ldg((const uint4*)(bn + (2 * (1 - half)) * 512 + lane * 16));
        pn1 = __ldg((const uint4*)(bn + (2 * (1 - half) + 1) * 512 + lane * 16));
        if (half) psc = __ldg((const uint4*)(bn + MMA_SC_OFF + g * 32));
    }
    if constexpr (PP) wg_wait<1>();  // stage q - 1's chain is done (P final when half is 0)
    else wg_wait<0>();               // no ping-pong: this chain is done; S final when half is 1
    wg_pin(P);
    if (PP ? (half == 0 && sb > 0) : half == 1) {
        const int se = PP ? sb - 1 : sb;
        u8* ring = sm + WG2_NST * Wg2<BN>::STB;
        if constexpr (PP) wg_epilogue<BN, ACCS>(P, ddP, mnP, wg_xs<BN>(ring, se), wg_xe<BN>(ring, se), acc, accS);
        else wg_epilogue<BN, ACCS>(S, dd, mn, wg_xs<BN>(ring, se), wg_xe<BN>(ring, se), acc, accS);
    }
    __syncthreads();  // both warpgroups are past stage q - 1: its slot may be refilled
    wg2_issue<BN>(sm, XG, XE, XS, q + 3, Q, col0, ncols, ncol_pad, n_sb, tid);
}

template <int BN, bool PP, int MINB, int NW, bool PF, bool ACCS = false>
__global__ void __launch_bounds__(NW * 32, MINB) wg2_gemm(MvArgs a, const u8* XG, const float* XE, const float* XS,
                                                  int n_mt, int n_sb, int ncols) {
    extern __shared__ __align__(128) u8 sm[];
    constexpr int NR = BN / 2;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2;
    const int col0 = blockIdx.x * BN, mt = blockIdx.y * NW + warp;
    const int ncol_pad = ((ncols + 7) >> 3) * 8, Q = 2 * n_sb;
    int m, o0;
    const u8* blk = mma_tile(a, min(mt, n_mt - 1), n_sb, MMA_BLK, &m, &o0);
    float acc[NR], S0[NR], S1[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) { acc[i] = 0.0f; S0[i] = 0.0f; S1[i] = 0.0f; }
    uint4 sc = make_uint4(0, 0, 0, 0), mn0 = sc, mn1 = sc;
    uint2 dd0 = make_uint2(0, 0), dd1 = dd0;
    // ACCS: acc in shared memory past the rings (NR words a thread, word i at i * blockDim + tid),
    // so that 64 columns a block fit 128 registers (16 warps an SM).
    float* accS = (float*)(sm + Wg2<BN>::SMEM);
    if (ACCS)
        for (int i = 0; i < NR; ++i) accS[i * blockDim.x + tid] = 0.0f;
    uint4 pn0 = make_uint4(0, 0, 0, 0), pn1 = pn0, psc = pn0;
    if (PF) {  // stage 0's weights
        pn0 = __ldg((const uint4*)(blk + lane * 16));
        pn1 = __ldg((const uint4*)(blk + 512 + lane * 16));
        psc = __ldg((const uint4*)(blk + MMA_SC_OFF + g * 32));
    }
    for (int q = 0; q < 3; ++q) wg2_issue<BN>(sm, XG, XE, XS, q, Q, col0, ncols, ncol_pad, n_sb, tid);
    // Super-block 0 before the loop, so that at the loop's head one chain on S0 is always in
    // flight (ptxas serializes every wgmma when the groups in flight differ between a loop's
    // entry and its back edge).
    wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, 0, 0, Q, col0, ncols, ncol_pad, n_sb, S0, sc, mn0, dd0, S1, mn1, dd1, acc, pn0, pn1, psc, accS);
    wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, 0, 1, Q, col0, ncols, ncol_pad, n_sb, S0, sc, mn0, dd0, S1, mn1, dd1, acc, pn0, pn1, psc, accS);
    int sb = 1;
    for (; sb + 1 < n_sb; sb += 2) {
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb, 0, Q, col0, ncols, ncol_pad, n_sb, S1, sc, mn1, dd1, S0, mn0, dd0, acc, pn0, pn1, psc, accS);
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb, 1, Q, col0, ncols, ncol_pad, n_sb, S1, sc, mn1, dd1, S0, mn0, dd0, acc, pn0, pn1, psc, accS);
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb + 1, 0, Q, col0, ncols, ncol_pad, n_sb, S0, sc, mn0, dd0, S1, mn1, dd1, acc, pn0, pn1, psc, accS);
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb + 1, 1, Q, col0, ncols, ncol_pad, n_sb, S0, sc, mn0, dd0, S1, mn1, dd1, acc, pn0, pn1, psc, accS);
    }
    if (sb < n_sb) {  // n_sb even: the last super-block (odd) on S1
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb, 0, Q, col0, ncols, ncol_pad, n_sb, S1, sc, mn1, dd1, S0, mn0, dd0, acc, pn0, pn1, psc, accS);
        wg2_stage<BN, PP, PF, ACCS>(sm, XG, XE, XS, blk, sb, 1, Q, col0, ncols, ncol_pad, n_sb, S1, sc, mn1, dd1, S0, mn0, dd0, acc, pn0, pn1, psc, accS);
    }
    wg_wait<0>();
    wg_pin(S0);
    wg_pin(S1);
    if (PP) {  // the last super-block's epilogue
        const int sb = n_sb - 1;
        u8* ring = sm + WG2_NST * Wg2<BN>::STB;
        if (sb & 1) wg_epilogue<BN, ACCS>(S1, dd1, mn1, wg_xs<BN>(ring, sb), wg_xe<BN>(ring, sb), acc, accS);
        else wg_epilogue<BN, ACCS>(S0, dd0, mn0, wg_xs<BN>(ring, sb), wg_xe<BN>(ring, sb), acc, accS);
    }
    if (mt >= n_mt) return;
    wg_store<BN, ACCS>(a, m, o0, col0, ncols, acc, accS);
}


// ---- 4. wg3: wg2 without the ping-pong (each warpgroup waits on its own chain, the other
// warpgroups of the SM filling the tensor cores meanwhile), the weights too staged by
// cp.async (a stage's nibble words of the block's 8 m-tiles, and per super-block their
// scales into a ring of 4), and a stage's 8 A fragments built before its 16 wgmmas are
// issued back to back after one wgmma.fence.
#define WG3_NST 3
template <int BN>
struct Wg3 {
    static constexpr int BB = 16 * BN * 32;         // B of a stage: 8 k-steps, hi and lo
    static constexpr int STB = BB + 8 * 1024;       // + the 8 m-tiles' nibble words
    static constexpr int SCB = 8 * 320;             // a super-block's scales, 8 m-tiles
    static constexpr int SMEM = WG3_NST * STB + 4 * SCB + 4 * BN * 9 * 4;
};
template <int BN>
__device__ __forceinline__ void wg3_issue(u8* sm, const u8* XG, const float* XE, const float* XS, const u8* blk0,
                                          int n_mt, int mtb, int q, int Q, int col0, int ncols, int ncol_pad,
                                          int n_sb, int tid) {
    typedef Wg3<BN> W;
    if (q < Q) {
        const int sb = q >> 1, half = q & 1;
        u8* st = sm + (q % WG3_NST) * W::STB;
        wg_copy_b<BN>(st, XG, q, col0, ncol_pad, n_sb, tid, 256);
        // nibble words: m-tile i's 1024 bytes (k4 = 2 half, 2 half + 1) at BB + i * 1024
        for (int p = tid; p < 8 * 64; p += 256) {
            const int i = p >> 6, o = (p & 63) * 16;
            const u8* b = blk0 + (size_t)min(mtb + i, n_mt - 1) * n_sb * MMA_BLK + (size_t)sb * MMA_BLK;
            cp_async16(st + W::BB + i * 1024 + o, b + half * 1024 + o);
        }
        if (half == 0) {
            u8* scS = sm + WG3_NST * W::STB + (sb & 3) * W::SCB;
            for (int p = tid; p < 8 * 20; p += 256) {
                const int i = p / 20, o = (p % 20) * 16;
                const u8* b = blk0 + (size_t)min(mtb + i, n_mt - 1) * n_sb * MMA_BLK + (size_t)sb * MMA_BLK;
                cp_async16(scS + i * 320 + o, b + MMA_SC_OFF + o);
            }
            wg_copy_xs<BN>(sm + WG3_NST * W::STB + 4 * W::SCB, XE, XS, sb, col0, ncols, n_sb, tid, 256);
        }
    }
    cp_async_commit();
}

template <int BN, int MINB>
__global__ void __launch_bounds__(256, MINB) wg3_gemm(MvArgs a, const u8* XG, const float* XE, const float* XS,
                                                     int n_mt, int n_sb, int ncols) {
    typedef Wg3<BN> W;
    extern __shared__ __align__(128) u8 sm[];
    constexpr int NR = BN / 2;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2;
    const int col0 = blockIdx.x * BN, mtb = blockIdx.y * 8, mt = mtb + warp;
    const int ncol_pad = ((ncols + 7) >> 3) * 8, Q = 2 * n_sb;
    int m, o0;
    mma_tile(a, min(mt, n_mt - 1), n_sb, MMA_BLK, &m, &o0);
    int m0, o00;
    const u8* blk0 = mma_tile(a, 0, n_sb, MMA_BLK, &m0, &o00);  // m-tile i at blk0 + i * n_sb * BLK (mode 0, one matrix)
    float acc[NR], S[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) acc[i] = 0.0f;
    wg3_issue<BN>(sm, XG, XE, XS, blk0, n_mt, mtb, 0, Q, col0, ncols, ncol_pad, n_sb, tid);
    wg3_issue<BN>(sm, XG, XE, XS, blk0, n_mt, mtb, 1, Q, col0, ncols, ncol_pad, n_sb, tid);
    for (int q = 0; q < Q; ++q) {
        const int sb = q >> 1, half = q & 1;
        cp_async_wait<1>();
        fence_async_smem();
        __syncthreads();
        const u8* st = sm + (q % WG3_NST) * W::STB;
        const u8* scS = sm + WG3_NST * W::STB + (sb & 3) * W::SCB + warp * 320;
        const uint4 sc = *(const uint4*)(scS + g * 32);
        const uint4 nib0 = *(const uint4*)(st + W::BB + warp * 1024 + lane * 16);
        const uint4 nib1 = *(const uint4*)(st + W::BB + warp * 1024 + 512 + lane * 16);
        u32 af[8][4];
#pragma unroll
        for (int ksl = 0; ksl < 8; ++ksl) {
            const int ks = half * 8 + ksl;
            const MmaKc k = mma_kconsts(mma_byte_at(sc.x, sc.y, ks >> 1), mma_byte_at(sc.z, sc.w, ks >> 1));
            mma_afrag(mma_comp4(ksl < 4 ? nib0 : nib1, ksl & 3), k, af[ksl]);
        }
        if (half == 0) {
#pragma unroll
            for (int i = 0; i < NR; ++i) S[i] = 0.0f;
        }
        wg_fence();
#pragma unroll
        for (int ksl = 0; ksl < 8; ++ksl) {
            wg_mma<BN, 0>(S, af[ksl], wg_bdesc<false>(st + ksl * BN * 32));                // hi,
            wg_mma<BN, 0>(S, af[ksl], wg_bdesc<false>(st + 8 * BN * 32 + ksl * BN * 32));  // then lo
        }
        wg_commit();
        wg_wait<0>();
        if (half == 1) {
            const uint4 mn = *(const uint4*)(scS + g * 32 + 16);
            const uint2 dd = *(const uint2*)(scS + 256 + g * 8);
            u8* ring = sm + WG3_NST * W::STB + 4 * W::SCB;
            wg_epilogue<BN, false>(S, dd, mn, wg_xs<BN>(ring, sb), wg_xe<BN>(ring, sb), acc, nullptr);
        }
        __syncthreads();  // stage q's slot (and, past it, q - 1's) is free for q + 2 ... 
        wg3_issue<BN>(sm, XG, XE, XS, blk0, n_mt, mtb, q + 2, Q, col0, ncols, ncol_pad, n_sb, tid);
    }
    if (mt >= n_mt) return;
    wg_store<BN, false>(a, m, o0, col0, ncols, acc, nullptr);
}

// ---- host
static u32 rng = 12345u;
static u32 rnd() { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static float frand() { return (rnd() >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
static unsigned short h16(float f) { __half h = __float2half_rn(f); return *(unsigned short*)&h; }
static float f16f(unsigned short s) { __half h; *(unsigned short*)&h = s; return __half2float(h); }

// XF for ncols columns: x' in about +-[2^-3, 2), hi = rn(x'), lo = rn(x' - hi).
static std::vector<u32> make_xf(int ncols, int n_sb) {
    std::vector<u32> xf((size_t)ncols * n_sb * 256);
    for (int c = 0; c < ncols; ++c)
        for (int sb = 0; sb < n_sb; ++sb)
            for (int ks = 0; ks < 16; ++ks)
                for (int t = 0; t < 4; ++t) {
                    u32* q = &xf[(((size_t)c * n_sb + sb) * 64 + ks * 4 + t) * 4];
                    unsigned short hi[4], lo[4];
                    for (int e = 0; e < 4; ++e) {
                        const float x = (frand() * 2.0f - 1.0f) * 2.0f;
                        hi[e] = h16(x);
                        lo[e] = h16(x - f16f(hi[e]));
                    }
                    q[0] = hi[0] | ((u32)hi[1] << 16);
                    q[1] = hi[2] | ((u32)hi[3] << 16);
                    q[2] = lo[0] | ((u32)lo[1] << 16);
                    q[3] = lo[2] | ((u32)lo[3] << 16);
                }
    return xf;
}

// XG (wg2's layout) from XF: the same f16 values, hi of k = 0..255 then lo, per column and sb.
static std::vector<unsigned short> make_xg(const std::vector<u32>& xf, int ncols, int n_sb) {
    std::vector<unsigned short> xg((size_t)ncols * n_sb * 512);
    for (int c = 0; c < ncols; ++c)
        for (int sb = 0; sb < n_sb; ++sb)
            for (int ks = 0; ks < 16; ++ks)
                for (int t = 0; t < 4; ++t) {
                    const u32* q = &xf[(((size_t)c * n_sb + sb) * 64 + ks * 4 + t) * 4];
                    unsigned short* o = &xg[((size_t)c * n_sb + sb) * 512];
                    const int k0 = ks * 16 + 2 * t;
                    for (int lo = 0; lo < 2; ++lo) {
                        o[256 * lo + k0] = q[2 * lo] & 0xFFFF;
                        o[256 * lo + k0 + 1] = q[2 * lo] >> 16;
                        o[256 * lo + k0 + 8] = q[2 * lo + 1] & 0xFFFF;
                        o[256 * lo + k0 + 9] = q[2 * lo + 1] >> 16;
                    }
                }
    return xg;
}

template <typename T> static T* dev(const std::vector<T>& v) {
    T* p; CK(cudaMalloc(&p, v.size() * sizeof(T)));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

// Microseconds a launch: `launch` once (checked, synchronized), then `reps` times between events.
template <typename L>
static float timed(L launch, int reps) {
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i) launch();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return ms * 1000.0f / reps;
}
template <typename K>
static void set_smem(K kernel, int smem) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}
static int micro() {
    const int n_sb = 8;
    std::vector<u32> af((size_t)4 * n_sb * 16 * 32 * 4);
    for (auto& w : af) {  // A: sc * q style integers 0..945 (and some negatives: any exact f16)
        const int lo = (int)(rnd() % 946) - (rnd() % 4 == 0 ? 945 : 0);
        const int hi = (int)(rnd() % 946) - (rnd() % 4 == 0 ? 945 : 0);
        w = h16((float)lo) | ((u32)h16((float)hi) << 16);
    }
    const std::vector<u32> xf = make_xf(64, n_sb);
    uint4* dA = (uint4*)dev(af);
    uint4* dX = (uint4*)dev(xf);
    const size_t n = (size_t)n_sb * 64 * 64;
    float *dR, *dW;
    CK(cudaMalloc(&dR, n * 4)); CK(cudaMalloc(&dW, n * 4));
    micro_sync<<<1, 128>>>(dA, dX, dR, n_sb);
    CK(cudaDeviceSynchronize());
    std::vector<float> r(n), w(n);
    CK(cudaMemcpy(r.data(), dR, n * 4, cudaMemcpyDeviceToHost));
    int found = -1;
    for (int v = 0; v < 4; ++v) {
        CK(cudaMemset(dW, 0, n * 4));
        const int smem = 2 * 16 * 64 * 32;
        void (*k)(const uint4*, const uint4*, float*, int) =
            v == 0 ? micro_wg<0, false> : v == 1 ? micro_wg<0, true> : v == 2 ? micro_wg<1, false> : micro_wg<1, true>;
        set_smem(k, smem);
        k<<<1, 128, smem>>>(dA, dX, dW, n_sb);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(w.data(), dW, n * 4, cudaMemcpyDeviceToHost));
        size_t diff = 0; double maxrel = 0;
        for (size_t i = 0; i < n; ++i) {
            if (memcmp(&r[i], &w[i], 4)) ++diff;
            const double den = fabs(r[i]) > 1.0 ? fabs(r[i]) : 1.0;
            const double rel = fabs((double)r[i] - (double)w[i]) / den;
            if (rel > maxrel) maxrel = rel;
        }
        printf("micro trans-b %d %s: %zu of %zu S differ in bits from mma.sync, max rel diff %.3g%s\n",
               v >> 1, (v & 1) ? "LBO=256 SBO=128" : "LBO=128 SBO=256", diff, n, maxrel,
               maxrel < 1e-4 ? "  (layout right)" : "");
        if (maxrel < 1e-4 && found < 0) found = v;
    }
    return found;
}

template <int BN, int MINB>
static float run_wg(const MvArgs& a, const uint4* XF, const float* XE, const float* XS, int n_mt,
                    int n_sb, int ncols, int reps) {
    const int smem = 2 * 16 * BN * 32 + BN * 9 * 4;
    set_smem(wg_gemm<BN, MINB>, smem);
    const dim3 grid((n_mt + 7) / 8, (ncols + BN - 1) / BN);
    return timed([&] { wg_gemm<BN, MINB><<<grid, 256, smem>>>(a, XF, XE, XS, n_mt, n_sb, ncols); }, reps);
}
template <int BN, bool PP, int MINB, int NW, bool PF, bool ACCS = false>
static float run_wg2(const MvArgs& a, const u8* XG, const float* XE, const float* XS, int n_mt, int n_sb,
                     int ncols, int reps) {
    const int smem = Wg2<BN>::SMEM + (ACCS ? NW * 32 * (BN / 2) * 4 : 0);
    set_smem(wg2_gemm<BN, PP, MINB, NW, PF, ACCS>, smem);
    const dim3 grid((ncols + BN - 1) / BN, (n_mt + NW - 1) / NW);
    return timed([&] { wg2_gemm<BN, PP, MINB, NW, PF, ACCS><<<grid, NW * 32, smem>>>(a, XG, XE, XS, n_mt, n_sb, ncols); },
                 reps);
}
template <int BN, int MINB>
static float run_wg3(const MvArgs& a, const u8* XG, const float* XE, const float* XS, int n_mt, int n_sb,
                     int ncols, int reps) {
    const int smem = Wg3<BN>::SMEM;
    set_smem(wg3_gemm<BN, MINB>, smem);
    const dim3 grid((ncols + BN - 1) / BN, (n_mt + 7) / 8);
    return timed([&] { wg3_gemm<BN, MINB><<<grid, 256, smem>>>(a, XG, XE, XS, n_mt, n_sb, ncols); }, reps);
}
// The engine's launch of mma_gemm (engine/mma.rs: mma_gemm_warps_n picks the warps along n).
static float run_eng(const MvArgs& a, const uint4* XF, const float* XE, const float* XS, int n_mt,
                     int n_sb, int ncols, int reps, int sms) {
    int wn = 1;
    for (int c : {4, 2}) if (((n_mt + 7) / 8) * ((ncols + 16 * c - 1) / (16 * c)) >= sms) { wn = c; break; }
    const dim3 grid((n_mt + 7) / 8, (ncols + 16 * wn - 1) / (16 * wn));
    return timed([&] { mma_gemm<<<grid, 128 * wn>>>(a, XF, XE, XS, n_mt, n_sb, ncols); }, reps);
}

int main(int argc, char** argv) {
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    // argv[1] == "one": only the 8B gate|up at 512 columns, each kernel twice (for ncu)
    const bool one = argc > 1 && !strcmp(argv[1], "one");
    const int v = one ? 0 : micro();
    if (v < 0) { printf("micro: no descriptor variant computes the product; gemm not run\n"); return 1; }
    if (v >= 2) { printf("micro: only a trans-b variant fits; the gemm assumes trans-b 0\n"); return 1; }
    struct Shape { const char* name; int n_out, n_in; } shapes[] = {
        {"gate|up 28672x4096", 28672, 4096}, {"q|k|v 6144x4096", 6144, 4096},
        {"o 4096x4096", 4096, 4096}, {"down 4096x14336", 4096, 14336}};
    const int colsv[] = {512, 64, 37};
    // The kernels timed (README in BENCH.md step 21): eng = the engine's mma_gemm; w1 = wg_gemm
    // (B copied through registers each super-block, one buffer); w2pp = wg2 with S0/S1
    // ping-pong (ptxas serializes its wgmmas: C7514); w2 = wg2 without (cp.async ring of half
    // super-blocks); w16 = w2 with 16 warps (256 rows a block); w3 = the weights staged too and
    // a stage's A fragments built first; pf = w2 with the next stage's weights loaded into
    // registers a stage ahead; as = pf with acc in shared memory (16 warps at 64 columns).
    // -64/-32: columns a block (BN).
    struct Var { const char* name; bool xg; float (*run)(const MvArgs&, const void*, const float*, const float*, int, int, int, int); };
#define V_XF(NM, F) {NM, false, [](const MvArgs& a, const void* X, const float* E, const float* S, int mt, int sb, int nc, int r) { return F(a, (const uint4*)X, E, S, mt, sb, nc, r); }}
#define V_XG(NM, F) {NM, true, [](const MvArgs& a, const void* X, const float* E, const float* S, int mt, int sb, int nc, int r) { return F(a, (const u8*)X, E, S, mt, sb, nc, r); }}
    static const Var vars[] = {
        V_XF("w1-64", (run_wg<64, 1>)), V_XF("w1-32", (run_wg<32, 1>)),
        V_XG("w2pp64", (run_wg2<64, true, 1, 8, false>)), V_XG("w2-64", (run_wg2<64, false, 1, 8, false>)),
        V_XG("w2-32", (run_wg2<32, false, 2, 8, false>)), V_XG("w16-32", (run_wg2<32, false, 1, 16, false>)),
        V_XG("w3-64", (run_wg3<64, 1>)), V_XG("w3-32", (run_wg3<32, 2>)),
        V_XG("pf-32", (run_wg2<32, false, 2, 8, true>)), V_XG("pf16-32", (run_wg2<32, false, 1, 16, true>)),
        V_XG("as16-64", (run_wg2<64, false, 1, 16, true, true>))};
    const int NV = sizeof(vars) / sizeof(vars[0]);
    printf("%-20s %4s %7s", "matrix (us a launch)", "cols", "eng");
    for (int i = 0; i < NV; ++i) printf(" %7s", vars[i].name);
    printf("  outputs differing from eng (all kernels)\n");
    for (const Shape& s : shapes) {
        if (one && s.n_out != 28672) continue;
        const int n_sb = s.n_in / 256, n_mt = s.n_out / 16;
        std::vector<u8> wts((size_t)n_mt * n_sb * MMA_BLK);
        for (size_t i = 0; i < wts.size(); ++i) wts[i] = (u8)rnd();
        for (int mt = 0; mt < n_mt; ++mt)  // scales 6-bit, d and dmin small normal f16s
            for (int sb = 0; sb < n_sb; ++sb) {
                u8* b = &wts[((size_t)mt * n_sb + sb) * MMA_BLK];
                for (int i = 0; i < 256; ++i) b[MMA_SC_OFF + i] &= 63;
                for (int i = 0; i < 32; ++i) {
                    const unsigned short h = h16((0.5f + frand()) * 1e-3f);
                    memcpy(b + MMA_DD_OFF + 2 * i, &h, 2);
                }
            }
        u8* dw = dev(wts);
        for (int ncols : colsv) {
            if (one && ncols != 512) continue;
            const int npad = ((ncols + 7) / 8) * 8;
            std::vector<u32> xf = make_xf(npad, n_sb);
            for (int c = ncols; c < npad; ++c)  // mma_prep's zero columns
                memset(&xf[(size_t)c * n_sb * 256], 0, (size_t)n_sb * 256 * 4);
            std::vector<float> xe((size_t)npad * n_sb), xs((size_t)npad * n_sb * 8);
            for (auto& e : xe) e = ldexpf(1.0f, (int)(rnd() % 9) - 4);
            for (auto& e : xs) e = (frand() * 2.0f - 1.0f) * 8.0f;
            uint4* dX = (uint4*)dev(xf);
            u8* dG = (u8*)dev(make_xg(xf, npad, n_sb));
            float* dE = dev(xe);
            float* dS = dev(xs);
            float *y0, *y1;
            const size_t ny = (size_t)ncols * s.n_out;
            CK(cudaMalloc(&y0, ny * 4)); CK(cudaMalloc(&y1, ny * 4));
            MvArgs a; memset(&a, 0, sizeof(a));
            a.m[0].w = dw; a.m[0].row_bytes = (u64)n_sb * 144; a.m[0].n_out = s.n_out; a.m[0].fmt = 0;
            a.n_mat = 1; a.n_in = s.n_in; a.rows = ncols; a.mode = 0;
            const int reps = one ? 1 : ncols >= 512 ? 20 : 100;
            a.m[0].y = y0;
            const float te = run_eng(a, dX, dE, dS, n_mt, n_sb, ncols, reps, sms);
            std::vector<float> h0(ny), h1(ny);
            CK(cudaMemcpy(h0.data(), y0, ny * 4, cudaMemcpyDeviceToHost));
            printf("%-20s %4d %7.1f", s.name, ncols, te);
            size_t diff = 0;
            a.m[0].y = y1;
            for (int i = 0; i < NV; ++i) {
                CK(cudaMemset(y1, 0xFF, ny * 4));
                const float tv = vars[i].run(a, vars[i].xg ? (const void*)dG : (const void*)dX, dE, dS, n_mt, n_sb, ncols, reps);
                CK(cudaMemcpy(h1.data(), y1, ny * 4, cudaMemcpyDeviceToHost));
                for (size_t j = 0; j < ny; ++j) diff += memcmp(&h0[j], &h1[j], 4) != 0;
                printf(" %7.1f", tv);
            }
            printf("  %zu of %d x %zu\n", diff, NV, ny);
            fflush(stdout);
            cudaFree(dX); cudaFree(dG); cudaFree(dE); cudaFree(dS); cudaFree(y0); cudaFree(y1);
        }
        cudaFree(dw);
    }
    return 0;
}
