// The vectorized matvec: quantized weight rows in the device layout of crate::quant::repack
// (every quant load an aligned 16-byte load), f32 inputs, f32 accumulation.
//
// Why a second kernel: the byte-wise kernel (matvec.cu) decodes one element per lane per
// load, which on 4096..28672-wide rows is bound by load instructions at a few percent of DRAM
// bandwidth. Here a lane takes a whole 32-element UNIT per step (one or two 16-byte quant
// loads plus its block's scales), and a warp carries NW weight rows at once, so each x value
// it reads from shared memory (or L1) serves NW rows and each quant RT batch rows.
//
// Order of every dot (fixed by n_in alone, never by the batch, the row tile RT, the rows per
// warp NW, the grid or the staging of x): a row's n_in / 32 units are dealt to the 32 lanes
// of one warp, unit u to lane u % 32, which walks its units in increasing u. A unit is two
// runs of 16 elements, each with a scale A and an offset B (the weight is A * q + B, q the
// integer quant; crate::quant::repack::unit_values is the host mirror of the decode): per
// run s = sum of q * x over the run (groups of 4 in order, fmaf), then acc = fmaf(A, s, acc)
// and, when the format has offsets, acc = fmaf(B, run sum of x, acc); run 0 then run 1.
// Then tree32. Each batch row has its own accumulators and sees exactly that sequence.

#if defined(MVQ_FMT)

#if !defined(MV_RT) || MV_RT < 1 || MV_RT > 8
#error "a vectorized matvec module needs MV_RT in 1..8"
#endif

// 16 bytes of weights: read-only for the kernel's whole life (uploaded at engine build), so
// the non-coherent path is valid; no L1 allocation, so streamed weights do not evict x.
__device__ __forceinline__ uint4 ldw16(const u8* p) {
    uint4 v;
#if __CUDA_ARCH__ >= 800
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
#else
    v = __ldg((const uint4*)p);
#endif
    return v;
}
__device__ __forceinline__ u32 ldw4(const u8* p) { return __ldg((const u32*)p); }
__device__ __forceinline__ uint2 ldw8(const u8* p) { return __ldg((const uint2*)p); }

// The f16 in the low 16 bits of h, widened exactly.
__device__ __forceinline__ float h2f(u32 h) {
    float f;
    unsigned short s = (unsigned short)(h & 0xFFFFu);
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
}

__device__ __forceinline__ u32 comp(const uint4& v, int g) {
    return g == 0 ? v.x : g == 1 ? v.y : g == 2 ? v.z : v.w;
}

// 2^23 + byte j of w, exactly (the byte becomes the low mantissa bits): with the format's
// offset subtracted, the integer quant as an f32, exactly.
template <int J>
__device__ __forceinline__ float qbyte(u32 w) {
    return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7540 + J));
}

// Bits 0..3 of x to bit 4 of bytes 0..3.
__device__ __forceinline__ u32 spread4(u32 x) {
    return ((x & 1u) | ((x & 2u) << 7) | ((x & 4u) << 14) | ((x & 8u) << 21)) << 4;
}

// One unit of one weight row: its raw registers, loaded by `load`, decoded by `ab` (the
// runs' scale A and offset B) and `word` (the 4 quant bytes of run r, group g, each plus the
// format's bias, so that qbyte - OFS is the signed quant). e0: the unit's first element;
// run 1 starts GAP elements after run 0.
template <int FMT> struct Unit;

// Q4_K repacked: per super-block qs 128 | scales 16 (for unit pair p: scale 2p, scale 2p+1,
// min 2p, min 2p+1, unpacked), then a plane of (d, dmin) per super-block. Unit u: super-block
// u / 8, quant chunk c = u % 8: low nibbles are sub-block 2(c/2), high nibbles 2(c/2)+1,
// elements (c/2)*64 + (c%2)*16 + i and +32. Q5_K: qh 32 | qs 128 | scales 16, the same plane.
template <int FIVE>
struct UnitK4 {
    static constexpr int GAP = 32;
    static constexpr float OFS = 8388608.0f;
    static constexpr int SB = FIVE ? 176 : 144;
    uint4 q, qh;
    u32 sc, dd;
    int c;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        int sb = u >> 3;
        const u8* b = row + (size_t)sb * SB;
        c = u & 7;
        q = ldw16(b + (FIVE ? 32 : 0) + 16 * c);
        if (FIVE) qh = ldw16(b + 16 * (c & 1));
        sc = ldw4(b + SB - 16 + 4 * (c >> 1));
        dd = ldw4(row + (size_t)(nu >> 3) * SB + 4 * sb);
    }
    __device__ __forceinline__ static int e0(int u) {
        return (u >> 3) * 256 + ((u & 7) >> 1) * 64 + (u & 1) * 16;
    }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        *A = h2f(dd) * (float)((sc >> (8 * r)) & 0xFFu);
        *B = -(h2f(dd >> 16) * (float)((sc >> (16 + 8 * r)) & 0xFFu));
    }
    __device__ __forceinline__ u32 word(int r, int g) const {
        u32 w = (comp(q, g) >> (4 * r)) & 0x0F0F0F0Fu;
        // Q5_K: bit `sub` of qh byte (c%2)*16 + i is the quant's bit 4.
        if (FIVE) w |= ((comp(qh, g) >> (2 * (c >> 1) + r)) & 0x01010101u) << 4;
        return w;
    }
};
template <> struct Unit<FMT_Q4K> : UnitK4<0> {};
template <> struct Unit<FMT_Q5K> : UnitK4<1> {};

