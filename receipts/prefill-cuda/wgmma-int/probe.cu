// Issue 30, step 47 (BENCH.md "The integer prefill GEMM on wgmma"): what this proves.
//  The engine's Q4_K prefill GEMM (kernels/mma.cu mma_gemm: mma.sync m16n8k32 u8 x s8, three
//  digit pieces a 32-k sub-block, THE ORDER's integer sums, one rounding a super-block) is
//  0.65x llama.cpp's pp512 on the 8B slice. Step 40 found its issue slots the bound: 11.9 warp
//  instructions an IMMA (fragment loads, A builds, the scale sums). Here the same arithmetic
//  runs on Hopper's wgmma: per sub-block ONE wgmma.mma_async m64n(3 BN)k32 u8.s8 per
//  warpgroup (A = the warp's Q4_K nibbles from registers, exactly mma_q4k_afrag's fragment;
//  B = the three digit pieces of BN columns side by side, K-major in shared memory), the
//  operands of each super-block copied into a ring of shared-memory stages by the bulk copy
//  engine (cp.async.bulk + mbarrier: one thread, no per-thread copy arithmetic), and THE
//  ORDER's integer scale sums and v_sb epilogue in registers (mma_frag_values, the engine's).
//  Every sum before rn_f32(S_sb) is an exact integer, so the tensor cores' order cannot show:
//  the outputs must equal the engine's bit for bit, which the probe checks on every output.
//  A second family (wgs, below) sums the same integers another way: the sub-block scales go
//  into A (sc q as two u8 pieces) and the tensor cores chain a whole super-block.
//  The engine's mma_gemm / mma_gemm_n (eng_src.cu: mksrc.py writes it from a tree's kernels,
//  as engine/mma.rs assembles the module and picks the narrow one) against the wgmma kernels
//  on the 8B shape's matrices (gate|up, q|k|v, o, down) at 512, 64 and 37 columns:
//  microseconds a launch (each warmed once, then timed over 20 or 100 launches) and the
//  outputs that differ from the engine's in any bit.
//  `probe [one] [SET]`: SET (1..5, default 5) the kernels of callSET/ (main's tables); one:
//  gate|up at 512 columns only, each kernel twice (for Nsight Compute, call-ncu.sh).
// Research code for one GPU call, not part of the build: no engine file includes it.
// Since call 4: the read-write wgmma copies folded into wgs_mma (scale-d 0), one launcher
// (run_walk) and each set's size read from its table; NVRTC's sm_90a SASS of w2-32-2, w2-64-3,
// p1-32-3 and s1-48-2 is byte for byte what it was (compared before and after).
// Build and run on the GPU machine (call.sh):
//   python3 mksrc.py KERNELS && nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false \
//     -ftz=false -prec-div=true -prec-sqrt=true -o probe probe.cu && ./probe
// The activations' layout XG (what an mma_prep variant would write; the same digits as the
// engine's XF): per column block of BN columns and super-block sb, one TILE of 804 BN bytes:
//   [0, 768 BN)   the B operand: sub-block s at s * 96 BN, piece p (h, m, l) at + p * 32 BN,
//                 8-column group ct at + ct * 256, k-half kh at + kh * 128, column c8 at
//                 + c8 * 16, byte kb = the piece of v[32 s + 16 kh + kb] (wgmma's K-major
//                 no-swizzle core matrices: LBO 128 between the k-halves, SBO 256 between the
//                 3 BN / 8 column groups, so one m64n(3 BN)k32 takes h, m, l of BN columns);
//   [768 BN, 800 BN)  XS: column c's 8 sub-block sums at (c * 8 + s) * 4;
//   [800 BN, 804 BN)  XE: column c's 2^E at c * 4.
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

// ---- wgmma, mbarrier and bulk-copy helpers (sm_90a)
__device__ __forceinline__ void wgi_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgi_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgi_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
__device__ __forceinline__ void wgi_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// Shared-memory matrix descriptor, no swizzle: start >> 4 at bits 0-13, LBO >> 4 at 16-29,
// SBO >> 4 at 32-45.
__device__ __forceinline__ u64 wgi_desc(const void* p, u32 lbo, u32 sbo) {
    const u32 addr = smem_u32(p);
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16) |
           ((u64)((sbo & 0x3FFFF) >> 4) << 32);
}
__device__ __forceinline__ void mbar_init(u64* b, u32 n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(u64* b, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* b, u32 parity) {
    u32 done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(b)), "r"(parity) : "memory");
    } while (!done);
}
// One bulk copy of `bytes` (a multiple of 16, both ends 16-byte aligned) global -> shared,
// completing on mbarrier b's transaction count.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, u32 bytes, u64* b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The write-only wgmma forms (PP), BN = 32 and 64 (written out by a few lines of python: 48
// and 96 outputs); the read-write, accumulating forms (wgs_mma) follow the wgs comment below.
// D = A * B (scale-d 0: D written, never read), u8 A (the warp's 16 x 32 from registers,
// mma.sync m16n8k32's A layout), s8 B (32 x 96, K-major in shared memory), s32.
__device__ __forceinline__ void wgi_mma_n96(int (&d)[48], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
        "{%48, %49, %50, %51}, %52, p;\n}\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]), "=r"(d[8]), "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]), "=r"(d[14]), "=r"(d[15]), "=r"(d[16]), "=r"(d[17]), "=r"(d[18]), "=r"(d[19]), "=r"(d[20]), "=r"(d[21]), "=r"(d[22]), "=r"(d[23]), "=r"(d[24]), "=r"(d[25]), "=r"(d[26]), "=r"(d[27]), "=r"(d[28]), "=r"(d[29]), "=r"(d[30]), "=r"(d[31]), "=r"(d[32]), "=r"(d[33]), "=r"(d[34]), "=r"(d[35]), "=r"(d[36]), "=r"(d[37]), "=r"(d[38]), "=r"(d[39]), "=r"(d[40]), "=r"(d[41]), "=r"(d[42]), "=r"(d[43]), "=r"(d[44]), "=r"(d[45]), "=r"(d[46]), "=r"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
