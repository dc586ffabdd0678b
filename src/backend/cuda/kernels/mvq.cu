// The vectorized matvec: quantized weight rows in the device layout of crate::quant::repack
// (every quant load an aligned 16-byte load), f32 inputs, f32 accumulation.
//
// Why a second kernel: the byte-wise kernel (matvec.cu) decodes one element per lane per
// load, which on 4096..28672-wide rows is bound by load instructions at a few percent of DRAM
// bandwidth. Here a lane takes a whole 32-element UNIT per step (one or two 16-byte quant
// loads plus its block's scales), and a warp carries NW weight rows at once, so each x value
// it reads from shared memory (or L1) serves NW rows and each weight value RT batch rows.
//
// Order of every dot (fixed by n_in and ks alone, never by the batch, the row tile RT, the
// rows per warp NW, the grid or the staging of x): a row's n_in / 32 units are dealt to
// 32 * ks lanes, unit u to lane slot u % (32 * ks) (slot s = warp s / 32 of the row's ks
// warps, lane s % 32); each lane walks its units in increasing u and, inside a unit, its
// two runs of 16 elements in order, one `acc = fmaf(w, x, acc)` per element, where the
// weight w = fmaf(A, q, B) (q the integer quant as f32, A/B the run's scale and offset:
// crate::quant::repack::unit_values is the host mirror of this decode). Then tree32 per
// warp and, for ks > 1, the ks warp sums added in warp order. Each batch row has its own
// accumulator and sees exactly that sequence, whatever RT and NW are.

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

// Byte k (0..15) of v.
__device__ __forceinline__ u32 byte16(const uint4& v, int k) {
    return (comp(v, k >> 2) >> (8 * (k & 3))) & 0xFFu;
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

// Q4_K: GGUF layout (144-byte super-blocks: d, dmin, 12 scale bytes | 128 quant bytes).
// Unit u: super-block u / 8, quant chunk c = u % 8: low nibbles are sub-block 2(c/2), high
// nibbles sub-block 2(c/2)+1, elements (c/2)*64 + (c%2)*16 + i and +32.
__device__ __forceinline__ void k4_scale(const uint4& h, int sub, float* A, float* B) {
    u32 s, m;
    if (sub < 4) {
        s = byte16(h, 4 + sub) & 63;
        m = byte16(h, 8 + sub) & 63;
    } else {
        s = (byte16(h, 8 + sub) & 0x0F) | ((byte16(h, sub) >> 6) << 4);
        m = (byte16(h, 8 + sub) >> 4) | ((byte16(h, 4 + sub) >> 6) << 4);
    }
    *A = h2f(h.x) * (float)s;
    *B = -(h2f(h.x >> 16) * (float)m);
}

template <> struct Unit<FMT_Q4K> {
    static constexpr int GAP = 32;
    static constexpr float OFS = 8388608.0f;
    uint4 h, q;
    int c;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        const u8* b = row + (size_t)(u >> 3) * 144;
        c = u & 7;
        h = ldw16(b);
        q = ldw16(b + 16 + 16 * c);
    }
    __device__ __forceinline__ static int e0(int u) {
        return (u >> 3) * 256 + ((u & 7) >> 1) * 64 + (u & 1) * 16;
    }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        k4_scale(h, 2 * (c >> 1) + r, A, B);
    }
    __device__ __forceinline__ u32 word(int r, int g) const {
        return (comp(q, g) >> (4 * r)) & 0x0F0F0F0Fu;
    }
};

// Q5_K: GGUF layout (176 bytes: d, dmin, scales | qh 32 | qs 128); as Q4_K plus bit `sub` of
// qh byte (c%2)*16 + i as bit 4.
template <> struct Unit<FMT_Q5K> {
    static constexpr int GAP = 32;
    static constexpr float OFS = 8388608.0f;
    uint4 h, qh, q;
    int c;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        const u8* b = row + (size_t)(u >> 3) * 176;
        c = u & 7;
        h = ldw16(b);
        qh = ldw16(b + 16 + 16 * (c & 1));
        q = ldw16(b + 48 + 16 * c);
    }
    __device__ __forceinline__ static int e0(int u) { return Unit<FMT_Q4K>::e0(u); }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        k4_scale(h, 2 * (c >> 1) + r, A, B);
    }
    __device__ __forceinline__ u32 word(int r, int g) const {
        int sub = 2 * (c >> 1) + r;
        return ((comp(q, g) >> (4 * r)) & 0x0F0F0F0Fu) |
               (((comp(qh, g) >> sub) & 0x01010101u) << 4);
    }
};

