// Shared helpers of every kernel family (prepended to the other .cu files, one NVRTC module).
//
// Rule that holds in every kernel of this module: a hashed value is produced by ONE fixed
// sequence of f32 operations that depends only on vector lengths — never on the batch size
// (a [B, .] launch only adds grid rows), on the grid shape, or on timing. No atomics. The
// module is compiled with --fmad=false (no a*b+c contraction), --ftz=false, IEEE division
// and square root, so every + and * rounds exactly as the CPU backend's Rust code does.

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

// Rows of one RowPos group; a step of more rows has several groups back to back, and the
// attention launch (all the step's rows) finds row r in group r / POS_ROWS.
#define POS_ROWS 64
// Per row of a position-dependent launch: its token position (RoPE), the slot its key/value
// go to, and its sequence (the cache row). The first slot its attention reads follows from
// these and the layer's window (attention.cu). A step's RowPos live in an engine-owned
// device buffer, written by rowpos_set before the step's layers (the same buffer whether the
// layers run as launches or as a CUDA graph replay, so one kernel serves both); kernels read
// them only after pdl_wait() (read after write: rowpos_set has completed).
struct RowPos {
    u32 n;
    u32 pos[POS_ROWS];
    u32 slot[POS_ROWS];
    u32 seq[POS_ROWS];
};

// Programmatic dependent launch (sm_90+; the host sets the launch attribute only there and
// the instructions are compiled only there). Every engine kernel calls pdl_trigger() first,
// so the next kernel of its stream may launch while it runs, and pdl_wait() before it reads
// or writes anything but read-only weights: griddepcontrol.wait returns once the previous
// grid of the stream has completed and its memory operations are visible. Before the wait a
// kernel may only issue L2 prefetch hints (no value and no ordering depend on them) and read
// weights, which no kernel writes (the unfused Q4_K decode's first round, kernels/mma.cu
// mma_decode_body: each matrix is uploaded before the first launch that reads it). Without
// the attribute both are no-ops in effect (the kernel starts after its predecessor ends).
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// A kernel's dynamic shared memory, `name` an array of T: the launch's extern array, or in
// the kernel emulator (tests/kernel-emu/emu.h, PPN_EMU) its one buffer, which runs one block
// at a time.
#if defined(PPN_EMU)
#define DYN_SHARED(T, name) T* name = (T*)emu_dyn_smem
#else
#define DYN_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif

// The f16 at b[0..2] (little endian), widened exactly (cvt.f32.f16: every f16, subnormals
// included, is an f32; one instruction). One 16-bit load: every f16 of the GGUF layouts sits
// at an even byte offset (all block sizes are even and allocations are 256-byte aligned).
__device__ __forceinline__ float f16_at(const u8* b) {
    unsigned short h = *(const unsigned short*)b;
#if defined(PPN_EMU)  // the kernel emulator (tests/kernel-emu): no PTX on the CPU
    return emu_h2f(h);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

__device__ __forceinline__ float bf16_at(const u8* b) {
    u32 h = (u32)b[0] | ((u32)b[1] << 8);
    return __uint_as_float(h << 16);
}

// The crate's fixed lane tree over 8 consecutive threads (lane = threadIdx.x % 8):
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). IEEE addition is commutative, so
// the xor partners compute bit-identical sums and every lane of the group ends with the
// result. All 32 threads of the warp must call it (full-mask shuffles).
__device__ __forceinline__ float tree8(float a) {
    a = a + __shfl_xor_sync(0xffffffffu, a, 4);
    a = a + __shfl_xor_sync(0xffffffffu, a, 2);
    a = a + __shfl_xor_sync(0xffffffffu, a, 1);
    return a;
}

// The fixed xor tree over a whole warp: a + (a ^ 16), then 8, 4, 2, 1. At each level the
// two partners add the same two values (IEEE addition is commutative), so every lane ends
// with bit-identical sums. All 32 threads of the warp must call it.
__device__ __forceinline__ float tree32(float a) {
    a = a + __shfl_xor_sync(0xffffffffu, a, 16);
    a = a + __shfl_xor_sync(0xffffffffu, a, 8);
    a = a + __shfl_xor_sync(0xffffffffu, a, 4);
    a = a + __shfl_xor_sync(0xffffffffu, a, 2);
    a = a + __shfl_xor_sync(0xffffffffu, a, 1);
    return a;
}

// sum of x[i] * x[i] over i < n by one warp: lane l takes i = l, l + 32, ... in order, then
// tree32. Every lane returns the same bits.
__device__ __forceinline__ float sumsq32(const float* x, int n) {
    int lane = threadIdx.x & 31;
    float acc = 0.0f;
    // Batches of 8 loads issue together; the adds stay in element order.
    for (int i0 = lane; i0 < n; i0 += 256) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = i0 + 32 * u < n ? x[i0 + 32 * u] : 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (i0 + 32 * u < n) acc = acc + v[u] * v[u];
    }
    return tree32(acc);
}