// D = A * B (scale-d 0: D written, never read), u8 A (the warp's 16 x 32 from registers,
// mma.sync m16n8k32's A layout), s8 B (32 x 192, K-major in shared memory), s32.
__device__ __forceinline__ void wgi_mma_n192(int (&d)[96], const u32 (&a)[4], u64 desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
        "{%96, %97, %98, %99}, %100, p;\n}\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]), "=r"(d[8]), "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]), "=r"(d[14]), "=r"(d[15]), "=r"(d[16]), "=r"(d[17]), "=r"(d[18]), "=r"(d[19]), "=r"(d[20]), "=r"(d[21]), "=r"(d[22]), "=r"(d[23]), "=r"(d[24]), "=r"(d[25]), "=r"(d[26]), "=r"(d[27]), "=r"(d[28]), "=r"(d[29]), "=r"(d[30]), "=r"(d[31]), "=r"(d[32]), "=r"(d[33]), "=r"(d[34]), "=r"(d[35]), "=r"(d[36]), "=r"(d[37]), "=r"(d[38]), "=r"(d[39]), "=r"(d[40]), "=r"(d[41]), "=r"(d[42]), "=r"(d[43]), "=r"(d[44]), "=r"(d[45]), "=r"(d[46]), "=r"(d[47]), "=r"(d[48]), "=r"(d[49]), "=r"(d[50]), "=r"(d[51]), "=r"(d[52]), "=r"(d[53]), "=r"(d[54]), "=r"(d[55]), "=r"(d[56]), "=r"(d[57]), "=r"(d[58]), "=r"(d[59]), "=r"(d[60]), "=r"(d[61]), "=r"(d[62]), "=r"(d[63]), "=r"(d[64]), "=r"(d[65]), "=r"(d[66]), "=r"(d[67]), "=r"(d[68]), "=r"(d[69]), "=r"(d[70]), "=r"(d[71]), "=r"(d[72]), "=r"(d[73]), "=r"(d[74]), "=r"(d[75]), "=r"(d[76]), "=r"(d[77]), "=r"(d[78]), "=r"(d[79]), "=r"(d[80]), "=r"(d[81]), "=r"(d[82]), "=r"(d[83]), "=r"(d[84]), "=r"(d[85]), "=r"(d[86]), "=r"(d[87]), "=r"(d[88]), "=r"(d[89]), "=r"(d[90]), "=r"(d[91]), "=r"(d[92]), "=r"(d[93]), "=r"(d[94]), "=r"(d[95])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