// Q6_K repacked: per super-block ql 128 | qh 64 | scales 16, the d's after all super-blocks.
// Unit c = u % 8: half hh = c / 4, t = c % 4; run r is sub-block s = t/2 + 2r, elements
// hh*128 + s*32 + (t%2)*16 + i.
template <> struct Unit<FMT_Q6K> {
    static constexpr int GAP = 64;
    static constexpr float OFS = 8388608.0f + 32.0f;
    uint4 ql, qh;
    u32 sc;
    float d;
    int c;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        int sb = u >> 3;
        c = u & 7;
        int hh = c >> 2, t = c & 3;
        const u8* b = row + (size_t)sb * 208;
        ql = ldw16(b + hh * 64 + 16 * t);
        qh = ldw16(b + 128 + hh * 32 + 16 * (t & 1));
        // This unit's two scales (the repack put them side by side).
        sc = __ldg((const unsigned short*)(b + 192 + 2 * c));
        d = h2f(__ldg((const unsigned short*)(row + (size_t)(nu >> 3) * 208 + 2 * sb)));
    }
    __device__ __forceinline__ static int e0(int u) {
        int c = u & 7, t = c & 3;
        return (u >> 3) * 256 + (c >> 2) * 128 + (t >> 1) * 32 + (t & 1) * 16;
    }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        *A = d * (float)(int)(signed char)((sc >> (8 * r)) & 0xFFu);
        *B = 0.0f;
    }
    __device__ __forceinline__ u32 word(int r, int g) const {
        int s = ((c & 3) >> 1) + 2 * r;
        return ((comp(ql, g) >> (4 * r)) & 0x0F0F0F0Fu) |
               (((comp(qh, g) >> (2 * s)) & 0x03030303u) << 4);
    }
};

// Q8_0 repacked: 32 quant bytes per block, then the d's. Elements 32u + j.
template <> struct Unit<FMT_Q8_0> {
    static constexpr int GAP = 16;
    static constexpr float OFS = 8388608.0f + 128.0f;
    uint4 q0, q1;
    float d;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        q0 = ldw16(row + 32 * (size_t)u);
        q1 = ldw16(row + 32 * (size_t)u + 16);
        d = h2f(__ldg((const unsigned short*)(row + 32 * (size_t)nu + 2 * u)));
    }
    __device__ __forceinline__ static int e0(int u) { return 32 * u; }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        *A = d;
        *B = 0.0f;
    }
    // Signed bytes + 128 (xor of the sign bit).
    __device__ __forceinline__ u32 word(int r, int g) const {
        return comp(r ? q1 : q0, g) ^ 0x80808080u;
    }
};