// Thread t's share of sumsq256 (t < 256): float4s t, t + 256, ... in order, x y z w each.
__device__ __forceinline__ float sumsq256_part(const float* x, int n, int t) {
    const float4* x4 = (const float4*)x;
    const int n4 = n >> 2;
    float acc = 0.0f;
    for (int v0 = t; v0 < n4; v0 += 4 * 256) {
        float4 q[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (v0 + 256 * k < n4) q[k] = x4[v0 + 256 * k];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (v0 + 256 * k < n4) {
                acc = acc + q[k].x * q[k].x;
                acc = acc + q[k].y * q[k].y;
                acc = acc + q[k].z * q[k].z;
                acc = acc + q[k].w * q[k].w;
            }
    }
    return acc;
}
// sumsq256's last level: the 8 warp sums w[0..8] in its fixed tree.
__device__ __forceinline__ float sumsq256_fold(const float* w) {
    return ((w[0] + w[1]) + (w[2] + w[3])) + ((w[4] + w[5]) + (w[6] + w[7]));
}
// sum of x[i] * x[i] over i < n (n a multiple of 4, x 16-byte aligned) by a whole block of
// 256 threads (8 warps; every thread must call it, `red` is 8 floats of shared memory):
// thread t takes float4s v = t, t + 256, ... in order (x, y, z, w of each in order), then
// tree32 in each warp, then the 8 warp sums as ((w0 + w1) + (w2 + w3)) + ((w4 + w5) +
// (w6 + w7)). Every thread returns the same bits, fixed by n alone. The vectorized matvec's
// norm (its staged prologue and stage_rows) uses it: a warp-per-row sum walks a 4096-wide row
// in 16 dependent rounds of loads (about 5 us), 256 threads in one or two.
__device__ __forceinline__ float sumsq256(const float* x, int n, float* red) {
    const int t = threadIdx.x;
    float acc = tree32(sumsq256_part(x, n, t));
    if ((t & 31) == 0) red[t >> 5] = acc;
    __syncthreads();
    float s = sumsq256_fold(red);
    __syncthreads();  // red is reused by the next call
    return s;
}

// sumsq256 of rows 0..nb (nb <= 8; row b at x + b * n) by a block of 256 * G threads (every
// thread must call it; `red` is 64 floats of shared memory): thread t works for row group
// t / 256 on rows b = t / 256, t / 256 + G, ..., as thread t % 256 of a 256-thread block:
// exactly sumsq256's share (sumsq256_part), tree32 within its warp (a warp never straddles
// two groups), its warp sum in slot (t % 256) / 32 of the row, and the row's 8 slots summed
// in sumsq256's tree (sumsq256_fold). So each row's sum is sumsq256's, bit for bit, whatever
// G (mma.cu's fused decode runs it with 256 and 512 threads; the groups only let two rows'
// loads be in flight at once). Thread b < nb writes inv[b] = 1 / sqrt(ss_b / n + eps),
// stage_rows' and mma_prep's expression; visible to the block on return.
__device__ __forceinline__ void sumsq256_rows_inv(const float* x, int n, int nb, float eps,
                                                  float* red, float* inv) {
    const int t = threadIdx.x & 255, G = blockDim.x >> 8;
    for (int b = threadIdx.x >> 8; b < nb; b += G) {  // uniform over each warp
        const float acc = tree32(sumsq256_part(x + (size_t)b * n, n, t));
        if ((t & 31) == 0) red[8 * b + (t >> 5)] = acc;
    }
    __syncthreads();
    if (threadIdx.x < nb) inv[threadIdx.x] = 1.0f / sqrtf(sumsq256_fold(red + 8 * threadIdx.x) / (float)n + eps);
    __syncthreads();
}

// Physical float4 slot of float4 v of an x row as the vectorized matvec reads it (staged in
// shared memory, or laid out by stage_rows in global memory): v's low three bits XORed with
// bits 3..5, so that the 8 lanes of a quarter-warp, which read the same (run, group) of 8
// consecutive units, hit 8 distinct 16-byte bank groups for the 32-element-block formats and
// at most 2-way shared ones for the K-quants (unswizzled, Q8_0's 8 lanes all read one bank
// group and Q4_K's 4 at a time). It permutes within aligned groups of 8 slots, so a row's
// slots stay inside the row. One swizzle for every format: q|k|v of mixed formats share x.
__device__ __forceinline__ int swz(int v) { return v ^ ((v >> 3) & 7); }