// D = A * B + (acc ? D : 0), u8 A from registers, s8 B K-major in shared memory, s32: the
// accumulating form (scale-d a register) the scaled-A kernels (wgs) chain a super-block with.
__device__ __forceinline__ void wgs_mma_n96(int (&d)[48], const u32 (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
        "{%48, %49, %50, %51}, %52, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
__device__ __forceinline__ void wgs_mma_n144(int (&d)[72], const u32 (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %77, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n144k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71}, "
        "{%72, %73, %74, %75}, %76, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
__device__ __forceinline__ void wgs_mma_n192(int (&d)[96], const u32 (&a)[4], u64 desc, int acc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
        "{%96, %97, %98, %99}, %100, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}
template <int BN>
__device__ __forceinline__ void wgs_mma(int (&d)[3 * BN / 2], const u32 (&a)[4], u64 desc, int acc) {
    if constexpr (BN == 64) wgs_mma_n192(d, a, desc, acc);
    else if constexpr (BN == 48) wgs_mma_n144(d, a, desc, acc);
    else wgs_mma_n96(d, a, desc, acc);
}

// wgi's wgmma: PP's write-only D (ptxas may then keep a wgmma in flight while another D set is
// read), else the read-write form with scale-d 0 (one D set live; the non-PP kernels wait on
// each wgmma anyway).
template <int BN, bool PP>
__device__ __forceinline__ void wgi_mma(int (&d)[3 * BN / 2], const u32 (&a)[4], u64 desc) {
    if constexpr (PP) {
        if constexpr (BN == 64) wgi_mma_n192(d, a, desc);
        else wgi_mma_n96(d, a, desc);
    } else {
        wgs_mma<BN>(d, a, desc, 0);
    }
}

// ---- the integer GEMM on wgmma. Block: NWG warpgroups (warp w = m-tile blockIdx.y * 4 NWG +
// w; a warpgroup's 4 warps = its 64 rows) x BN columns from blockIdx.x * BN. Shared memory: 128
// bytes of mbarriers, then NST stages, each one super-block's XG TILE then the block's 4 NWG
// m-tiles' 2368-byte weight blocks, filled by thread 0's bulk copies NST super-blocks ahead.
// Per super-block, in order (THE ORDER's y = y + v_sb): per sub-block s, each warp's A
// fragment from its nibbles (mma_q4k_afrag), one wgmma (D = h | m | l products of the
// warpgroup's 64 rows x BN columns), then S_hm += sc_s (2^8 D_h + D_m), S_l += sc_s D_l per
// output (mma_q4k_dot's sums, the same integers); then v_sb (mma_frag_values) and acc += v_sb.
template <int BN>
struct Wgi {
    static constexpr int NO = BN / 2;       // outputs a thread: 64 x BN / 128
    static constexpr int XB = 768 * BN;     // B bytes a super-block
    static constexpr int TILE = 804 * BN;   // + XS + XE
    // A block's dynamic shared memory: the mbarriers, NST stages, and acc when ACCS.
    __host__ __device__ static constexpr int smem(int NWG, int NST, bool ACCS) {
        return 128 + NST * (TILE + NWG * 4 * MMA_BLK) + (ACCS ? NO * NWG * 128 * 4 : 0);
    }
};
template <int BN, int NWG, int NST>
__device__ __forceinline__ void wgi_issue(const MvArgs& a, const u8* XG, u8* ring, u64* bar, int q,
                                          int sb, int n_sb, int n_mt, int mt0) {
    constexpr int STAGE = Wgi<BN>::TILE + NWG * 4 * MMA_BLK;
    u8* st = ring + (size_t)q * STAGE;
    mbar_expect(bar + q, STAGE);
    bulk_g2s(st, XG + ((size_t)blockIdx.x * n_sb + sb) * Wgi<BN>::TILE, Wgi<BN>::TILE, bar + q);
#pragma unroll
    for (int i = 0; i < NWG * 4; ++i) {
        int m, o0;
        const u8* w = mma_tile(a, min(mt0 + i, n_mt - 1), n_sb, MMA_BLK, &m, &o0);
        bulk_g2s(st + Wgi<BN>::TILE + i * MMA_BLK, w + (size_t)sb * MMA_BLK, MMA_BLK, bar + q);
    }
}
// The block's walk, shared by both families: the ring's barriers and first copies, the
// super-blocks in order (THE ORDER's y = y + v_sb), each: its stage acquired (EB: the stage
// freed a super-block ago refilled first, by thread 0), body(st, wt, epilogue) forming
// rn_f32(S_sb) of the thread's outputs and calling epilogue(rn) with rn(o) = that of output o
// (o = 4 ct + c: rows g for c < 2, g + 8 for c >= 2; columns 8 ct + 2t + (c & 1)), then the
// stage released (EB: this warp's arrival on its empty barrier; else a block barrier and
// thread 0's refill); then the outputs through mv_finish. ACCS: acc in shared memory after the
// ring (word o of thread tid at accS[o * NWG * 128 + tid]), NO registers fewer a thread.
template <int BN, int NWG, int NST, bool ACCS, bool EB, bool WS, typename Body>
__device__ __forceinline__ void wg_walk(const MvArgs& a, const u8* XG, int n_mt, int n_sb, int ncols, Body&& body) {
    constexpr int NO = Wgi<BN>::NO, NCT = BN / 8;
    constexpr int STAGE = Wgi<BN>::TILE + NWG * 4 * MMA_BLK;
    extern __shared__ __align__(128) u8 sm[];
    u64* bar = (u64*)sm;
    u8* ring = sm + 128;
    float* accS = (float*)(ring + (size_t)NST * STAGE);
    // WS: warpgroup 0 produces (its thread 0 issues every copy, after the stage's empty
    // barrier; its registers go to the consumers by setmaxnreg), and the NWG consumer
    // warpgroups follow it: tid counts the consumers' threads from 0.
    const int tid = (int)threadIdx.x - (WS ? 128 : 0), warp = tid >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int mt0 = blockIdx.y * NWG * 4, col0 = blockIdx.x * BN;
    if (threadIdx.x == 0) {
        for (int q = 0; q < NST; ++q) {
            mbar_init(bar + q, 1);
            if (EB || WS) mbar_init(bar + 8 + q, NWG * 4);  // stage q emptied: every warp's arrival
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if constexpr (WS) {
        if (threadIdx.x < 128) {
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
            if (threadIdx.x == 0)
                for (int sb = 0; sb < n_sb; ++sb) {
                    const int q = sb % NST;
                    if (sb >= NST) mbar_wait(bar + 8 + q, (u32)(sb / NST - 1) & 1u);
                    fence_proxy_async();  // the consumers' generic reads before the copy's writes
                    wgi_issue<BN, NWG, NST>(a, XG, ring, bar, q, sb, n_sb, n_mt, mt0);
                }
            return;
        }
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    } else if (tid == 0) {
        for (int q = 0; q < NST && q < n_sb; ++q) wgi_issue<BN, NWG, NST>(a, XG, ring, bar, q, q, n_sb, n_mt, mt0);
    }
    float acc[ACCS ? 1 : NO];
#pragma unroll
    for (int o = 0; o < NO; ++o) {
        if constexpr (ACCS) accS[o * NWG * 128 + tid] = 0.0f;
        else acc[o] = 0.0f;
    }
    for (int sb = 0; sb < n_sb; ++sb) {
        const int q = sb % NST;
        u8* st = ring + (size_t)q * STAGE;
        if (EB && !WS && tid == 0 && sb >= 1 && sb - 1 + NST < n_sb) {
            // EB: stage (sb - 1) % NST refilled once every warp has left it (its empty
            // barrier), not at a block barrier: the other warps go on meanwhile.
            const int qq = (sb - 1) % NST;
            mbar_wait(bar + 8 + qq, (u32)((sb - 1) / NST) & 1u);
            fence_proxy_async();  // the warps' generic reads before the copy engine's writes
            wgi_issue<BN, NWG, NST>(a, XG, ring, bar, qq, sb - 1 + NST, n_sb, n_mt, mt0);
        }
        if (EB) __syncwarp();  // warp 0 whole again before the warpgroup's aligned wgmma
        mbar_wait(bar + q, (u32)(sb / NST) & 1u);
        const u8* wt = st + Wgi<BN>::TILE + warp * MMA_BLK;
        // THE ORDER's v_sb of the thread's outputs (the engine's mma_frag_values) and acc += v_sb.
        auto epilogue = [&](auto rn) {
            const uint4 mn = *(const uint4*)(wt + MMA_SC_OFF + g * 32 + 16);
            const uint2 dd = *(const uint2*)(wt + MMA_DD_OFF + g * 8);
            const float* xsS = (const float*)(st + Wgi<BN>::XB);
            const float* xeS = xsS + 8 * BN;
#pragma unroll
            for (int ct = 0; ct < NCT; ++ct) {
                const int ca = 8 * ct + 2 * t;
                float xa[8], xc[8];
#pragma unroll
                for (int s = 0; s < 8; ++s) { xa[s] = xsS[ca * 8 + s]; xc[s] = xsS[ca * 8 + 8 + s]; }
                float f[4], v[4];
#pragma unroll
                for (int c = 0; c < 4; ++c) f[c] = rn(4 * ct + c);
                mma_frag_values(f, dd, mn, xa, xc, xeS[ca], xeS[ca + 1], v);
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    if constexpr (ACCS) {
                        float* pa = accS + (4 * ct + c) * NWG * 128 + tid;
                        *pa = __fadd_rn(*pa, v[c]);
                    } else {
                        acc[4 * ct + c] = __fadd_rn(acc[4 * ct + c], v[c]);
                    }
                }
            }
        };
        body(st, wt, epilogue);
        if constexpr (EB || WS) {
            __syncwarp();
            if (lane == 0) mbar_arrive(bar + 8 + q);  // this warp is done with stage q
            continue;
        }
        __syncthreads();  // every warp is done with stage q (its wgmma waited, its loads done)
        if (tid == 0 && sb + NST < n_sb) {
            fence_proxy_async();  // the generic reads above before the copy engine's writes
            wgi_issue<BN, NWG, NST>(a, XG, ring, bar, q, sb + NST, n_sb, n_mt, mt0);
        }
    }
    const int mt = mt0 + warp;
    if (mt >= n_mt) return;
    int m, o0;
    mma_tile(a, mt, n_sb, MMA_BLK, &m, &o0);
#pragma unroll
    for (int o = 0; o < NO; ++o) {
        const int ct = o >> 2, c = o & 3;
        const int col = col0 + 8 * ct + 2 * t + (c & 1);
        if (col < ncols)
            mv_finish(a, m, o0 + g + ((c & 2) ? 8 : 0), col, ACCS ? accS[o * NWG * 128 + tid] : acc[o], 0.0f);
    }
}
template <int BN, int NWG, int NST, int MINB, bool ACCS, bool PP, bool EB = false, bool WS = false>
__global__ void __launch_bounds__((NWG + WS) * 128, MINB) wgi_gemm(MvArgs a, const u8* XG, int n_mt, int n_sb, int ncols) {
    constexpr int NO = Wgi<BN>::NO;
    const int lane = threadIdx.x & 31, g = lane >> 2;
    wg_walk<BN, NWG, NST, ACCS, EB, WS>(a, XG, n_mt, n_sb, ncols, [&](const u8* st, const u8* wt, auto& epilogue) {
        const uint4 sc = *(const uint4*)(wt + MMA_SC_OFF + g * 32);
        int Shm[NO], Sl[NO];
#pragma unroll
        for (int o = 0; o < NO; ++o) Shm[o] = Sl[o] = 0;
        // Sub-block s's sums from its D (o = 4 ct + c: rows g for c < 2, g + 8 for c >= 2).
        auto sums = [&](const int (&D)[3 * NO], int s) {
            const int kg = (int)mma_byte_at(sc.x, sc.y, s), k8 = (int)mma_byte_at(sc.z, sc.w, s);
#pragma unroll
            for (int o = 0; o < NO; ++o) {
                const int k = (o & 2) ? k8 : kg;
                Shm[o] += k * (D[o] * 256 + D[NO + o]);
                Sl[o] += k * D[2 * NO + o];
            }
        };
        auto issue = [&](int (&D)[3 * NO], int s) {
            const uint4 nib = *(const uint4*)(wt + (s >> 1) * 512 + lane * 16);
            u32 af[4];
            mma_q4k_afrag(nib, s, af);
            wgi_fence();
            wgi_mma<BN, PP>(D, af, wgi_desc(st + s * 96 * BN, 128, 256));
            wgi_commit();
        };
        if constexpr (PP) {
            // Sub-block s + 1's wgmma in flight while s's sums run (two D sets).
            int D0[3 * NO], D1[3 * NO];
            issue(D0, 0);
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                if (s < 7) {
                    issue((s & 1) ? D0 : D1, s + 1);
                    wgi_wait1();
                } else {
                    wgi_wait0();
                }
                sums((s & 1) ? D1 : D0, s);
            }
        } else {
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                int D[3 * NO];
                issue(D, s);
                wgi_wait0();
                sums(D, s);
            }
        }
        epilogue([&](int o) { return mma_q4k_f32(Shm[o], Sl[o]); });
    });
}

// ---- the scaled-A integer GEMM (wgs): the sub-block scales move from the epilogue into the A
// operand, so that the tensor cores chain a whole super-block. Per sub-block s and weight
// row, A = sc_s * q (0..945, exact) goes in as two u8 pieces, A_lo = sc_s q mod 2^8 and A_hi =
// sc_s q div 2^8 (0..3), each its own wgmma against the same B (h | m | l of BN columns),
// accumulating over the super-block's 8 sub-blocks in the tensor cores: D_{a,p} = sum over
// the super-block's 256 k of A_a[k] p[k], exact (|D_lo| <= 256 * 255 * 128 < 2^24). Then,
// once a super-block and output,
//   S_sb = sum_k sc q (2^16 h + 2^8 m + l) = 2^16 H + 2^8 M + L,  H = D_lo,h + 2^8 D_hi,h +
//   D_hi,m, M = D_lo,m + D_hi,l, L = D_lo,l   (|H| < 2^24, |M| < 2^24: int32; S in int64),
// the same integer S_sb as mma_q4k_dot's sum over sub-blocks, so rn_f32(S_sb) and every bit
// after it are the engine's (THE ORDER fixes the value of S_sb, not how it is summed).
// Per output and super-block: about 9 integer operations instead of 24 (3 per sub-block), for
// twice the tensor work and the A pieces' build (2 IMAD, 2 PRMT and 3 masks a register).
// Row g's bytes of register word w are q = w & 0x0F0F0F0F (row g + 8: w >> 4); byte i times
// k in 16-bit halves: e = (q bytes 0, 2) * k, o = (bytes 1, 3) * k, then the low and high
// bytes of the four products gathered by one PRMT each.
__device__ __forceinline__ void wgs_scale(u32 w, int k, u32& lo, u32& hi) {
    const u32 e = (w & 0x000F000Fu) * (u32)k, o = ((w >> 8) & 0x000F000Fu) * (u32)k;
    lo = __byte_perm(e, o, 0x6240);
    hi = __byte_perm(e, o, 0x7351);
}
template <int BN, int NWG, int NST, int MINB, bool ACCS, bool EB = false, bool WS = false>
__global__ void __launch_bounds__((NWG + WS) * 128, MINB) wgs_gemm(MvArgs a, const u8* XG, int n_mt, int n_sb, int ncols) {
    constexpr int NO = Wgi<BN>::NO;
    const int lane = threadIdx.x & 31, g = lane >> 2;
    wg_walk<BN, NWG, NST, ACCS, EB, WS>(a, XG, n_mt, n_sb, ncols, [&](const u8* st, const u8* wt, auto& epilogue) {
        const uint4 sc = *(const uint4*)(wt + MMA_SC_OFF + g * 32);
        int Dl[3 * NO], Dh[3 * NO];
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const uint4 nib = *(const uint4*)(wt + (s >> 1) * 512 + lane * 16);
            const u32 w0 = mma_comp4(nib, 2 * (s & 1)), w1 = mma_comp4(nib, 2 * (s & 1) + 1);
            const int kg = (int)mma_byte_at(sc.x, sc.y, s), k8 = (int)mma_byte_at(sc.z, sc.w, s);
            u32 alo[4], ahi[4];
            wgs_scale(w0, kg, alo[0], ahi[0]);       // row g,   k 4t..4t+3
            wgs_scale(w0 >> 4, k8, alo[1], ahi[1]);  // row g+8, k 4t..
            wgs_scale(w1, kg, alo[2], ahi[2]);       // row g,   k 16+4t..
            wgs_scale(w1 >> 4, k8, alo[3], ahi[3]);  // row g+8, k 16+4t..
            const u64 desc = wgi_desc(st + s * 96 * BN, 128, 256);
            wgi_fence();
            wgs_mma<BN>(Dl, alo, desc, s);
            wgs_mma<BN>(Dh, ahi, desc, s);
            wgi_commit();
        }
        wgi_wait0();
        epilogue([&](int o) {  // rn_f32(S_sb), S_sb = 2^16 H + 2^8 M + L exact in int64
            const int H = Dl[o] + Dh[o] * 256 + Dh[NO + o], M = Dl[NO + o] + Dh[2 * NO + o];
            return (float)((((long long)H * 256) + M) * 256 + Dl[2 * NO + o]);
        });
    });
}

// ---- host
static u32 rng = 12345u;
static u32 rnd() { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static float frand() { return (rnd() >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
static unsigned short h16(float f) { __half h = __float2half_rn(f); return *(unsigned short*)&h; }

// The prepared activations of npad columns (mma_prep's integer form; columns past ncols are
// its zero columns): v uniform in [-2^21, 2^21] (THE ORDER's bound), split as mma_prep_ints
// splits it, into the engine's XF words and XE, XS; and the same digits, XE and XS in XG for
// each BN of BNS (xg[i]; columns past npad up to the block: zeros).
struct Acts {
    std::vector<u32> xf;
    std::vector<float> xe, xs;
    std::vector<u8> xg[3];
};
static const int BNS[3] = {32, 48, 64};
static void xg_put(std::vector<u8>& xg, int BN, int n_sb, int col, int sb, int s, int p, int r, u8 v) {
    const int TILE = 804 * BN, by = col / BN, c = col % BN;
    const size_t base = ((size_t)by * n_sb + sb) * TILE;
    xg[base + s * 96 * BN + p * 32 * BN + (c / 8) * 256 + (r / 16) * 128 + (c % 8) * 16 + r % 16] = v;
}
static void xg_putf(std::vector<u8>& xg, int BN, int n_sb, int col, int sb, size_t off, float f) {
    const int TILE = 804 * BN, by = col / BN;
    memcpy(&xg[((size_t)by * n_sb + sb) * TILE + off], &f, 4);
}
static Acts make_acts(int ncols, int npad, int n_sb) {
    Acts A;
    A.xf.assign((size_t)npad * n_sb * 256, 0u);
    A.xe.assign((size_t)npad * n_sb, 0.0f);
    A.xs.assign((size_t)npad * n_sb * 8, 0.0f);
    for (int b = 0; b < 3; ++b) A.xg[b].assign((size_t)((npad + BNS[b] - 1) / BNS[b]) * n_sb * 804 * BNS[b], 0);
    for (int col = 0; col < ncols; ++col)
        for (int sb = 0; sb < n_sb; ++sb) {
            const size_t i = (size_t)col * n_sb + sb;
            for (int k = 0; k < 256; ++k) {
                const int v = (int)(rnd() % 4194305u) - 2097152;
                const int l = ((v + 128) & 255) - 128, u = (v - l) >> 8;
                const int m = ((u + 128) & 255) - 128, h = (u - m) >> 8;
                const int pc[3] = {h, m, l};
                const int s = k / 32, r = k % 32, j = r / 16, t = (r % 16) / 4, b = r % 4;
                for (int p = 0; p < 3; ++p) {
                    A.xf[i * 256 + (s * 4 + t) * 8 + 2 * p + j] |= ((u32)pc[p] & 255u) << (8 * b);
                    for (int bi = 0; bi < 3; ++bi) xg_put(A.xg[bi], BNS[bi], n_sb, col, sb, s, p, r, (u8)pc[p]);
                }
            }
            A.xe[i] = ldexpf(1.0f, (int)(rnd() % 9) - 24);
            for (int b = 0; b < 3; ++b)
                xg_putf(A.xg[b], BNS[b], n_sb, col, sb, 800 * BNS[b] + (col % BNS[b]) * 4, A.xe[i]);
            for (int s = 0; s < 8; ++s) {
                const float x = (frand() * 2.0f - 1.0f) * 8.0f;
                A.xs[i * 8 + s] = x;
                for (int b = 0; b < 3; ++b)
                    xg_putf(A.xg[b], BNS[b], n_sb, col, sb, 768 * BNS[b] + ((col % BNS[b]) * 8 + s) * 4, x);
            }
        }
    return A;
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
// The engine's launch (engine/mma.rs): mma_gemm_warps_n's warps along n, the narrow kernel
// mma_gemm_n where that is 1.
static float run_eng(const MvArgs& a, const uint4* XF, const float* XE, const float* XS, int n_mt,
                     int n_sb, int ncols, int reps, int sms) {
    int wn = 1;
    for (int c : {4, 2}) if (((n_mt + 7) / 8) * ((ncols + 16 * c - 1) / (16 * c)) >= sms) { wn = c; break; }
    if (wn == 1) {
        const dim3 grid((n_mt + 7) / 8, (ncols + 7) / 8);
        return timed([&] { mma_gemm_n<<<grid, 128>>>(a, XF, XE, XS, n_mt, n_sb, ncols); }, reps);
    }
    const dim3 grid((n_mt + 7) / 8, (ncols + 16 * wn - 1) / (16 * wn));
    return timed([&] { mma_gemm<<<grid, 128 * wn>>>(a, XF, XE, XS, n_mt, n_sb, ncols); }, reps);
}
// One wgi or wgs kernel's launch on the walk's grid (blocks of BN columns x 4 NWG m-tiles,
// (NWG + WS) warpgroups), timed.
using WalkKernel = void (*)(MvArgs, const u8*, int, int, int);
template <int BN, int NWG, int NST, bool ACCS, bool WS>
static float run_walk(WalkKernel k, const MvArgs& a, const u8* XG, int n_mt, int n_sb, int ncols, int reps) {
    const int smem = Wgi<BN>::smem(NWG, NST, ACCS);
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((ncols + BN - 1) / BN, (n_mt + 4 * NWG - 1) / (4 * NWG));
    return timed([&] { k<<<grid, (NWG + WS) * 128, smem>>>(a, XG, n_mt, n_sb, ncols); }, reps);
}
template <int BN, int NWG, int NST, int MINB, bool ACCS = false, bool PP = false, bool EB = false, bool WS = false>
static float run_wgi(const MvArgs& a, const u8* XG, int n_mt, int n_sb, int ncols, int reps) {
    return run_walk<BN, NWG, NST, ACCS, WS>(wgi_gemm<BN, NWG, NST, MINB, ACCS, PP, EB, WS>, a, XG, n_mt, n_sb, ncols, reps);
}
template <int BN, int NWG, int NST, int MINB, bool ACCS = false, bool EB = false, bool WS = false>
static float run_wgs(const MvArgs& a, const u8* XG, int n_mt, int n_sb, int ncols, int reps) {
    return run_walk<BN, NWG, NST, ACCS, WS>(wgs_gemm<BN, NWG, NST, MINB, ACCS, EB, WS>, a, XG, n_mt, n_sb, ncols, reps);
}

int main(int argc, char** argv) {
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const bool one = argc > 1 && !strcmp(argv[1], "one");
    struct Shape { const char* name; int n_out, n_in; } shapes[] = {
        {"gate|up 28672x4096", 28672, 4096}, {"q|k|v 6144x4096", 6144, 4096},
        {"o 4096x4096", 4096, 4096}, {"down 4096x14336", 4096, 14336}};
    const int colsv[] = {512, 64, 37};
    // The kernels: eng = the engine's; wN-B-S: wgi, N warpgroups a block, B columns, S stages;
    // aN-B-S: wgi with acc in shared memory; pN-B-S: wgi with sub-block s + 1's wgmma issued
    // before s's sums; sN-B-S: the scaled-A kernel (wgs); rM: held to M blocks an SM
    // (__launch_bounds__; acc in shared memory where M >= 4 or N = 2); suffix e: EB (stages
    // freed by per-stage empty mbarriers, no block barrier); suffix x: WS (a producer
    // warpgroup, its registers given to the consumers by setmaxnreg). Each call's set (argv: `probe
    // [one] SET`, default the last), so that every committed probe.txt reruns from this file.
    // After call 3 the two families' common walk moved into wg_walk (the same operations;
    // ptxas allocates a few registers otherwise): call 4 re-runs w2-32-2, s1-32-3, s1-48-2.
    struct Var { const char* name; int bn; float (*run)(const MvArgs&, const u8*, int, int, int, int); };
    static const Var set1[] = {  // call1/
        {"w2-64-3", 64, run_wgi<64, 2, 3, 1>}, {"w2-32-2", 32, run_wgi<32, 2, 2, 2>},
        {"w1-64-2", 64, run_wgi<64, 1, 2, 1>}, {"w1-32-3", 32, run_wgi<32, 1, 3, 2>},
        {"a2-64-2", 64, run_wgi<64, 2, 2, 1, true>}, {"a1-32-3", 32, run_wgi<32, 1, 3, 4, true>},
        {"p1-32-3", 32, run_wgi<32, 1, 3, 2, false, true>}, {"p2-32-2", 32, run_wgi<32, 2, 2, 1, false, true>},
    };
    static const Var set2[] = {  // call2/
        {"w2-32-2", 32, run_wgi<32, 2, 2, 2>}, {"p1-32-3", 32, run_wgi<32, 1, 3, 2, false, true>},
        {"s2-32-2", 32, run_wgs<32, 2, 2, 1>}, {"s1-32-3", 32, run_wgs<32, 1, 3, 2>},
        {"s1-48-2", 48, run_wgs<48, 1, 2, 1>}, {"s2-48-2", 48, run_wgs<48, 2, 2, 1, true>},
        {"s1-64-2", 64, run_wgs<64, 1, 2, 1, true>}, {"s2-64-2", 64, run_wgs<64, 2, 2, 1, true>},
    };
    static const Var set3[] = {  // call3/
        {"w2-32-2", 32, run_wgi<32, 2, 2, 2>}, {"s1-32-3", 32, run_wgs<32, 1, 3, 2>},
        {"s1-48-2", 48, run_wgs<48, 1, 2, 1>}, {"s1-32-2r3", 32, run_wgs<32, 1, 2, 3>},
        {"s1-32-2r4", 32, run_wgs<32, 1, 2, 4, true>}, {"s2-32-2r2", 32, run_wgs<32, 2, 2, 2, true>},
    };
    static const Var set4[] = {  // call4/
        {"w2-32-2", 32, run_wgi<32, 2, 2, 2>}, {"s1-32-3", 32, run_wgs<32, 1, 3, 2>},
        {"s1-48-2", 48, run_wgs<48, 1, 2, 1>},
        {"w2-32-2e", 32, run_wgi<32, 2, 2, 2, false, false, true>},
        {"w2-32-3e", 32, run_wgi<32, 2, 3, 1, false, false, true>},
        {"p1-32-3e", 32, run_wgi<32, 1, 3, 2, false, true, true>},
        {"s1-32-3e", 32, run_wgs<32, 1, 3, 2, false, true>},
        {"s2-32-3e", 32, run_wgs<32, 2, 3, 1, false, true>},
        {"s1-48-2e", 48, run_wgs<48, 1, 2, 1, false, true>},
        {"w2-32-3x", 32, run_wgi<32, 2, 3, 1, false, false, false, true>},
        {"s2-48-3x", 48, run_wgs<48, 2, 3, 1, false, false, true>},
        {"s2-32-3x", 32, run_wgs<32, 2, 3, 1, false, false, true>},
    };
    // call5/, not yet run (written and compiled on 2026-12-06 when the session's device time
    // had run out; ptxas: s2-64-2x spills 224 bytes, w2-64-2x 16): BN = 64 and 48 with the
    // consumers' registers raised (WS, acc in shared memory).
    static const Var set5[] = {
        {"w2-32-2", 32, run_wgi<32, 2, 2, 2>},
        {"w2-64-2x", 64, run_wgi<64, 2, 2, 1, true, false, false, true>},
        {"s2-64-2x", 64, run_wgs<64, 2, 2, 1, true, false, true>},
        {"s2-48-2x", 48, run_wgs<48, 2, 2, 1, true, false, true>},
    };
    struct Set { const Var* v; int n; };
#define SET_OF(s) Set{s, (int)(sizeof(s) / sizeof(s[0]))}
    const Set sets[] = {SET_OF(set1), SET_OF(set2), SET_OF(set3), SET_OF(set4), SET_OF(set5)};
#undef SET_OF
    const int nsets = (int)(sizeof(sets) / sizeof(sets[0]));
    const int arg = atoi(argv[argc - 1]);
    const int set = arg >= 1 && arg <= nsets ? arg : nsets;  // the last call's by default
    const Var* vars = sets[set - 1].v;
    const int NV = sets[set - 1].n;
    printf("%-20s %4s %7s", "matrix (us a launch)", "cols", "eng");
    for (int i = 0; i < NV; ++i) printf(" %8s", vars[i].name);
    printf("  outputs differing from eng, each kernel\n");
    for (const Shape& s : shapes) {
        if (one && s.n_out != 28672) continue;
        const int n_sb = s.n_in / 256, n_mt = s.n_out / 16;
        std::vector<u8> wts((size_t)n_mt * n_sb * MMA_BLK);
        for (size_t i = 0; i < wts.size(); ++i) wts[i] = (u8)rnd();
        for (int mt = 0; mt < n_mt; ++mt)  // scales and mins 6-bit, d and dmin small normal f16s
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
            const Acts A = make_acts(ncols, npad, n_sb);
            uint4* dX = (uint4*)dev(A.xf);
            float* dE = dev(A.xe);
            float* dS = dev(A.xs);
            u8* dG[3] = {dev(A.xg[0]), dev(A.xg[1]), dev(A.xg[2])};
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
            a.m[0].y = y1;
            std::vector<size_t> diffs(NV);
            for (int i = 0; i < NV; ++i) {
                CK(cudaMemset(y1, 0xFF, ny * 4));
                const float tv = vars[i].run(a, dG[vars[i].bn == 32 ? 0 : vars[i].bn == 48 ? 1 : 2], n_mt, n_sb, ncols, reps);
                CK(cudaMemcpy(h1.data(), y1, ny * 4, cudaMemcpyDeviceToHost));
                size_t d = 0;
                for (size_t j = 0; j < ny; ++j) d += memcmp(&h0[j], &h1[j], 4) != 0;
                diffs[i] = d;
                printf(" %8.1f", tv);
            }
            printf(" ");
            for (int i = 0; i < NV; ++i) printf(" %zu", diffs[i]);
            printf(" of %zu\n", ny);
            fflush(stdout);
            cudaFree(dX); cudaFree(dE); cudaFree(dS); for (u8* g : dG) cudaFree(g); cudaFree(y0); cudaFree(y1);
        }
        cudaFree(dw);
    }
    return 0;
}