// Q4_0 / Q4_1 / Q5_0 / Q5_1 repacked: 16 quant bytes per block (low nibbles elements 0..15,
// high nibbles 16..31), then per block the scales: Q4_0 d (2 bytes), Q4_1 d, m (4), Q5_0 d,
// 0, qh (8), Q5_1 d, m, qh (8).
template <int FMT> struct UnitNib {
    static constexpr bool MIN = FMT == FMT_Q4_1 || FMT == FMT_Q5_1;
    static constexpr bool FIVE = FMT == FMT_Q5_0 || FMT == FMT_Q5_1;
    static constexpr int GAP = 16;
    static constexpr float OFS =
        8388608.0f + (FMT == FMT_Q4_0 ? 8.0f : FMT == FMT_Q5_0 ? 16.0f : 0.0f);
    uint4 q;
    u32 s, qh;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        q = ldw16(row + 16 * (size_t)u);
        const u8* m = row + 16 * (size_t)nu;
        if (FIVE) {
            uint2 v = ldw8(m + 8 * (size_t)u);
            s = v.x;
            qh = v.y;
        } else if (MIN) {
            s = ldw4(m + 4 * (size_t)u);
            qh = 0;
        } else {
            s = __ldg((const unsigned short*)(m + 2 * (size_t)u));
            qh = 0;
        }
    }
    __device__ __forceinline__ static int e0(int u) { return 32 * u; }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        *A = h2f(s);
        *B = MIN ? h2f(s >> 16) : 0.0f;
    }
    __device__ __forceinline__ u32 word(int r, int g) const {
        u32 w = (comp(q, g) >> (4 * r)) & 0x0F0F0F0Fu;
        if (FIVE) w |= spread4((qh >> (16 * r + 4 * g)) & 15u);
        return w;
    }
};
template <> struct Unit<FMT_Q4_0> : UnitNib<FMT_Q4_0> {};
template <> struct Unit<FMT_Q4_1> : UnitNib<FMT_Q4_1> {};
template <> struct Unit<FMT_Q5_0> : UnitNib<FMT_Q5_0> {};
template <> struct Unit<FMT_Q5_1> : UnitNib<FMT_Q5_1> {};

// (swz, the x layout this kernel reads, is in common.cu: stage_rows writes it too.)

// Formats whose runs carry an offset B (A * q + B): the dot needs the run's sum of x.
template <int FMT>
struct HasMin {
    static constexpr bool v = FMT == FMT_Q4K || FMT == FMT_Q5K || FMT == FMT_Q4_1 || FMT == FMT_Q5_1;
};

// The partial sums s[i][b] += q * x over group g of run r of one unit (4 elements, in
// order), x read from the swizzled rows X (stride n).
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_group(const Unit<FMT> (&w)[NW], int v, int r, int g,
                                          const float* X, int n, float (&s)[NW][RT]) {
    typedef Unit<FMT> U;
    float4 xv[RT];
#pragma unroll
    for (int b = 0; b < RT; b++) xv[b] = ((const float4*)(X + (size_t)b * n))[swz(v)];
#pragma unroll
    for (int i = 0; i < NW; i++) {
        u32 q = w[i].word(r, g);
        float q0 = qbyte<0>(q) - U::OFS, q1 = qbyte<1>(q) - U::OFS;
        float q2 = qbyte<2>(q) - U::OFS, q3 = qbyte<3>(q) - U::OFS;
#pragma unroll
        for (int b = 0; b < RT; b++) {
            float t = s[i][b];
            t = fmaf(q0, xv[b].x, t);
            t = fmaf(q1, xv[b].y, t);
            t = fmaf(q2, xv[b].z, t);
            t = fmaf(q3, xv[b].w, t);
            s[i][b] = t;
        }
    }
}

// acc[i][b] += run r's contribution: fmaf(A, s, acc), then for a format with offsets
// fmaf(B, xsum, acc) (xsum: the run's 16 x values summed in element order, precomputed).
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_close(const Unit<FMT> (&w)[NW], int k, int r,
                                          const float* xsum, int n16, const float (&s)[NW][RT],
                                          float (&acc)[NW][RT]) {
#pragma unroll
    for (int i = 0; i < NW; i++) {
        float A, B;
        w[i].ab(r, &A, &B);
#pragma unroll
        for (int b = 0; b < RT; b++) {
            acc[i][b] = fmaf(A, s[i][b], acc[i][b]);
            if (HasMin<FMT>::v) acc[i][b] = fmaf(B, xsum[b * n16 + k], acc[i][b]);
        }
    }
}