// Q6_K repacked: per super-block ql 128 | qh 64 | scales 16, the d's after all super-blocks.
// Unit c = u % 8: half hh = c / 4, t = c % 4; run r is sub-block s = t/2 + 2r, elements
// hh*128 + s*32 + (t%2)*16 + i.
template <> struct Unit<FMT_Q6K> {
    static constexpr int GAP = 64;
    static constexpr float OFS = 8388608.0f + 32.0f;
    uint4 ql, qh, sc;
    float d;
    int c;
    __device__ __forceinline__ void load(const u8* row, int u, int nu) {
        int sb = u >> 3;
        c = u & 7;
        int hh = c >> 2, t = c & 3;
        const u8* b = row + (size_t)sb * 208;
        ql = ldw16(b + hh * 64 + 16 * t);
        qh = ldw16(b + 128 + hh * 32 + 16 * (t & 1));
        sc = ldw16(b + 192);
        d = h2f(__ldg((const unsigned short*)(row + (size_t)(nu >> 3) * 208 + 2 * sb)));
    }
    __device__ __forceinline__ static int e0(int u) {
        int c = u & 7, t = c & 3;
        return (u >> 3) * 256 + (c >> 2) * 128 + (t >> 1) * 32 + (t & 1) * 16;
    }
    __device__ __forceinline__ void ab(int r, float* A, float* B) const {
        int t = c & 3, s = (t >> 1) + 2 * r;
        int k = (c >> 2) * 8 + 2 * s + (t & 1);
        *A = d * (float)(int)(signed char)byte16(sc, k);
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

// One unit of NW rows into acc[NW][RT]: x rows at X (row stride n), normalized on the fly
// when nw is set (the staged path normalized them in shared memory with the same expression).
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_unit(const Unit<FMT> (&w)[NW], int u, const float* X, int n,
                                         const float* nw, const float* inv,
                                         float (&acc)[NW][RT]) {
    typedef Unit<FMT> U;
    const int e0 = U::e0(u);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float A[NW], B[NW];
#pragma unroll
        for (int i = 0; i < NW; i++) w[i].ab(r, &A[i], &B[i]);
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const int e = e0 + U::GAP * r + 4 * g;
            float4 xv[RT];
#pragma unroll
            for (int b = 0; b < RT; b++) xv[b] = *(const float4*)(X + (size_t)b * n + e);
            if (nw) {
                float4 gv = *(const float4*)(nw + e);
#pragma unroll
                for (int b = 0; b < RT; b++) {
                    xv[b].x = (xv[b].x * inv[b]) * gv.x;
                    xv[b].y = (xv[b].y * inv[b]) * gv.y;
                    xv[b].z = (xv[b].z * inv[b]) * gv.z;
                    xv[b].w = (xv[b].w * inv[b]) * gv.w;
                }
            }
#pragma unroll
            for (int i = 0; i < NW; i++) {
                u32 q = w[i].word(r, g);
                float w0 = fmaf(A[i], qbyte<0>(q) - U::OFS, B[i]);
                float w1 = fmaf(A[i], qbyte<1>(q) - U::OFS, B[i]);
                float w2 = fmaf(A[i], qbyte<2>(q) - U::OFS, B[i]);
                float w3 = fmaf(A[i], qbyte<3>(q) - U::OFS, B[i]);
#pragma unroll
                for (int b = 0; b < RT; b++) {
                    float s = acc[i][b];
                    s = fmaf(w0, xv[b].x, s);
                    s = fmaf(w1, xv[b].y, s);
                    s = fmaf(w2, xv[b].z, s);
                    s = fmaf(w3, xv[b].w, s);
                    acc[i][b] = s;
                }
            }
        }
    }
}

