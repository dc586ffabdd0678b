// Prototype: a batch-invariant tensor-core (mma.sync m16n8k16, f16 in, f32 accumulate) Q4_K
// matvec / GEMM. Research for issues #12 (decode speed) and #13 (prefill): see README.md.
//
// y[row, col] = sum_e w[row, e] * x[col, e], w = d * sc_s * q - dmin * m_s (Q4_K).
//
// THE ORDER (what every kernel here computes, for every output, whatever the batch, the
// column's position in a tile, the tile shape or the launch shape):
//   for each super-block sb (256 inputs) independently:
//     S_sb = 0; for ks in 0..16: S_sb = mma(A_ks, Xhi_ks, S_sb); S_sb = mma(A_ks, Xlo_ks, S_sb)
//       A: the row's 16 values sc_s * q of k-step ks, EXACT small integers in f16 (<= 945);
//       Xhi + Xlo: the column's 16 inputs scaled by 2^-E_sb (a power of two per column and
//       super-block) split into two f16s (hi = rn(x'), lo = rn(x' - hi)).
//     msum_sb = 0; for s in 0..8: msum_sb = fmaf(m_s, xsum_s, msum_sb)   (xsum: prep_x's order)
//     v_sb = fmaf(d, S_sb * 2^E_sb, (-dmin) * msum_sb)
//   y = 0; for sb in 0..n_sb: y = y + v_sb
// Each mma output element depends only on its row of A, its column of B and its own C input
// (a dot product unit per element): so column j's bits cannot depend on the other columns
// (the claim bench.py checks bitwise on the GPU). v_sb depends on sb alone, so the decode
// kernel may compute super-blocks in parallel (warps) and add them afterwards in sb order,
// and the GEMM may walk them in order in registers: same bits.
//
// Repacked weights: per (m-tile of 16 rows, super-block) one 2368-byte block (16 * 148):
//   [0, 2048)    nibbles: u32 word (ks / 4) * 128 + lane * 4 + ks % 4 is lane (g = lane / 4,
//                t = lane % 4)'s k-step ks: nibble i = h + 2 * half + 4 * pos holds
//                q[row g + 8h][k = ks * 16 + 8 * half + 2t + pos]; afrag() turns it into the
//                mma A fragment with one LOP3 and one HFMA2 per register.
//   [2048, 2304) per g: sc[g][0..8], sc[g+8][0..8], m[g][0..8], m[g+8][0..8]   (bytes, 6-bit)
//   [2304, 2368) per g: d[g], dmin[g], d[g+8], dmin[g+8]                       (f16 bits)
// Prepared activations (prep_x), per column and super-block:
//   XF: 256 u32: uint4 (ks * 4 + t) = {hi(k0, k0+1), hi(k0+8, k0+9), lo(k0, k0+1), lo(k0+8, k0+9)}
//       with k0 = ks * 16 + 2t: the B fragment (col = g) of lane (g, t), hi and lo.
//   XE: 2^E (f32);  XS: the 8 sub-block sums of x (f32, fixed order).
//
// Compile-time knobs (bench.py compiles variants with -D): MT m-tiles per decode warp and
// KP warps (super-blocks in flight) per decode block; GMT x GNT tiles per GEMM warp and
// GWM x GWN warps per GEMM block; PLANT=1 the negative control (decode swaps hi and lo when it
// sees more than one column: an order that depends on the batch, which bench.py must catch).

typedef unsigned int u32;
typedef unsigned char u8;

#ifndef MT
#define MT 2
#endif
#ifndef KP
#define KP 8
#endif
#ifndef GMT
#define GMT 2
#endif
#ifndef GNT
#define GNT 4
#endif
#ifndef GWM
#define GWM 2
#endif
#ifndef GWN
#define GWN 4
#endif
#ifndef PLANT
#define PLANT 0
#endif

#define BLK 2368
#define SC_OFF 2048
#define DD_OFF 2304