// One unit of NW weight rows into acc[NW][RT]: per run r (0, then 1), row i and batch row b,
// s = the sum over the run's 16 elements (groups g = 0..3, each j = 0..3) of q * x, then
// mvq_close. One-row tiles interleave the two runs' sums (more independent chains for the
// few accumulators); larger tiles finish run 0 first (fewer live registers). Each run's sum
// is its own chain in element order either way: the same bits.
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_unit(const Unit<FMT> (&w)[NW], int u, const float* X, int n,
                                         const float* xsum, float (&acc)[NW][RT]) {
    typedef Unit<FMT> U;
    const int e0 = U::e0(u), n16 = n >> 4;
    if (RT == 1) {
        float s[2][NW][RT];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int i = 0; i < NW; i++) s[r][i][0] = 0.0f;
#pragma unroll
        for (int g = 0; g < 4; g++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                mvq_group<FMT, RT, NW>(w, (e0 + U::GAP * r) / 4 + g, r, g, X, n, s[r]);
#pragma unroll
        for (int r = 0; r < 2; r++)
            mvq_close<FMT, RT, NW>(w, (e0 + U::GAP * r) >> 4, r, xsum, n16, s[r], acc);
    } else {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float s[NW][RT];
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) s[i][b] = 0.0f;
#pragma unroll
            for (int g = 0; g < 4; g++)
                mvq_group<FMT, RT, NW>(w, (e0 + U::GAP * r) / 4 + g, r, g, X, n, s);
            mvq_close<FMT, RT, NW>(w, (e0 + U::GAP * r) >> 4, r, xsum, n16, s, acc);
        }
    }
}

// Grid (blocks, rows / RT), block 32 * MV_WARPS, dynamic shared memory: the staged x tile
// (stage_x: RT * n floats, normalized, swizzled) then, for a format with offsets, the run
// sums (RT * n / 16 floats). Warp w of the launch takes groups w, w + all warps, ...; group
// g holds features g * nf .. g * nf + nf - 1 (nf = NW in modes 0/1; in mode 2 nf = NW / 2,
// each a gate row and its up row). A warp walks its (group, unit round) items in one loop
// with the next item's weights loading while the current one computes, so the loads stay in
// flight across its groups; a group's sums are reduced (tree32) after its last round.
// A tile that does not stage reads x from global rows that stage_rows laid out (swizzled
// and, for a norm launch, normalized with the same expressions), so a row's bits never
// depend on the staging.
template <int FMT, int RT, int NW, bool XS>
__device__ __forceinline__ void mvq_run(const MvArgs& a, int features, float* smem) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = a.n_in, nu = n >> 5, rounds = (nu + 31) >> 5;
    const int r0 = blockIdx.y * RT;
    const bool gu = a.mode == 2;
    const int nf = gu ? NW / 2 : NW;
    const int groups = (features + nf - 1) / nf;
    const int all_warps = gridDim.x * MV_WARPS;
    // The weight row of feature slot i of group grp (a dead slot reads row 0 of matrix 0).
    auto row_of = [&](int grp, int i) -> const u8* {
        int o;
        int f = grp * nf + (gu ? i % nf : i);
        int m = mv_locate(a, features, f, &o);
        if (m < 0) return a.m[0].w;
        if (gu && i >= nf) return a.m[1].w + (size_t)o * a.m[1].row_bytes;
        return MV_FIELD(a, m, w) + (size_t)o * MV_FIELD(a, m, row_bytes);
    };
    int grp = blockIdx.x * MV_WARPS + warp, it = 0;
    const u8* row[NW];
    Unit<FMT> cur[NW];
#pragma unroll
    for (int i = 0; i < NW; i++) row[i] = row_of(grp < groups ? grp : 0, i);
    // The first item's weights load before the wait: they are read-only.
    if (grp < groups && lane < nu) {
#pragma unroll
        for (int i = 0; i < NW; i++) cur[i].load(row[i], lane, nu);
    }
    pdl_wait();
    const float* X = a.x + (size_t)r0 * n;
    float* xsum = smem + (XS ? RT * n : 0);
    float* inv = xsum + (HasMin<FMT>::v ? RT * (n >> 4) : 0);  // RT floats
    if (XS && a.norm) {
        // Only a staged launch normalizes (the host pre-normalizes the others): the
        // expressions of crate::math::rms_norm, sumsq32 over the global row.
        for (int r = warp; r < RT; r += MV_WARPS) {
            float ss = sumsq32(X + (size_t)r * n, n);
            if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
        }
        __syncthreads();
    }
    if (XS) {
        // The tile into shared memory, float4 by float4 (normalized on the way), swizzled.
        const int n4 = n >> 2;
        for (int i0 = threadIdx.x; i0 < RT * n4; i0 += 4 * blockDim.x) {
            float4 t[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int i = i0 + k * blockDim.x;
                if (i < RT * n4) t[k] = ((const float4*)X)[i];
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int i = i0 + k * blockDim.x;
                if (i < RT * n4) {
                    int b = i / n4, v = i - b * n4;
                    float4 x = t[k];
                    if (a.norm) {
                        float4 g = ((const float4*)a.norm)[v];
                        float iv = inv[b];
                        x.x = (x.x * iv) * g.x;
                        x.y = (x.y * iv) * g.y;
                        x.z = (x.z * iv) * g.z;
                        x.w = (x.w * iv) * g.w;
                    }
                    ((float4*)smem)[b * n4 + swz(v)] = x;
                }
            }
        }
        __syncthreads();
    }
    if (HasMin<FMT>::v) {
        // Run sums of the (normalized) x, 16 elements in order.
        const int n16 = n >> 4, n4 = n >> 2;
        for (int i = threadIdx.x; i < RT * n16; i += blockDim.x) {
            int b = i / n16, k = i - b * n16;
            float t = 0.0f;
#pragma unroll
            for (int v = 0; v < 4; v++) {
                const float4* src = XS ? (const float4*)smem : (const float4*)X;
                float4 x = src[b * n4 + swz(4 * k + v)];
                t = t + x.x;
                t = t + x.y;
                t = t + x.z;
                t = t + x.w;
            }
            xsum[i] = t;
        }
        __syncthreads();
    }
    if (XS) X = smem;
    float acc[NW][RT];
