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

// Rows of one position-dependent launch (rope, KV store, attention); the host splits larger
// batches into several launches. Passed by value as a kernel parameter (copied at launch),
// so no per-step upload is needed and nothing can race on it.
#define POS_ROWS 64
struct RowPos {
    u32 n;
    u32 pos[POS_ROWS];
    u32 from[POS_ROWS];
};

// The f16 at b[0..2] (little endian), widened exactly: the f16 exponent/mantissa read as f32
// bits is the value times 2^-112 (normal and subnormal alike) and the multiply is exact.
// One 16-bit load: every f16 of the GGUF layouts sits at an even byte offset (all block
// sizes are even and allocations are 256-byte aligned).
__device__ __forceinline__ float f16_at(const u8* b) {
    u32 h = *(const unsigned short*)b;
    u32 em = h & 0x7fffu;
    u32 sign = (h & 0x8000u) << 16;
    u32 mag;
    if (em >= 0x7c00u) {
        mag = 0x7f800000u | ((em & 0x3ffu) << 13);
    } else {
        mag = __float_as_uint(__uint_as_float(em << 13) * __uint_as_float((127u + 112u) << 23));
    }
    return __uint_as_float(sign | mag);
}

__device__ __forceinline__ float bf16_at(const u8* b) {
    u32 h = (u32)b[0] | ((u32)b[1] << 8);
    return __uint_as_float(h << 16);
}

__device__ __forceinline__ float f32_at(const u8* b) {
    u32 v = (u32)b[0] | ((u32)b[1] << 8) | ((u32)b[2] << 16) | ((u32)b[3] << 24);
    return __uint_as_float(v);
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