// Weights are read once per launch: no L1 allocation (keeps x in L1).
__device__ __forceinline__ uint4 ld_stream16(const u8* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 ld_stream8(const u8* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ u32 comp4(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ u32 byte_at(u32 lo, u32 hi, int s) {  // byte s (0..8) of hi:lo
    return ((s < 4 ? lo : hi) >> (8 * (s & 3))) & 255u;
}

// f32 -> f16 pair {f, f} (round to nearest; every value used here is exact in f16).
__device__ __forceinline__ u32 h2dup(float f) {
    u32 r;
    asm("{.reg .b16 h; cvt.rn.f16.f32 h, %1; mov.b32 %0, {h, h};}" : "=r"(r) : "f"(f));
    return r;
}
__device__ __forceinline__ float h2f(u32 bits16) {
    float f;
    unsigned short s = (unsigned short)(bits16 & 0xFFFFu);
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// D = A * B + D, f16 inputs, f32 accumulate; each D element is its own row-by-column dot.
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Per (m-tile, sub-block) constants of lane row g (low-nibble path) and g+8 (high-nibble path).
struct Kc {
    u32 a, b, c, d;
};
__device__ __forceinline__ Kc kconsts(u32 scg, u32 scg8) {
    const float fg = (float)scg, f8 = (float)scg8;
    Kc k;
    k.a = h2dup(fg);             // (1024 + q) * sc - 1024 * sc = q * sc
    k.b = h2dup(-1024.0f * fg);  // |1024 * 63| < 65504: exact
    k.c = h2dup(f8 * 0.0625f);   // (1024 + 16 q) * sc / 16 - 64 sc = q * sc
    k.d = h2dup(-64.0f * f8);
    return k;
}

// The A fragment of one k-step from its packed word. (w & mask) | 0x6400 puts a nibble in
// the mantissa of 1024.0 (f16), exactly; the FMA's result q * sc <= 945 is an integer < 2048,
// so it is exact too: A holds the weights' integer part without any rounding.
__device__ __forceinline__ void afrag(u32 w, const Kc& k, u32 (&a)[4]) {
    const u32 w8 = w >> 8;
    a[0] = hfma2((w & 0x000F000Fu) | 0x64006400u, k.a, k.b);   // row g,   k0, k0+1
    a[1] = hfma2((w & 0x00F000F0u) | 0x64006400u, k.c, k.d);   // row g+8, k0, k0+1
    a[2] = hfma2((w8 & 0x000F000Fu) | 0x64006400u, k.a, k.b);  // row g,   k0+8, k0+9
    a[3] = hfma2((w8 & 0x00F000F0u) | 0x64006400u, k.c, k.d);  // row g+8, k0+8, k0+9
}

// v_sb of one output (see THE ORDER). m03/m47: the row's 8 mins (bytes); xs: the column's 8
// sub-block sums; e = 2^E_sb of the column. S * e is exact (a power of two).
__device__ __forceinline__ float sb_value(float S, float d, float dmin, u32 m03, u32 m47,
                                          const float (&xs)[8], float e) {
    float ms = 0.0f;
#pragma unroll
    for (int s = 0; s < 8; ++s) ms = fmaf((float)byte_at(m03, m47, s), xs[s], ms);
    return fmaf(d, __fmul_rn(S, e), __fmul_rn(-dmin, ms));
}

// The four v of one C fragment: rows g, g+8 x columns 2t (xa, ea), 2t+1 (xb, eb).
__device__ __forceinline__ void frag_values(const float (&S)[4], uint2 dd, uint4 mn,
                                            const float (&xa)[8], const float (&xb)[8],
                                            float ea, float eb, float (&v)[4]) {
    const float dg = h2f(dd.x), mg = h2f(dd.x >> 16), d8 = h2f(dd.y), m8 = h2f(dd.y >> 16);
    v[0] = sb_value(S[0], dg, mg, mn.x, mn.y, xa, ea);
    v[1] = sb_value(S[1], dg, mg, mn.x, mn.y, xb, eb);
    v[2] = sb_value(S[2], d8, m8, mn.z, mn.w, xa, ea);
    v[3] = sb_value(S[3], d8, m8, mn.z, mn.w, xb, eb);
}

__device__ __forceinline__ void load_xs(const float* XS, const float* XE, int col, int ncols,
                                        int n_sb, int sb, float (&xs)[8], float& e) {
    if (col < ncols) {
        const float4* p = (const float4*)(XS + ((size_t)col * n_sb + sb) * 8);
        const float4 a = __ldg(p), b = __ldg(p + 1);
        xs[0] = a.x; xs[1] = a.y; xs[2] = a.z; xs[3] = a.w;
        xs[4] = b.x; xs[5] = b.y; xs[6] = b.z; xs[7] = b.w;
        e = __ldg(XE + (size_t)col * n_sb + sb);
    } else {
#pragma unroll
        for (int s = 0; s < 8; ++s) xs[s] = 0.0f;
        e = 0.0f;
    }
}

// ---- activations: x [ncols][n_in] f32 -> XF, XE, XS. grid (n_sb, ncols), block 32.
// Each column alone decides its own bytes (batch invariance of the prep is by construction).
extern "C" __global__ void __launch_bounds__(32) q4k_prep(const float* __restrict__ X,
                                                          u32* __restrict__ XF,
                                                          float* __restrict__ XE,
                                                          float* __restrict__ XS, int n_in) {
    const int sb = blockIdx.x, col = blockIdx.y, L = threadIdx.x, n_sb = gridDim.x;
    const float4* xp = (const float4*)(X + (size_t)col * n_in + sb * 256 + L * 8);
    const float4 p0 = xp[0], p1 = xp[1];
    const float x[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(x[i]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    // E: max |x| * 2^-E in [2^14, 2^15) so hi keeps 11 bits of the block's largest values and
    // lo (2^-11 below) stays normal in f16 for all but negligible elements. Clamped so that
    // both 2^E and 2^-E are normal f32 (all-zero or subnormal blocks take E = -126).
    int E = ((__float_as_int(m) >> 23) & 255) - 141;
    if (E < -126) E = -126;
    const float inv = __int_as_float((127 - E) << 23), e = __int_as_float((127 + E) << 23);
    u32 hw[4], lw[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 hh[2], ll[2];
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const float xs = __fmul_rn(x[2 * j + p], inv);  // exact: a power of two
            const unsigned short h = f2h(xs);
            hh[p] = h;
            ll[p] = f2h(__fsub_rn(xs, h2f(h)));  // xs - hi is exact in f32
        }
        hw[j] = hh[0] | (hh[1] << 16);
        lw[j] = ll[0] | (ll[1] << 16);
    }
    // Lane L holds inputs 8L..8L+7: k-step L/2, half L%2, pairs t = 0..3.
    u32* out = XF + ((size_t)col * n_sb + sb) * 256 + (L >> 1) * 16 + (L & 1);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        out[j * 4] = hw[j];
        out[j * 4 + 2] = lw[j];
    }
    // Sub-block sums: each lane's 8 in order, then ((l0 + l1) + (l2 + l3)) over its 4 lanes.
    float s = x[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) s = __fadd_rn(s, x[i]);
    const float q = __fadd_rn(s, __shfl_down_sync(0xFFFFFFFFu, s, 1));
    const float r = __fadd_rn(q, __shfl_down_sync(0xFFFFFFFFu, q, 2));
    if ((L & 3) == 0) XS[((size_t)col * n_sb + sb) * 8 + (L >> 2)] = r;
    if (L == 0) XE[(size_t)col * n_sb + sb] = e;
}

// ---- decode: nb <= 8 columns (one n-tile), MT m-tiles per block, KP warps each taking one
// super-block per round; the v of a round go through shared memory and are added in sb order.
// grid: ceil(rows / 16 / MT), block KP * 32. Y [nb][rows].
extern "C" __global__ void __launch_bounds__(KP * 32)
    q4k_decode(const u8* __restrict__ W, const uint4* __restrict__ XF,
               const float* __restrict__ XE, const float* __restrict__ XS, float* __restrict__ Y,
               int rows, int n_sb, int nb) {
    __shared__ __align__(16) float red[KP][MT * 128];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n_mt = rows >> 4, mt0 = blockIdx.x * MT;
    constexpr int NO = (MT * 128 + KP * 32 - 1) / (KP * 32);
    float acc[NO];
#pragma unroll
    for (int i = 0; i < NO; ++i) acc[i] = 0.0f;
    const int rounds = (n_sb + KP - 1) / KP;
    for (int r = 0; r < rounds; ++r) {
        const int sb = r * KP + warp;
        if (sb < n_sb) {
            uint4 nib[MT][4], sc[MT], mn[MT];
            uint2 dd[MT];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                const int mt = min(mt0 + mi, n_mt - 1);  // past the end: computed, not stored
                const u8* blk = W + ((size_t)mt * n_sb + sb) * BLK;
#pragma unroll
                for (int i = 0; i < 4; ++i) nib[mi][i] = ld_stream16(blk + i * 512 + lane * 16);
                sc[mi] = ld_stream16(blk + SC_OFF + g * 32);
                mn[mi] = ld_stream16(blk + SC_OFF + g * 32 + 16);
                dd[mi] = ld_stream8(blk + DD_OFF + g * 8);
            }
            float S[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi)
#pragma unroll
                for (int c = 0; c < 4; ++c) S[mi][c] = 0.0f;
            const uint4* xf = XF + ((size_t)g * n_sb + sb) * 64 + t;
#pragma unroll
            for (int ks = 0; ks < 16; ++ks) {
                // Columns past nb are zeros: they change nothing in the real columns (the claim).
                const uint4 xb = g < nb ? __ldg(xf + ks * 4) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    const Kc k = kconsts(byte_at(sc[mi].x, sc[mi].y, ks >> 1),
                                         byte_at(sc[mi].z, sc[mi].w, ks >> 1));
                    u32 a[4];
                    afrag(comp4(nib[mi][ks >> 2], ks & 3), k, a);
                    if (PLANT && nb > 1) {  // negative control: an order that depends on nb
                        mma16816(S[mi], a, xb.z, xb.w);
                        mma16816(S[mi], a, xb.x, xb.y);
                    } else {
                        mma16816(S[mi], a, xb.x, xb.y);
                        mma16816(S[mi], a, xb.z, xb.w);
                    }
                }
            }
            float xa[8], xc[8], ea, ec;
            load_xs(XS, XE, 2 * t, nb, n_sb, sb, xa, ea);
            load_xs(XS, XE, 2 * t + 1, nb, n_sb, sb, xc, ec);
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                float v[4];
                frag_values(S[mi], dd[mi], mn[mi], xa, xc, ea, ec, v);
                *(float4*)&red[warp][mi * 128 + lane * 4] = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < NO; ++i) {
            const int o = threadIdx.x + i * KP * 32;
            if (o < MT * 128) {
#pragma unroll
                for (int p = 0; p < KP; ++p)
                    if (r * KP + p < n_sb) acc[i] = __fadd_rn(acc[i], red[p][o]);  // sb order
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < NO; ++i) {
        const int o = threadIdx.x + i * KP * 32;
        if (o >= MT * 128) continue;
        const int mi = o >> 7, ln = (o >> 2) & 31, c = o & 3;
        const int row = (mt0 + mi) * 16 + (ln >> 2) + (c >= 2 ? 8 : 0);
        const int col = 2 * (ln & 3) + (c & 1);
        if (mt0 + mi < n_mt && col < nb) Y[(size_t)col * rows + row] = acc[i];
    }
}

// ---- GEMM (prefill): ncols columns (XF/XE/XS padded with zero columns to a multiple of 8),
// each warp GMT m-tiles x GNT n-tiles over all super-blocks in order, accumulating in
// registers. grid (ceil(n_mt / (GMT * GWM)), ceil(n_nt / (GNT * GWN))), block GWM * GWN * 32.
extern "C" __global__ void __launch_bounds__(GWM * GWN * 32)
    q4k_gemm(const u8* __restrict__ W, const uint4* __restrict__ XF,
             const float* __restrict__ XE, const float* __restrict__ XS, float* __restrict__ Y,
             int rows, int n_sb, int ncols) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp % GWM, wn = warp / GWM;
    const int n_mt = rows >> 4, n_nt = (ncols + 7) >> 3;
    const int mtb = (blockIdx.x * GWM + wm) * GMT, ntb = (blockIdx.y * GWN + wn) * GNT;
    if (mtb >= n_mt || ntb >= n_nt) return;  // no block-wide barrier in this kernel
    float acc[GMT][GNT][4];
#pragma unroll
    for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.0f;
    const u8* blk[GMT];
#pragma unroll
    for (int mi = 0; mi < GMT; ++mi) blk[mi] = W + (size_t)min(mtb + mi, n_mt - 1) * n_sb * BLK;
    const uint4* xf[GNT];
#pragma unroll
    for (int ni = 0; ni < GNT; ++ni)
        xf[ni] = XF + (size_t)(min(ntb + ni, n_nt - 1) * 8 + g) * n_sb * 64 + t;
    for (int sb = 0; sb < n_sb; ++sb) {
        uint4 sc[GMT], mn[GMT];
        uint2 dd[GMT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi) {
            const u8* b = blk[mi] + (size_t)sb * BLK;
            sc[mi] = __ldg((const uint4*)(b + SC_OFF + g * 32));
            mn[mi] = __ldg((const uint4*)(b + SC_OFF + g * 32 + 16));
            dd[mi] = __ldg((const uint2*)(b + DD_OFF + g * 8));
        }
        float S[GMT][GNT][4];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
                for (int c = 0; c < 4; ++c) S[mi][ni][c] = 0.0f;
#pragma unroll
        for (int k4 = 0; k4 < 4; ++k4) {
            uint4 nib[GMT];
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi)
                nib[mi] = __ldg((const uint4*)(blk[mi] + (size_t)sb * BLK + k4 * 512 + lane * 16));
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const int ks = k4 * 4 + kk;
                uint4 xb[GNT];
#pragma unroll
                for (int ni = 0; ni < GNT; ++ni) xb[ni] = __ldg(xf[ni] + (size_t)sb * 64 + ks * 4);
#pragma unroll
                for (int mi = 0; mi < GMT; ++mi) {
                    const Kc k = kconsts(byte_at(sc[mi].x, sc[mi].y, ks >> 1),
                                         byte_at(sc[mi].z, sc[mi].w, ks >> 1));
                    u32 a[4];
                    afrag(comp4(nib[mi], kk), k, a);
#pragma unroll
                    for (int ni = 0; ni < GNT; ++ni) {
                        mma16816(S[mi][ni], a, xb[ni].x, xb[ni].y);  // hi, then lo: THE ORDER
                        mma16816(S[mi][ni], a, xb[ni].z, xb[ni].w);
                    }
                }
            }
        }
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni) {
            const int c0 = (ntb + ni) * 8 + 2 * t;
            float xa[8], xc[8], ea, ec;
            load_xs(XS, XE, c0, ncols, n_sb, sb, xa, ea);
            load_xs(XS, XE, c0 + 1, ncols, n_sb, sb, xc, ec);
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi) {
                float v[4];
                frag_values(S[mi][ni], dd[mi], mn[mi], xa, xc, ea, ec, v);
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[mi][ni][c] = __fadd_rn(acc[mi][ni][c], v[c]);
            }
        }
    }
#pragma unroll
    for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int row = (mtb + mi) * 16 + g + (c >= 2 ? 8 : 0);
                const int col = (ntb + ni) * 8 + 2 * t + (c & 1);
                if (mtb + mi < n_mt && ntb + ni < n_nt && col < ncols)
                    Y[(size_t)col * rows + row] = acc[mi][ni][c];
            }
}