#pragma unroll
    for (int i = 0; i < NW; i++)
#pragma unroll
        for (int b = 0; b < RT; b++) acc[i][b] = 0.0f;
    while (grp < groups) {  // uniform over the warp
        // The next item: the next round of this group, or round 0 of the warp's next group.
        int ngrp = grp, nit = it + 1;
        const u8* nrow[NW];
#pragma unroll
        for (int i = 0; i < NW; i++) nrow[i] = row[i];
        if (nit == rounds) {
            nit = 0;
            ngrp = grp + all_warps;
            if (ngrp < groups) {
#pragma unroll
                for (int i = 0; i < NW; i++) nrow[i] = row_of(ngrp, i);
            }
        }
        Unit<FMT> nxt[NW];
        const int un = nit * 32 + lane;
        if (ngrp < groups && un < nu) {
#pragma unroll
            for (int i = 0; i < NW; i++) nxt[i].load(nrow[i], un, nu);
        }
        const int u = it * 32 + lane;
        if (u < nu) mvq_unit<FMT, RT, NW>(cur, u, X, n, xsum, acc);
        if (it == rounds - 1) {
            // The group is done: every lane reaches the shuffles (the branch is uniform).
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) acc[i][b] = tree32(acc[i][b]);
            // Lane j finishes (feature slot j / RT, batch row j % RT).
            float sv = 0.0f, tv = 0.0f;
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) {
                    if (gu && i >= nf) {
                        if (lane == (i - nf) * RT + b) tv = acc[i][b];
                    } else if (lane == i * RT + b) {
                        sv = acc[i][b];
                    }
                    acc[i][b] = 0.0f;
                }
            if (lane < nf * RT) {
                int o, f = grp * nf + lane / RT;
                int mi = mv_locate(a, features, f, &o);
                if (mi >= 0) mv_finish(a, mi, o, r0 + lane % RT, sv, tv);
            }
        }
#pragma unroll
        for (int i = 0; i < NW; i++) {
            cur[i] = nxt[i];
            row[i] = nrow[i];
        }
        grp = ngrp;
        it = nit;
    }
}

template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_body(const MvArgs& a, int features, int stage_x) {
    extern __shared__ float4 mvq_smem4[];
    pdl_trigger();
    if (stage_x) mvq_run<FMT, RT, NW, true>(a, features, (float*)mvq_smem4);
    else mvq_run<FMT, RT, NW, false>(a, features, (float*)mvq_smem4);
}

// Launch bounds: up to 2-row tiles keep 3 blocks (24 warps) per SM resident (<= 85
// registers); larger tiles hold more accumulators and keep 2; four weight rows of a large
// tile (each x value read from L1 or shared memory serving 4 rows, which a batch of 5..8
// rows needs not to be bound by those reads) keep 1, with up to 255 registers.
#define MVQ_ARGS MvArgs a, int features, int stage_x
#define MVQ_MIN_BLOCKS(NW) ((NW) == 4 ? 1 : MV_RT <= 2 ? 3 : 2)
#define MVQ_KERNEL(NAME, NW)                                                               \
    extern "C" __global__ void __launch_bounds__(256, MVQ_MIN_BLOCKS(NW)) NAME(MVQ_ARGS) { \
        mvq_body<MVQ_FMT, MV_RT, NW>(a, features, stage_x);                                \
    }
MVQ_KERNEL(mvq_w1, 1)
MVQ_KERNEL(mvq_w2, 2)
MVQ_KERNEL(mvq_w4, 4)

#endif