// Grid (blocks, rows / RT), block 32 * MV_WARPS. A block's warps form MV_WARPS / ks groups of
// ks warps; group g of the launch computes features g * nf .. g * nf + nf - 1 (nf = NW in
// modes 0/1; in mode 2 nf = NW / 2 features, each a gate row and its up row). Blocks walk
// groups in rounds (a uniform trip count per block, so the ks > 1 barriers are uniform).
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_body(const MvArgs& a, int ks, int features, int stage_x) {
    extern __shared__ float4 mvq_xs4[];
    float* xs = (float*)mvq_xs4;
    __shared__ float inv[RT];
    __shared__ float part[MV_WARPS][NW * RT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = a.n_in, nu = n >> 5;
    const int r0 = blockIdx.y * RT;
    const bool gu = a.mode == 2;
    const int nf = gu ? NW / 2 : NW;
    const int gpb = MV_WARPS / ks;
    const int gw = warp % ks, gi = warp / ks;
    const int stride = 32 * ks;
    pdl_trigger();
    // The weight rows of feature slot i of group grp (dead slots read row 0 of matrix 0 and
    // their sums are dropped). mi/o of every slot, for the epilogue.
    auto locate = [&](int grp, int i, const u8** row, int* mi, int* o) {
        int f = grp * nf + (gu ? i % nf : i);
        int m = mv_locate(a, features, f, o);
        *mi = m;
        if (m < 0) {
            *row = a.m[0].w;
        } else if (gu && i >= nf) {
            *row = a.m[1].w + (size_t)*o * a.m[1].row_bytes;
        } else {
            *row = MV_FIELD(a, m, w) + (size_t)*o * MV_FIELD(a, m, row_bytes);
        }
    };
    {
        // The first round's weights start their DRAM trip before the wait (read-only).
        int grp = blockIdx.x * gpb + gi;
        if (grp * nf < features) {
#pragma unroll
            for (int i = 0; i < NW; i++) {
                const u8* row;
                int mi, o;
                locate(grp, i, &row, &mi, &o);
                u64 rb = gu && i >= nf ? a.m[1].row_bytes : a.m[0].row_bytes;
                if (mi >= 0) prefetch_l2(row, rb, gw * 32 + lane, stride);
            }
        }
    }
    pdl_wait();
    const float* X = a.x + (size_t)r0 * n;
    const float* nw = a.norm;
    const int total = RT * n;
    if (stage_x) {
        int all = a.norm ? total + n : total;
        for (int i0 = threadIdx.x; i0 < all; i0 += 8 * blockDim.x) {
            float t[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = i0 + u * blockDim.x;
                t[u] = i < total ? X[i] : i < all ? a.norm[i - total] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = i0 + u * blockDim.x;
                if (i < all) xs[i] = t[u];
            }
        }
        __syncthreads();
        if (a.norm) {
            const float* gs = xs + total;
            for (int r = warp; r < RT; r += MV_WARPS) {
                float ss = sumsq32(xs + (size_t)r * n, n);
                if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
            }
            __syncthreads();
            for (int r = 0; r < RT; r++)
                for (int e = threadIdx.x; e < n; e += blockDim.x)
                    xs[(size_t)r * n + e] = (xs[(size_t)r * n + e] * inv[r]) * gs[e];
            __syncthreads();
        }
        X = xs;
        nw = 0;
    } else if (a.norm) {
        for (int r = warp; r < RT; r += MV_WARPS) {
            float ss = sumsq32(X + (size_t)r * n, n);
            if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
        }
        __syncthreads();
    }
    for (int base = blockIdx.x * gpb; base * nf < features; base += gridDim.x * gpb) {
        const int grp = base + gi;
        const u8* row[NW];
        int mis[NW], os[NW];
#pragma unroll
        for (int i = 0; i < NW; i++) locate(grp, i, &row[i], &mis[i], &os[i]);
        float acc[NW][RT];
#pragma unroll
        for (int i = 0; i < NW; i++)
#pragma unroll
            for (int b = 0; b < RT; b++) acc[i][b] = 0.0f;
        if (grp * nf < features) {
            // Two units of loads in flight per row: the next unit's while this one computes.
            Unit<FMT> cur[NW], nxt[NW];
            int u = gw * 32 + lane;
            if (u < nu) {
#pragma unroll
                for (int i = 0; i < NW; i++) cur[i].load(row[i], u, nu);
            }
            for (; u < nu; u += stride) {
                if (u + stride < nu) {
#pragma unroll
                    for (int i = 0; i < NW; i++) nxt[i].load(row[i], u + stride, nu);
                }
                mvq_unit<FMT, RT, NW>(cur, u, X, n, nw, inv, acc);
#pragma unroll
                for (int i = 0; i < NW; i++) cur[i] = nxt[i];
            }
        }
        // Uniform over the warp: every lane reaches the shuffles.
#pragma unroll
        for (int i = 0; i < NW; i++)
#pragma unroll
            for (int b = 0; b < RT; b++) acc[i][b] = tree32(acc[i][b]);
        const int outs = nf * RT;  // (feature slot, batch row) pairs of the group
        if (ks == 1) {
            // Every lane holds every sum; lane j finishes pair j.
            float s = 0.0f, t = 0.0f;
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) {
                    if (gu && i >= nf) {
                        if (lane == (i - nf) * RT + b) t = acc[i][b];
                    } else if (lane == i * RT + b) {
                        s = acc[i][b];
                    }
                }
            if (lane < outs) {
                int i = lane / RT, b = lane % RT;
                int mi = 0, o = 0;
#pragma unroll
                for (int k = 0; k < NW; k++)
                    if (k == i) { mi = mis[k]; o = os[k]; }
                if (mi >= 0) mv_finish(a, mi, o, r0 + b, s, t);
            }
            continue;  // uniform: ks is a launch parameter
        }
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) part[warp][i * RT + b] = acc[i][b];
        }
        __syncthreads();
        if (gw == 0 && lane < outs) {
            int i = lane / RT, b = lane % RT;
            float s = part[warp][lane];
            float t = gu ? part[warp][lane + nf * RT] : 0.0f;
            for (int k = 1; k < ks; k++) {
                s = s + part[warp + k][lane];
                if (gu) t = t + part[warp + k][lane + nf * RT];
            }
            int mi = 0, o = 0;
#pragma unroll
            for (int k = 0; k < NW; k++)
                if (k == i) { mi = mis[k]; o = os[k]; }
            if (mi >= 0) mv_finish(a, mi, o, r0 + b, s, t);
        }
        __syncthreads();  // part is reused by the next round
    }
}

#define MVQ_ARGS MvArgs a, int ks, int features, int stage_x
#define MVQ_KERNEL(NAME, NW)                                                               \
    extern "C" __global__ void __launch_bounds__(256, 2) NAME(MVQ_ARGS) {                 \
        mvq_body<MVQ_FMT, MV_RT, NW>(a, ks, features, stage_x);                           \
    }
MVQ_KERNEL(mvq_w1, 1)
MVQ_KERNEL(mvq_w2, 2)
MVQ_KERNEL(mvq_w4, 4)

#endif
