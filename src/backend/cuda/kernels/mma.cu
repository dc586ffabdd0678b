// The tensor-core matvec / GEMM (`--mma on`) for Q4_K and Q6_K (integer mma.sync: u8 / s8
// weights, int8 pieces of the activations, exact s32 sums) and (below, "32-element
// formats") Q8_0, Q4_0, Q4_1, Q5_0 (mma.sync m16n8k16, f16 in, f32 accumulate), ported from the
// prototype research/mma-q4k/mma_q4k.cu (removed in f78de77, git history keeps it; measured
// there on an H200: every column's bits equal its bits run alone, decode B = 1..8 and GEMM
// C = 16/64/512 alike). Compiled only into the mma module (`#define MMA_Q4K`, with common.cu,
// ffn.cu and matvec.cu for MvArgs and mv_finish); the main module sees an empty file.
//
// THE ORDER of Q4_K (every output y[row, col] of every kernel here, whatever the batch, the
// column's place in a tile, the tile or launch shape; fixed by n_in alone). Everything up to
// one rounding per super-block is exact integer arithmetic, so no sum's order matters there,
// not even the tensor cores' own inside one mma:
//   per column and super-block sb (mma_prep): E_sb with max |x| * 2^-E_sb in [2^20, 2^21),
//     v_k = rn_int(x_k * 2^-E_sb) (|v| <= 2^21; round to nearest even), split exactly into
//     balanced base-256 digits v = 2^8 u + l, u = 2^8 h + m (l, m in [-128, 127], h in
//     [-32, 32], each an s8; |u| <= 2^13);
//   for each super-block sb independently, with integer mma (u8 q times the s8 digits:
//   D_h, D_m, D_l over a sub-block s's 32 k; three mma, or for a one-row launch one, its B
//   columns the three digits):
//     D_s = 2^16 D_h + 2^8 D_m + D_l = sum q_k v_k     (s = 0..8)
//     S_sb = sum over s of sc_s * D_s                  (exact: |S| < 2^40; the kernels sum it
//                                                      as two int32 halves, mma_q4k_dot)
//     msum_sb = 0; for s in 0..8: msum_sb = fmaf(m_s, xsum_s, msum_sb)   (xsum: mma_prep's order)
//     v_sb = fmaf(d, rn_f32(S_sb) * 2^E_sb, (-dmin) * msum_sb)      (the one rounding of S)
//   y = 0; for sb in 0..n_sb: y = y + v_sb;   then mv_finish (kernels/matvec.cu) as every
//   other matvec: store, += residual, or act(gate) * up.
// Why integers (BENCH.md issue 30 step 29, the probe): the weights' nibbles are already u8
// integers, so the A fragment is a mask a register where the f16 route rebuilt sc * q per
// k-step with f16x2 FMAs, and 3 integer mma a sub-block replace 4 f16 ones; three int8 pieces
// keep 22 bits (sign included) of each activation against its super-block's largest (two
// pieces, 16 bits, measured 2.1e-4 rms on the CPU, too close to the oracle's 1e-3), 21 of
// them magnitude so that the halves of S fit an int32. Blocks whose largest |x| is below
// 2^-106 (E clamped) keep fewer bits: a function of x alone all the same. A non-finite input
// becomes an integer here (cvt saturates or gives 0, then clamped to |v| <= 2^21, so every
// integer sum keeps its bound), but its super-block's 2^E_sb is NaN (mma_prep_sb), and its
// sub-block sum xsum non-finite too: v_sb and y are NaN, as the input's row must be
// non-finite (kernel-emu checks it).
// v_sb depends on sb alone, so the decode kernel computes super-blocks in parallel warps and
// adds them afterwards in sb order, and the GEMM walks them in order in registers: the same
// bits. The input x of a column is normalized (a norm launch) by mma_prep with stage_rows'
// expressions (kernels/norm.cu), per column: a row's prepared bytes never depend on the other
// rows of its launch. The fused decode kernels (mma_decode_f8/f16) prepare their rows
// themselves, in shared memory, with the same function (mma_prep_sb) and norm order: the same
// bytes, so the same bits.
//
// Weights (crate::quant::repack::repack_mma_q4k): per (m-tile of 16 rows, super-block) one
// 2368-byte block:
//   [0, 2048)    nibbles: u32 word (s / 2) * 128 + lane * 4 + 2 (s % 2) + j (lane = 4g + t,
//                sub-block s, j = 0, 1) is lane (g, t)'s A fragment half j of sub-block s:
//                byte i = q[row g][32 s + 16 j + 4t + i] | q[row g+8][same k] << 4, so
//                w & 0x0F0F0F0F is mma register 2j (row g) and (w >> 4) & 0x0F0F0F0F register
//                2j + 1 (row g+8) of m16n8k32's u8 A (PTX: a0 row g, k 4t..4t+3; a1 row g+8;
//                a2 row g, k 16+4t..; a3 row g+8)
//   [2048, 2304) per g: sc[g][0..8], sc[g+8][0..8], m[g][0..8], m[g+8][0..8]   (bytes, 6-bit)
//   [2304, 2368) per g: d[g], dmin[g], d[g+8], dmin[g+8]                       (f16 bits)
// A launch's m-tiles are its matrices' tiles back to back (modes 0, 1), or in mode 2 gate
// tile p at 2p and up tile p at 2p + 1, so one block (decode) or one lane (GEMM) holds a
// feature's gate and up values together for act(gate) * up.
//
// THE ORDER of the 32-element formats (F = MF_Q8_0, MF_Q4_0, MF_Q4_1, MF_Q5_0; n_in a multiple
// of 32, the super-blocks of 256 as above, the last one possibly partial; fixed by n_in alone):
//   for each super-block sb independently:
//     u_sb = 0; for each 32-block b of sb (b < n_in / 32, in order):
//       S_b = 0; for ks in 2b', 2b'+1 (b' = b - 8 sb): S_b = mma(A_ks, Xhi_ks, S_b);
//                                                      S_b = mma(A_ks, Xlo_ks, S_b)
//         A: the row's q (Q8_0 -128..127, Q4_0 q-8, Q4_1 0..15, Q5_0 q-16), exact in f16;
//         X: mma_prep's fragments, unchanged (2^E per column and super-block).
//       v_b = d_b * (S_b * 2^E_sb)                            (Q8_0, Q4_0, Q5_0)
//       v_b = fmaf(d_b, S_b * 2^E_sb, m_b * xsum_b)           (Q4_1; xsum_b = XS[b'])
//       u_sb = u_sb + v_b
//   y = 0; for sb in 0..n_sb: y = y + u_sb;   then mv_finish.
// Why a chain per 32-block: d_b (f16, per row and block) scales it; A's row is the output
// feature, so d is applied per row to the f32 C fragment (lane g holds rows g and g+8) and
// the A fragment stays an exact integer. Why two levels (u_sb, then y) and not one running
// sum over all blocks: the decode kernel keeps its super-block-parallel warps (a warp's
// u_sb through shared memory, added in sb order, as Q4_K's v_sb) while the GEMM sums u_sb in
// registers: the same bits, neither depends on the row count. The f32 cost is one mul (Q4_1:
// an fmaf and a mul), one add per block per output.
// Weights (crate::quant::repack::repack_mma_b32), per (m-tile, super-block) one MmaF<F>::BLK
// block, the bytes of its 16 x 8 GGUF blocks: quants (Q8_0: 4096 B, byte (ks/2)*512 +
// lane*16 + (ks%2)*8 + 2r + p = u of A register r, element p; the others: the f16 nibble
// words, 2048 B: u32 word (ks / 4) * 128 + lane * 4 + ks % 4 is lane (g, t)'s k-step ks,
// nibble h + 2 * half + 4 * pos holding u[row g + 8h][ks * 16 + 8 * half + 2t + pos], so
// m32_afrag's masks put nibbles 0/4, 1/5, 2/6, 3/7 in registers 0..3; Q5_0 then 512 B of
// fifth bits, lane's 16 bytes, byte ks, bit = nibble index), then per g 16-byte words of f16
// d[g][0..8], d[g+8][0..8] (Q4_1 also m[g][..], m[g+8][..]).
// Stored quants are u = q + BIAS (unsigned); m32_afrag subtracts BIAS exactly.
//
// THE ORDER of Q6_K (F = MF_Q6_K; n_in a multiple of 256; fixed by n_in alone): Q4_K's, with
// signed 6-bit weights, sub-blocks of 16 and no mins. Exact integers up to one rounding per
// super-block:
//   per column and super-block sb: mma_prep's integer pieces, Q4_K's (E_sb, v_k, h, m, l);
//   for each super-block sb independently, with integer mma (s8 q - 32 times the s8 digits):
//     D_j = 2^16 D_h + 2^8 D_m + D_l = sum (q_k - 32) v_k   (j = 0..16, its 16 k; exact in
//                                                          int32: |D_j| <= 2^30)
//     S_sb = sum over j of sc_j * D_j                 (sc_j the row's int8 sub-block scale;
//                                                     exact: |S| <= 2^41)
//     v_sb = d * (rn_f32(S_sb) * 2^E_sb)              (d the row's f16 scale; the one
//                                                     rounding of S, then two of f32)
//   y = 0; for sb in 0..n_sb: y = y + v_sb;   then mv_finish.
// How the kernels sum S (every way the same integer): the multi-row decode and the GEMM run
// three m16n8k16 a sub-block (one per piece; k = 16 is one sub-block, whose scale differs
// from its neighbour's) and add sc_j * D_j in int64 (mma_q6k_dot); the one-row decode runs
// ONE m16n8k32 a 32-k chunk, its B columns the two sub-blocks' pieces, and joins int32 lane
// sums (mma_q6k_row_dot, mma_q6k_row_round). A non-finite input: 2^E_sb is NaN (mma_prep_sb),
// so every v_sb of its super-block, and y, are NaN.
// Why integers (replacing the f16 route's per-k-step chains, `(d * sc) * (S * 2^E)` each,
// 2 mma a 16-k step with a 4-HFMA2 A build): the A build is masks and one add and xor a
// register (mma_q6k_afrag), the sums exact, and the one-row decode one mma a 32-k chunk;
// the one-row launch is the FFMA kernels' (mvq) busiest Q6_K case (a Q4_K_M file's
// ffn_down, v and vocabulary head).
// Weights (crate::quant::repack::repack_mma_q6k), 3360 bytes per (m-tile, super-block),
// GGUF's 16 x 210:
//   [0, 2048)    the low nibbles, Q4_K's words: u32 (s / 2) * 128 + lane * 4 + 2 (s % 2) +
//                j (chunk s, half j) byte i = q[row g][32 s + 16 j + 4t + i] & 15 |
//                (q[row g+8][same k] & 15) << 4;
//   [2048, 3072) the high pairs: uint4 s / 4 of lane at 2048 + 512 (s / 4) + 16 lane, its
//                u32 s % 4 (hw of chunk s) byte i holding at bits 2 (h + 2j) + {0, 1} the
//                pair of row g + 8h, half j's element (mma_q6k_afrag);
//   [3072, 3328) per g: the int8 scales of row g, then row g+8, each its even sub-blocks
//                (0, 2, .., 14) then its odd ones (mma_q6k_sc; a one-row lane takes the half
//                of its sub-blocks, t < 2 even, t >= 2 odd);
//   [3328, 3360) per g: d[g], d[g+8] (f16 bits).
// Prepared activations (mma_prep), per column and super-block, 256 u32 of XF in one of two
// forms (the launch's format picks: mma_prep's `ints`):
//   the 32-element formats: uint4 (ks * 4 + t) = {hi(k0, k0+1), hi(k0+8, k0+9),
//       lo(k0, k0+1), lo(k0+8, k0+9)} with k0 = ks * 16 + 2t: the f16 B fragment (col = g)
//       of lane (g, t), hi and lo;
//   Q4_K, Q6_K: words (s * 4 + t) * 8 + 2p + j (chunk s, piece p = h, m, l, j = 0, 1) hold
//       piece p of v[32 s + 16 j + 4t + i] in byte i: the int8 B fragment (b0 = k 4t..4t+3,
//       b1 = k 16 + 4t.., col g) of lane (g, t) for piece p; words 6, 7 of each 8 are unused
//       (never written, never read).
//   XE: 2^E (f32; the integer form: NaN for a super-block holding a non-finite input);
//   XS: the 8 sub-block sums of x (f32, fixed order; Q6_K reads none).

#if defined(MMA_Q4K)

#define MMA_BLK 2368
#define MMA_SC_OFF 2048
#define MMA_DD_OFF 2304
// Q6_K's block (the head's layout): nibbles as Q4_K's, then the high pairs, the int8 scales
// (per g: rows g, g+8, each even sub-blocks then odd) and the f16 d (per g: d[g], d[g+8]).
#define MMA6_BLK 3360
#define MMA6_HI_OFF 2048
#define MMA6_SC_OFF 3072
#define MMA6_DD_OFF 3328

// Weights are read once per launch: no L1 allocation (keeps x in L1). Read-only for the
// engine's life (uploaded at build), so the non-coherent path is valid.
// PPN_EMU: the kernel emulator (tests/kernel-emu/emu.h), which runs this file on the CPU;
// each PTX helper has its emulated form there (plain loads, GCC's _Float16, a modelled mma).
__device__ __forceinline__ uint4 mma_ld16(const u8* p) {
#if defined(PPN_EMU)
    return *(const uint4*)p;
#else
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
#endif
}
__device__ __forceinline__ uint2 mma_ld8(const u8* p) {
#if defined(PPN_EMU)
    return *(const uint2*)p;
#else
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
#endif
}

__device__ __forceinline__ u32 mma_comp4(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// Byte s (0..8) of hi:lo, one PRMT (s is a constant after unrolling).
__device__ __forceinline__ u32 mma_byte_at(u32 lo, u32 hi, int s) {
    return __byte_perm(s < 4 ? lo : hi, 0u, 0x4440u + (u32)(s & 3));
}

// f32 -> f16 pair {f, f} (round to nearest; every value used here is exact in f16).
__device__ __forceinline__ u32 mma_h2dup(float f) {
#if defined(PPN_EMU)
    const u32 h = emu_f2h(f);
    return h | (h << 16);
#else
    u32 r;
    asm("{.reg .b16 h; cvt.rn.f16.f32 h, %1; mov.b32 %0, {h, h};}" : "=r"(r) : "f"(f));
    return r;
#endif
}
__device__ __forceinline__ float mma_h2f(u32 bits16) {
    unsigned short s = (unsigned short)(bits16 & 0xFFFFu);
#if defined(PPN_EMU)
    return emu_h2f(s);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
#endif
}
__device__ __forceinline__ unsigned short mma_f2h(float f) {
#if defined(PPN_EMU)
    return emu_f2h(f);
#else
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}
__device__ __forceinline__ u32 mma_hfma2(u32 a, u32 b, u32 c) {
#if defined(PPN_EMU)
    return emu_hfma2(a, b, c);
#else
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#endif
}

// D = A * B + D, f16 inputs, f32 accumulate; each D element is its own row-by-column dot.
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if defined(PPN_EMU)
    emu_mma16816(d, a, b0, b1);
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// D = A * B + D, u8 A (row-major 16 x 32; SA: s8, Q6_K's q - 32), s8 B (col-major 32 x 8),
// s32 accumulate: every product and sum an exact integer (the kernels keep each D below
// 2^31), so the tensor cores' summation order inside the mma cannot show. Fragments (PTX,
// lane = 4g + t): a0 = A[g][4t..4t+3], a1 = A[g+8][4t..], a2 = A[g][16+4t..], a3 =
// A[g+8][16+4t..] (byte i the element k + i); b0 = B[4t..4t+3][g], b1 = B[16+4t..][g]; d0, d1 =
// D[g][2t], D[g][2t+1], d2, d3 = D[g+8][2t], D[g+8][2t+1] (m16n8k16's C layout).
#define MMA_IMMA_K32(AB)                                                                   \
    asm("mma.sync.aligned.m16n8k32.row.col.s32." AB ".s32 {%0, %1, %2, %3}, "           \
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                                  \
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                 \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <bool SA = false>
__device__ __forceinline__ void imma16832(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if defined(PPN_EMU)
    emu_imma16832(d, a, b0, b1, SA);
#else
    if constexpr (SA) MMA_IMMA_K32("s8.s8");
    else MMA_IMMA_K32("u8.s8");
#endif
}
#undef MMA_IMMA_K32

// D = A * B + D, s8 A (16 x 16) and B (16 x 8), s32 accumulate (m16n8k16): a0 = A[g][4t..4t+3],
// a1 = A[g+8][4t..], b0 = B[4t..4t+3][g] (byte i the element k + i); D as imma16832's. The
// first half of imma16832<true>'s k: one 16-element sub-block of Q6_K's.
__device__ __forceinline__ void imma16816s(int (&d)[4], u32 a0, u32 a1, u32 b0) {
#if defined(PPN_EMU)
    const u32 a[4] = {a0, a1, 0u, 0u};
    emu_imma16832(d, a, b0, 0u, true);
#else
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0));
#endif
}

// The Q4_K A fragment of sub-block s from the lane's nibble uint4 of its sub-block pair
// (s / 2): words 2 (s % 2) and 2 (s % 2) + 1 (the head's layout), each a LOP3 for row g's
// nibbles and a shift and a LOP3 for row g+8's. The quants as u8 integers: nothing rounds.
__device__ __forceinline__ void mma_q4k_afrag(const uint4& nib, int s, u32 (&a)[4]) {
    const u32 w0 = mma_comp4(nib, 2 * (s & 1)), w1 = mma_comp4(nib, 2 * (s & 1) + 1);
    a[0] = w0 & 0x0F0F0F0Fu;         // row g,   k 4t..4t+3
    a[1] = (w0 >> 4) & 0x0F0F0F0Fu;  // row g+8, k 4t..4t+3
    a[2] = w1 & 0x0F0F0F0Fu;         // row g,   k 16+4t..
    a[3] = (w1 >> 4) & 0x0F0F0F0Fu;  // row g+8, k 16+4t..
}

// Lane (g, t)'s integer B fragments of its column (g) for chunk s: {h0, h1, m0, m1} and
// {l0, l1} (xf: the column's super-block words + 2t uint4s, the head's layout); zeros when
// `live` is false (a column past the launch's).
__device__ __forceinline__ void mma_int_bfrag(const uint4* xf, int s, bool live, uint4& hb, uint2& lb) {
    hb = live ? xf[s * 8] : make_uint4(0u, 0u, 0u, 0u);
    lb = live ? *(const uint2*)(xf + s * 8 + 1) : make_uint2(0u, 0u);
}

// The four outputs' S_sb of THE ORDER, kept as two int32 halves: S_sb = 2^8 S_hm + S_l with
// S_hm = sum over s of sc_s (2^8 D_h + D_m) and S_l = sum over s of sc_s D_l. Each half is
// exact in int32 (mma_prep's clamped digits, finite input or not: |2^8 D_h + D_m| = |sum q u|
// <= 32 * 15 * 2^13, times 63, 8 times: < 1.99e9 < 2^31; |D_l| <= 32 * 15 * 128, |S_l| <
// 2^25), so their combination is S_sb exactly, in whatever order the sub-blocks, pieces and
// lanes add: the same S as sum sc_s (2^16 D_h + 2^8 D_m + D_l) in int64 (the head's form),
// with 32-bit multiply-adds and no sign extension.
struct MmaQ4kS {
    int hm[4], l[4];
};
__device__ __forceinline__ void mma_q4k_zero(MmaQ4kS& S) {
#pragma unroll
    for (int c = 0; c < 4; ++c) S.hm[c] = S.l[c] = 0;
}

// Sub-block s of the four outputs (columns 2t, 2t+1 of rows g, g+8): the three pieces'
// integer mma (hb: {h0, h1, m0, m1} of the column's B fragments, lb: {l0, l1}), then S_hm +=
// sc_s (2^8 D_h + D_m), S_l += sc_s D_l (rows g: c = 0, 1 with scg; rows g+8: c = 2, 3 with
// sc8; sc: the m-tile's scale uint4).
__device__ __forceinline__ void mma_q4k_dot(const u32 (&a)[4], const uint4& hb, const uint2& lb,
                                            const uint4& sc, int s, MmaQ4kS& S) {
    int dh[4] = {0, 0, 0, 0}, dm[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
    imma16832(dh, a, hb.x, hb.y);
    imma16832(dm, a, hb.z, hb.w);
    imma16832(dl, a, lb.x, lb.y);
    const int scg = (int)mma_byte_at(sc.x, sc.y, s), sc8 = (int)mma_byte_at(sc.z, sc.w, s);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int k = c < 2 ? scg : sc8;
        S.hm[c] += k * (dh[c] * 256 + dm[c]);
        S.l[c] += k * dl[c];
    }
}

// rn_f32(S_sb) from its halves: S_sb = 2^8 S_hm + S_l exact in int64, then cvt.rn.f32.s64,
// THE ORDER's one rounding.
__device__ __forceinline__ float mma_q4k_f32(int hm, int l) { return (float)((long long)hm * 256 + l); }

// rn_f32(S_sb) of the four outputs.
__device__ __forceinline__ void mma_q4k_round(const MmaQ4kS& S, float (&f)[4]) {
#pragma unroll
    for (int c = 0; c < 4; ++c) f[c] = mma_q4k_f32(S.hm[c], S.l[c]);
}

// The one-row decode's sub-block s (nb = 1): ONE integer mma whose B columns are the single
// column's three pieces, h in column 0, m in 1, l in 3 (2 and 4..7 zero), instead of three
// mma with 7 of 8 columns zero. Lane (g, t)'s C fragment then holds D[g][2t], D[g][2t+1] and
// rows g+8's: lane t = 0 D_h and D_m, lane t = 1 zero and D_l, lanes t = 2, 3 zeros, so the
// one expression sc_s (2^8 c0 + c1) is S_hm's term in lane 0 and S_l's in lane 1 (hm[0] row
// g, hm[2] row g+8; a lane's other slots stay zero). mma_q4k_row_round joins the halves.
// b: the lane's piece (its g's) of the column's B fragments, zeros for the unused columns.
__device__ __forceinline__ void mma_q4k_row_dot(const u32 (&a)[4], const uint2& b, const uint4& sc,
                                                int s, MmaQ4kS& S) {
    int d[4] = {0, 0, 0, 0};
    imma16832(d, a, b.x, b.y);
    S.hm[0] += (int)mma_byte_at(sc.x, sc.y, s) * (d[0] * 256 + d[1]);
    S.hm[2] += (int)mma_byte_at(sc.z, sc.w, s) * (d[2] * 256 + d[3]);
}

// rn_f32(S_sb) of the one row's outputs in lane t = 0 (f[0] row g, f[2] row g+8: column 0),
// S_l from lane t = 1 by a shuffle (every lane takes part; the other slots are unused).
__device__ __forceinline__ void mma_q4k_row_round(const MmaQ4kS& S, float (&f)[4]) {
    const int lg = __shfl_down_sync(0xffffffffu, S.hm[0], 1);
    const int l8 = __shfl_down_sync(0xffffffffu, S.hm[2], 1);
    f[0] = mma_q4k_f32(S.hm[0], lg);
    f[2] = mma_q4k_f32(S.hm[2], l8);
    f[1] = f[3] = 0.0f;
}

// v_sb of one output (THE ORDER). S: rn_f32(S_sb); m03/m47: the row's 8 mins (bytes); xs:
// the column's 8 sub-block sums; e = 2^E_sb of the column. S * e is exact (a power of two).
__device__ __forceinline__ float mma_sb_value(float S, float d, float dmin, u32 m03, u32 m47,
                                              const float (&xs)[8], float e) {
    float ms = 0.0f;
#pragma unroll
    for (int s = 0; s < 8; ++s) ms = fmaf((float)mma_byte_at(m03, m47, s), xs[s], ms);
    return fmaf(d, __fmul_rn(S, e), __fmul_rn(-dmin, ms));
}

// The v of rows g (Sg, into vg) and g+8 (S8, into v8) in one column (xs, e), from their
// rn_f32(S_sb); dd, mn: the rows' d, dmin and mins.
__device__ __forceinline__ void mma_col_values(float Sg, float S8, uint2 dd, uint4 mn,
                                               const float (&xs)[8], float e, float& vg, float& v8) {
    vg = mma_sb_value(Sg, mma_h2f(dd.x), mma_h2f(dd.x >> 16), mn.x, mn.y, xs, e);
    v8 = mma_sb_value(S8, mma_h2f(dd.y), mma_h2f(dd.y >> 16), mn.z, mn.w, xs, e);
}

// The four v of one C fragment: rows g, g+8 x columns 2t (xa, ea), 2t+1 (xb, eb), from the
// fragment's rn_f32(S_sb).
__device__ __forceinline__ void mma_frag_values(const float (&S)[4], uint2 dd, uint4 mn,
                                                const float (&xa)[8], const float (&xb)[8],
                                                float ea, float eb, float (&v)[4]) {
    mma_col_values(S[0], S[2], dd, mn, xa, ea, v[0], v[2]);
    mma_col_values(S[1], S[3], dd, mn, xb, eb, v[1], v[3]);
}

// ---- Q6_K on the integer tensor cores (THE ORDER of Q6_K, the head; F = MF_Q6_K).
// The s8 A fragment of 32-k chunk s (sub-blocks 2s: registers 0, 1; 2s + 1: registers 2, 3)
// from the lane's nibble uint4 of chunk pair s / 2 (Q4_K's words) and its high-pair word hw
// of chunk s (byte i: bits 0-1 the high pair of row g's element 4t + i, 2-3 row g+8's, 4-5
// row g's element 16 + 4t + i, 6-7 row g+8's). Each byte becomes q - 32 (q = nibble | pair
// << 4, 0..63): adding 0x60 (q + 96 <= 159: no carry into the next byte) then flipping bit
// 7 maps 0..31 to 224..255 (-32..-1) and 32..63 to 0..31. Nothing rounds.
__device__ __forceinline__ void mma_q6k_afrag(const uint4& nib, u32 hw, int s, u32 (&a)[4]) {
    const u32 w0 = mma_comp4(nib, 2 * (s & 1)), w1 = mma_comp4(nib, 2 * (s & 1) + 1);
    const u32 M = 0x0F0F0F0Fu, H = 0x30303030u, B = 0x60606060u, X = 0x80808080u;
    a[0] = (((w0 & M) | ((hw << 4) & H)) + B) ^ X;         // row g,   k 4t..4t+3
    a[1] = ((((w0 >> 4) & M) | ((hw << 2) & H)) + B) ^ X;  // row g+8, k 4t..
    a[2] = (((w1 & M) | (hw & H)) + B) ^ X;                // row g,   k 16+4t..
    a[3] = ((((w1 >> 4) & M) | ((hw >> 2) & H)) + B) ^ X;  // row g+8, k 16+4t..
}

// Sub-block j's int8 scale from a row's scale uint4 (even sub-blocks in bytes 0..7, odd in
// 8..15: the head's layout).
__device__ __forceinline__ int mma_q6k_sc(const uint4& sc, int j) {
    return (int)(signed char)(u8)(mma_comp4(sc, 2 * (j & 1) + (j >> 3)) >> (8 * ((j >> 1) & 3)));
}

// Chunk s of the four outputs of a C fragment (columns 2t, 2t+1 x rows g, g+8), S_sb kept
// in int64: for each of its sub-blocks j = 2s + jj, three m16n8k16 (the pieces h, m, l of
// the columns' B halves jj: hb = {h0, h1, m0, m1}, lb = {l0, l1}), then S += sc_j (2^16 D_h
// + 2^8 D_m + D_l). Exact: 2^16 D_h + 2^8 D_m + D_l = sum (q - 32) v over 16 k, |.| <= 16 *
// 32 * 2^21 = 2^30 in int32 (each partial sum too), times |sc_j| <= 128, 16 times: |S_sb| <=
// 2^41 in int64.
__device__ __forceinline__ void mma_q6k_dot(const u32 (&a)[4], const uint4& hb, const uint2& lb,
                                            const uint4& scg, const uint4& sc8, int s,
                                            long long (&S)[4]) {
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
        int dh[4] = {0, 0, 0, 0}, dm[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
        imma16816s(dh, a[2 * jj], a[2 * jj + 1], jj ? hb.y : hb.x);
        imma16816s(dm, a[2 * jj], a[2 * jj + 1], jj ? hb.w : hb.z);
        imma16816s(dl, a[2 * jj], a[2 * jj + 1], jj ? lb.y : lb.x);
        const int kg = mma_q6k_sc(scg, 2 * s + jj), k8 = mma_q6k_sc(sc8, 2 * s + jj);
#pragma unroll
        for (int c = 0; c < 4; ++c)
            S[c] += (long long)(c < 2 ? kg : k8) * (dh[c] * 65536 + dm[c] * 256 + dl[c]);
    }
}

// The one-row decode's chunk s (nb = 1): ONE m16n8k32 whose B columns are the one column's
// pieces, sub-block 2s's h, m, l in columns 0, 1, 3 (b0 only), 2s + 1's in 4, 5, 7 (b1 only;
// 2 and 6 zero). Lane (g, t)'s C fragment then holds columns 2t, 2t + 1 of rows g, g+8:
// t = 0 D_h, D_m of sub-block 2s; t = 1 zero, D_l; t = 2, 3 the same of 2s + 1, whose scale
// the lane takes (sg, s8: the lane's 8 scales of rows g, g+8, sub-blocks 2s + (t >> 1)). So
// X += sc c0, Y += sc c1 sum the lane's share: |X| <= 8 * 128 * 16 * 32 * 32 = 2^24, |Y| <=
// 2^26 (|D_m|, |D_l| <= 16 * 32 * 128): exact in int32. mma_q6k_row_round joins the lanes.
__device__ __forceinline__ void mma_q6k_row_dot(const u32 (&a)[4], const uint2& b, const uint2& sg,
                                                const uint2& s8, int s, int (&X)[2], int (&Y)[2]) {
    int d[4] = {0, 0, 0, 0};
    imma16832<true>(d, a, b.x, b.y);
    const u32 wg = s < 4 ? sg.x : sg.y, w8 = s < 4 ? s8.x : s8.y;
    const int kg = (int)(signed char)(u8)(wg >> (8 * (s & 3))), k8 = (int)(signed char)(u8)(w8 >> (8 * (s & 3)));
    X[0] += kg * d[0];
    Y[0] += kg * d[1];
    X[1] += k8 * d[2];
    Y[1] += k8 * d[3];
}

// rn_f32(S_sb) of rows g (f[0]) and g+8 (f[1]) of the one column, in lane t = 0: S_sb = 2^16
// (X_0 + X_2) + 2^8 (Y_0 + Y_2) + (Y_1 + Y_3) (lane t's X_t, Y_t), exact in int64, then
// THE ORDER's one rounding (every lane takes part in the shuffles; only t = 0's is used).
__device__ __forceinline__ void mma_q6k_row_round(const int (&X)[2], const int (&Y)[2], float (&f)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int x = X[r] + __shfl_down_sync(0xffffffffu, X[r], 2);
        const int y = Y[r] + __shfl_down_sync(0xffffffffu, Y[r], 2);
        const int l = __shfl_down_sync(0xffffffffu, y, 1);
        f[r] = (float)((long long)x * 65536 + (long long)y * 256 + l);
    }
}

// v_sb of one Q6_K output: d * (rn_f32(S_sb) * 2^E) (S * e exact: a power of two; e NaN for a
// super-block holding a non-finite input, mma_prep_sb).
__device__ __forceinline__ float mma_q6k_value(float S, float d, float e) {
    return __fmul_rn(d, __fmul_rn(S, e));
}

__device__ __forceinline__ void mma_load_xs(const float* XS, const float* XE, int col, int ncols,
                                            int n_sb, int sb, float (&xs)[8], float& e) {
    if (col < ncols) {
        const float4* p = (const float4*)(XS + ((size_t)col * n_sb + sb) * 8);
        const float4 a = p[0], b = p[1];
        xs[0] = a.x; xs[1] = a.y; xs[2] = a.z; xs[3] = a.w;
        xs[4] = b.x; xs[5] = b.y; xs[6] = b.z; xs[7] = b.w;
        e = XE[(size_t)col * n_sb + sb];
    } else {
#pragma unroll
        for (int s = 0; s < 8; ++s) xs[s] = 0.0f;
        e = 0.0f;
    }
}

// The weight blocks of m-tile `mt` of the launch (see the head), its matrix and first row.
__device__ __forceinline__ const u8* mma_tile(const MvArgs& a, int mt, int n_sb, int blk, int* mi,
                                              int* o0) {
    int m, t;
    if (a.mode == 2) {
        m = mt & 1;
        t = mt >> 1;
    } else {
        const int t0 = a.m[0].n_out >> 4, t1 = a.n_mat > 1 ? a.m[1].n_out >> 4 : 0;
        m = mt < t0 ? 0 : mt < t0 + t1 ? 1 : 2;
        t = mt - (m == 0 ? 0 : m == 1 ? t0 : t0 + t1);
    }
    *mi = m;
    *o0 = t * 16;
    return MV_FIELD(a, m, w) + (size_t)t * n_sb * blk;
}

// ---- formats. F: the matrix format of a kernel (mod.rs MMA_FORMATS, MMA_KERNELS order).
#define MF_Q4K 0
#define MF_Q8_0 1
#define MF_Q4_0 2
#define MF_Q4_1 3
#define MF_Q5_0 4
#define MF_Q6_K 5
// BLK: bytes per (m-tile, super-block); INTS: the integer route (Q4_K, Q6_K: mma_prep's
// integer pieces, the u8 / s8 integer mma, one rounding a super-block); for the 32-element
// formats (repack::repack_mma_b32): NQ: 16-byte quant words per lane per 4 k-steps (k4
// group); DOFF: the scale area (per g: ND uint4s: d[g][0..8], d[g+8][0..8] and, with MIN,
// m[g][0..8], m[g+8][0..8], f16); HB: a Q5_0 high-bit plane at HBOFF (lane's uint4, byte ks,
// bit i = bit 4 of nibble i's quant); BIAS: stored u = q + BIAS (unsigned), so q = u - BIAS
// exactly.
template <int F>
struct MmaF;
template <>
struct MmaF<MF_Q4K> {
    enum { BLK = MMA_BLK, INTS = 1 };
};
template <>
struct MmaF<MF_Q8_0> {
    enum { BLK = 4352, INTS = 0, DOFF = 4096, NQ = 2, ND = 2, HB = 0, HBOFF = 0, MIN = 0, BIAS = 128 };
};
template <>
struct MmaF<MF_Q4_0> {
    enum { BLK = 2304, INTS = 0, DOFF = 2048, NQ = 1, ND = 2, HB = 0, HBOFF = 0, MIN = 0, BIAS = 8 };
};
template <>
struct MmaF<MF_Q4_1> {
    enum { BLK = 2560, INTS = 0, DOFF = 2048, NQ = 1, ND = 4, HB = 0, HBOFF = 0, MIN = 1, BIAS = 0 };
};
template <>
struct MmaF<MF_Q5_0> {
    enum { BLK = 2816, INTS = 0, DOFF = 2560, NQ = 1, ND = 2, HB = 1, HBOFF = 2048, MIN = 0, BIAS = 16 };
};
template <>
struct MmaF<MF_Q6_K> {
    enum { BLK = MMA6_BLK, INTS = 1 };
};

// Constants of the 32-element formats' A build: rows g: (1024 + u) * 1 - (1024 + BIAS) = q;
// rows g+8 (u sits 4 bits up): (1024 + 16u) / 16 - (64 + BIAS) = q. Every operand and result
// is an integer (or 1/16) exact in f16, so A holds q exactly.
struct M32c {
    u32 one, b, c16, d;
};
template <int F>
__device__ __forceinline__ M32c m32_consts() {
    M32c k;
    k.one = mma_h2dup(1.0f);
    k.b = mma_h2dup(-(1024.0f + (float)MmaF<F>::BIAS));
    k.c16 = mma_h2dup(0.0625f);
    k.d = mma_h2dup(-(64.0f + (float)MmaF<F>::BIAS));
    return k;
}

// The A fragment of k-step 4 * k4 + kk from the lane's k4-group quant words qv and (Q5_0) the
// k-step's high-bit byte hb. Q8_0: byte 2r + p of the k-step's 8 bytes is register r's element
// p; PRMT puts it under 0x64 (1024 + u, u = q + 128). Nibble formats: the f16 nibble words.
template <int F>
__device__ __forceinline__ void m32_afrag(const uint4 (&qv)[MmaF<F>::NQ], u32 hb, int kk,
                                          const M32c& k, u32 (&a)[4]) {
    if constexpr (F == MF_Q8_0) {
        const uint4 v = qv[(kk >> 1) & (MmaF<F>::NQ - 1)];
        const u32 w0 = (kk & 1) ? v.z : v.x, w1 = (kk & 1) ? v.w : v.y;
        a[0] = mma_hfma2(__byte_perm(w0, 0x64646464u, 0x4140), k.one, k.b);  // row g,   k0, k0+1
        a[1] = mma_hfma2(__byte_perm(w0, 0x64646464u, 0x4342), k.one, k.b);  // row g+8, k0, k0+1
        a[2] = mma_hfma2(__byte_perm(w1, 0x64646464u, 0x4140), k.one, k.b);  // row g,   k0+8..
        a[3] = mma_hfma2(__byte_perm(w1, 0x64646464u, 0x4342), k.one, k.b);  // row g+8, k0+8..
    } else {
        const u32 w = mma_comp4(qv[0], kk), w8 = w >> 8;
        u32 h0 = 0, h1 = 0, h2 = 0, h3 = 0;
        if constexpr (MmaF<F>::HB == 1) {
            // bit i of hb (nibble i's fifth bit) to bit 4 above the nibble's place in its
            // register: nibbles 0..3 at bits 0..3, 4..7 at 16..19, then shifted per register.
            const u32 t = (hb & 0x0Fu) | ((hb & 0xF0u) << 12);
            h0 = (t << 4) & 0x00100010u;  // bits 0, 4  -> 4, 20
            h1 = (t << 7) & 0x01000100u;  // bits 1, 5  -> 8, 24
            h2 = (t << 2) & 0x00100010u;  // bits 2, 6  -> 4, 20 (of w >> 8)
            h3 = (t << 5) & 0x01000100u;  // bits 3, 7  -> 8, 24 (of w >> 8)
        }
        a[0] = mma_hfma2((w & 0x000F000Fu) | h0 | 0x64006400u, k.one, k.b);
        a[1] = mma_hfma2((w & 0x00F000F0u) | h1 | 0x64006400u, k.c16, k.d);
        a[2] = mma_hfma2((w8 & 0x000F000Fu) | h2 | 0x64006400u, k.one, k.b);
        a[3] = mma_hfma2((w8 & 0x00F000F0u) | h3 | 0x64006400u, k.c16, k.d);
    }
}

// The high bits of k-step ks from a lane's high-bit uint4 (m32_afrag's hb): Q5_0's byte ks.
__device__ __forceinline__ u32 m32_hbits(const uint4& hb, int ks) {
    return (mma_comp4(hb, ks >> 2) >> (8 * (ks & 3))) & 255u;
}

// The f16 d of k-step ks's block (ks / 2) for one row from the row's scale word of k4 group
// ks / 4 (`w`: blocks 2 (ks / 4), 2 (ks / 4) + 1, low half first).
__device__ __forceinline__ float m32_d(u32 w, int ks) { return mma_h2f(w >> (16 * ((ks >> 1) & 1))); }

// f16 number j (0..8) of a uint4 of eight.
__device__ __forceinline__ float m32_h8(const uint4& v, int j) {
    return mma_h2f(mma_comp4(v, j >> 1) >> (16 * (j & 1)));
}

// v_b of one output of a 32-element format (THE ORDER, see the head): d * (S_b * 2^E), or with
// a min (Q4_1) fmaf(d, S_b * 2^E, m * xsum_b). S * e is exact (a power of two).
template <int F>
__device__ __forceinline__ float m32_value(float S, float d, float m, float xs, float e) {
    if constexpr (MmaF<F>::MIN) return fmaf(d, __fmul_rn(S, e), __fmul_rn(m, xs));
    else return __fmul_rn(d, __fmul_rn(S, e));
}

// One column's sum of 32-block b (Q4_1 only) and its super-block's 2^E (padding columns: 0).
__device__ __forceinline__ float m32_xs(const float* XS, int col, int ncols, int n_sb, int sb,
                                        int b) {
    return col < ncols ? XS[((size_t)col * n_sb + sb) * 8 + b] : 0.0f;
}
__device__ __forceinline__ float m32_xe(const float* XE, int col, int ncols, int n_sb, int sb) {
    return col < ncols ? XE[(size_t)col * n_sb + sb] : 0.0f;
}

// u_sb += v_b for the four outputs of one C fragment (rows g, g+8 x columns ca, cb) of a
// 32-block: its d (and m) of rows g, g+8, S its chain.
template <int F>
__device__ __forceinline__ void m32_add_block(float (&u)[4], const float (&S)[4], float dg,
                                              float d8, float mg, float m8, float xa, float xc,
                                              float ea, float ec) {
    u[0] = __fadd_rn(u[0], m32_value<F>(S[0], dg, mg, xa, ea));
    u[1] = __fadd_rn(u[1], m32_value<F>(S[1], dg, mg, xc, ec));
    u[2] = __fadd_rn(u[2], m32_value<F>(S[2], d8, m8, xa, ea));
    u[3] = __fadd_rn(u[3], m32_value<F>(S[3], d8, m8, xc, ec));
}

// ---- activations: rows x [ncols][n_in] (a.x) -> XF, XE, XS. grid (columns, ceil(n_sb / 8)),
// block 256: warp w of block (col, j) prepares super-block 8j + w of column col.
// A norm launch (a.norm set) first normalizes the row with stage_rows' expressions
// (kernels/norm.cu: inv = 1 / sqrt(sumsq256 / n + eps), then (x * inv) * w), so the values
// are the ones every other matvec of the engine sees; each block of a column forms the same
// sum (the same function of the same row). Columns from ncols up to the grid's (the GEMM's
// last n-tile; the decode kernel reads none past ncols) are written as zeros. Each column
// alone decides its own bytes.
// plant (`--fault mma-row-order`, the negative control): a launch of more than one row
// computes its rows otherwise, which the gate must catch. The f16 form stores each
// super-block's lo fragments where hi belong and hi where lo belong, so the mma chain adds lo
// before hi: an order that depends on the launch's rows (the prototype measured this swap
// changing most outputs' bits). The integer form (Q4_K, Q6_K), whose sums have no order to
// swap, rounds x * 2^-E toward zero instead of to nearest: each v off by at most one unit of
// 2^-20 of the block's largest, most outputs' bits changed (kernel-emu checks both formats).
// The integer form (Q4_K, Q6_K) of a lane's 8 inputs x (k = 8L..8L+7 of the super-block, L =
// 4s + q: 32-k chunk s, its quarter q) into the column's 256 XF words (the head's layout);
// sinv = 2^-E (mma_prep_sb: |v| <= 2^21, the bound THE ORDER's int32 sums rely on).
__device__ __forceinline__ void mma_prep_ints(const float (&x)[8], float sinv, int L, u32* xf,
                                              bool trunc) {
    const int s = L >> 2, q = L & 3;
    // Inputs 4j..4j+3 of the lane are k = 32 s + 8 q + 4 j + i: fragment word (q >> 1) (b0 for
    // k < 16 of the sub-block, b1 past it) of lane t = 2 (q & 1) + j.
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        u32 ph = 0, pm = 0, pl = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float xs = __fmul_rn(x[4 * j + i], sinv);  // exact: a power of two
            int v = trunc ? __float2int_rz(xs) : __float2int_rn(xs);
            // |v| <= 2^21 for every finite input already; the clamp bounds a non-finite
            // input's saturated integer the same way, so no sum below can overflow.
            v = max(-2097152, min(2097152, v));
            // Balanced base-256 digits, each an s8: v = 2^16 h + 2^8 m + l, l and m in
            // [-128, 127], h in [-32, 32] (v / 2^8 - l / 2^8 = u, |u| <= 2^13).
            const int l = ((v + 128) & 255) - 128, u = (v - l) >> 8;  // exact: v - l = 2^8 u
            const int m = ((u + 128) & 255) - 128, h = (u - m) >> 8;
            ph |= ((u32)h & 255u) << (8 * i);
            pm |= ((u32)m & 255u) << (8 * i);
            pl |= ((u32)l & 255u) << (8 * i);
        }
        u32* w = xf + (s * 4 + 2 * (q & 1) + j) * 8 + (q >> 1);
        w[0] = ph;
        w[2] = pm;
        w[4] = pl;
    }
}

// One warp's share of mma_prep: super-block sb (< n_sb) of the row X (n inputs; normalized with
// inv and the norm weights g when g is set), into the column's XF words xf (256), its 2^E *xe
// and its 8 sub-block sums xs. Lane L takes inputs 8L..8L+7. Pointers are generic: mma_prep
// writes global scratch, the fused decode kernel (mma_prep_block) shared memory, with these
// same expressions, so the bytes are the same either way. ints: the integer form, else
// the f16 one; plant: the planted fault (above).
__device__ __forceinline__ void mma_prep_sb(const float* X, const float* gw, float inv, int n,
                                            int sb, int L, u32* xf, float* xe, float* xs,
                                            bool ints, bool plant) {
    const int e0 = sb * 256 + L * 8;
    // n is a multiple of 32, so a lane's 8 inputs are all in the row or all past it.
    const bool in = e0 < n;
    const float4 z4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 p0 = in ? *(const float4*)(X + e0) : z4;
    const float4 p1 = in ? *(const float4*)(X + e0 + 4) : z4;
    float x[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    if (gw && in) {
        const float4 g0 = *(const float4*)(gw + e0), g1 = *(const float4*)(gw + e0 + 4);
        const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) x[i] = (x[i] * inv) * g[i];  // stage_rows' expression
    }
    // The integer forms count a NaN as +inf here (fmaxf drops NaN), so that m is +inf exactly
    // when the super-block holds a non-finite input (below: 2^E NaN).
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const float ax = fabsf(x[i]);
        m = fmaxf(m, ints && !(ax <= 3.40282347e38f) ? __int_as_float(0x7f800000) : ax);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    // E: max |x| * 2^-E in [2^20, 2^21) for Q4_K's integers (|v| <= 2^21); in [2^14, 2^15)
    // for the f16 form, so hi keeps 11 bits of the block's largest values and lo (2^-11
    // below) stays normal in f16 for all but negligible elements. Clamped so both 2^E and
    // 2^-E are normal f32 (all-zero or tiny blocks take E = -126; their values round to small
    // integers or keep fewer bits, a function of x alone).
    int E = ((__float_as_int(m) >> 23) & 255) - (ints ? 147 : 141);
    if (E < -126) E = -126;
    const float sinv = __int_as_float((127 - E) << 23);
    // The integer forms' 2^E is NaN for a super-block holding a non-finite input: its integer
    // pieces cannot carry it (cvt saturates, or gives 0 for NaN; then clamped), so THE
    // ORDER's rn_f32(S) * 2^E makes every output of the column non-finite, as the input's
    // row must be (Q6_K has no other term that would; Q4_K's mins term would too).
    const float e = ints && m > 3.40282347e38f ? __int_as_float(0x7fffffff) : __int_as_float((127 + E) << 23);
    if (ints) {
        mma_prep_ints(x, sinv, L, xf, plant);
    } else {
        u32 hw[4], lw[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            u32 hh[2], ll[2];
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const float xs = __fmul_rn(x[2 * j + p], sinv);  // exact: a power of two
                const unsigned short h = mma_f2h(xs);
                hh[p] = h;
                ll[p] = mma_f2h(__fsub_rn(xs, mma_h2f(h)));  // xs - hi is exact in f32
            }
            hw[j] = hh[0] | (hh[1] << 16);
            lw[j] = ll[0] | (ll[1] << 16);
        }
        // Lane L holds inputs 8L..8L+7: k-step L/2, half L%2, pairs t = 0..3.
        u32* out = xf + (L >> 1) * 16 + (L & 1);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            out[j * 4] = plant ? lw[j] : hw[j];
            out[j * 4 + 2] = plant ? hw[j] : lw[j];
        }
    }
    if (L == 0) *xe = e;
    // Sub-block sums: each lane's 8 in order, then ((l0 + l1) + (l2 + l3)) over its 4 lanes.
    float s = x[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) s = __fadd_rn(s, x[i]);
    const float q = __fadd_rn(s, __shfl_down_sync(0xFFFFFFFFu, s, 1));
    const float r = __fadd_rn(q, __shfl_down_sync(0xFFFFFFFFu, q, 2));
    if ((L & 3) == 0) xs[L >> 2] = r;
}

// A norm launch's 1 / rms of row X (n inputs) with stage_rows' expression, by the whole
// block (sumsq256's barriers): mma_prep's and mma_prep_xg's.
__device__ __forceinline__ float mma_prep_inv(const float* X, int n, float eps, float* red) {
    return 1.0f / sqrtf(sumsq256(X, n, red) / (float)n + eps);
}

// mma_prep: in the whole program, or a module of its own (MMA_SET -1).
#if !defined(MMA_SET) || MMA_SET < 0
extern "C" __global__ void __launch_bounds__(256) mma_prep(MvArgs a, u32* __restrict__ XF,
                                                           float* __restrict__ XE,
                                                           float* __restrict__ XS, int plant,
                                                           int ints) {
    __shared__ float red[8];
    pdl_trigger();
    pdl_wait();
    // n_in: a multiple of 256 (Q4_K) or of 32 (the 32-element formats): a last partial
    // super-block is prepared with zeros past n_in (its 2^E from the real inputs only).
    const int col = blockIdx.x, n = a.n_in, n_sb = (n + 255) >> 8;
    const int warp = threadIdx.x >> 5, L = threadIdx.x & 31, sb = blockIdx.y * 8 + warp;
    if (col >= a.rows) {  // padding column: uniform over the block
        if (sb < n_sb) {
            u32* out = XF + ((size_t)col * n_sb + sb) * 256;
            for (int i = L; i < 256; i += 32) out[i] = 0u;
            if (L < 8) XS[((size_t)col * n_sb + sb) * 8 + L] = 0.0f;
            if (L == 0) XE[(size_t)col * n_sb + sb] = 0.0f;
        }
        return;
    }
    const float* X = a.x + (size_t)col * n;
    const float inv = a.norm ? mma_prep_inv(X, n, a.eps, red) : 0.0f;
    const size_t i = (size_t)col * n_sb + sb;
    // ints: the launch's matrices are Q4_K or Q6_K (engine/mma.rs), uniform over the grid.
    // plant: the fault only, on launches of more than one row.
    if (sb < n_sb)
        mma_prep_sb(X, a.norm, inv, n, sb, L, XF + i * 256, XE + i, XS + i * 8, ints != 0, plant && a.rows > 1);
}
#endif

// The fused decode's prep (mma_decode_body<.., FUSE = true>): all nb <= 8 rows of the launch,
// every super-block, into shared memory (xf: nb * n_sb * 256 words, xe, xs at the same strides
// as mma_prep's scratch, column stride n_sb), by the whole block after pdl_wait (a.x is the
// previous kernel's output). The values are mma_prep's bit for bit: the norm's sum by
// sumsq256_rows_inv (sumsq256's exact order whatever blockDim: the 512-thread k16 kernel
// too), inv by the same expression, each (row, super-block) by one warp through mma_prep_sb
// (lanes, shuffles and expressions unchanged), and the plant under the same condition (a
// launch of more than one row). Ends with a barrier: the block reads every column.
__device__ __forceinline__ void mma_prep_block(const MvArgs& a, int n_sb, int nb, int plant,
                                               bool ints, u32* xf, float* xe, float* xs) {
    __shared__ float red[64], inv[8];
    const int n = a.n_in, warp = threadIdx.x >> 5, L = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (a.norm) sumsq256_rows_inv(a.x, n, nb, a.eps, red, inv);  // a.norm: uniform
    for (int it = warp; it < nb * n_sb; it += nw) {
        const int col = it / n_sb, sb = it - col * n_sb;
        mma_prep_sb(a.x + (size_t)col * n, a.norm, a.norm ? inv[col] : 0.0f, n, sb, L,
                    xf + (size_t)it * 256, xe + it, xs + (size_t)it * 8, ints, plant && a.rows > 1);
    }
    __syncthreads();
}

// (XF, XE, XS are read with plain loads, never the non-coherent path: with programmatic
// dependent launch a kernel starts while mma_prep still writes them, which the read-only
// contract of ld.global.nc does not allow; only the weights take it.)

// One warp's Q4_K weights of a super-block of MT m-tiles, as mma_q4k_load reads them: the
// decode's load half, so that the first round's can leave before pdl_wait (mma_decode_body).
template <int MT>
struct MmaQ4kW {
    uint4 nib[MT][4], sc[MT], mn[MT];
    uint2 dd[MT];
};
template <int MT>
__device__ __forceinline__ void mma_q4k_load(const u8* const (&base)[MT], int sb, int lane,
                                             MmaQ4kW<MT>& w) {
    const int g = lane >> 2;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        const u8* blk = base[mi] + (size_t)sb * MMA_BLK;
#pragma unroll
        for (int i = 0; i < 4; ++i) w.nib[mi][i] = mma_ld16(blk + i * 512 + lane * 16);
        w.sc[mi] = mma_ld16(blk + MMA_SC_OFF + g * 32);
        w.mn[mi] = mma_ld16(blk + MMA_SC_OFF + g * 32 + 16);
        w.dd[mi] = mma_ld8(blk + MMA_DD_OFF + g * 8);
    }
}

// The compute half: the super-block's v of THE ORDER from weights already in registers.
template <int MT>
__device__ __forceinline__ void mma_q4k_sb(const MmaQ4kW<MT>& w, int sb, int n_sb,
                                           const uint4* XF, const float* XE, const float* XS,
                                           int nb, int lane, float (&v)[MT][4]) {
    const int g = lane >> 2, t = lane & 3;
    MmaQ4kS S[MT];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) mma_q4k_zero(S[mi]);
    if (nb == 1) {  // the one-row decode (warp-uniform): one mma a sub-block and m-tile
        // Lane (g, t)'s piece of column 0: uint2 index 0 (h), 1 (m) of uint4 2 (4 s + t), 2
        // (l: the first half of the next uint4); p < 0: a zero column.
        const int p = g == 0 ? 0 : g == 1 ? 1 : g == 3 ? 2 : -1;
        const uint2* xr = (const uint2*)(XF + (size_t)sb * 64 + 2 * t) + max(p, 0);  // in bounds
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const uint2 b = p >= 0 ? xr[s * 16] : make_uint2(0u, 0u);
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                u32 a[4];
                mma_q4k_afrag(w.nib[mi][s >> 1], s, a);
                mma_q4k_row_dot(a, b, w.sc[mi], s, S[mi]);
            }
        }
        // Column 0's values only (lane t = 0's v[0], v[2]); the other slots are columns past
        // nb, never stored.
        float xa[8], ea;
        mma_load_xs(XS, XE, 2 * t, nb, n_sb, sb, xa, ea);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            float f[4];
            mma_q4k_row_round(S[mi], f);
            mma_col_values(f[0], f[2], w.dd[mi], w.mn[mi], xa, ea, v[mi][0], v[mi][2]);
            v[mi][1] = v[mi][3] = 0.0f;
        }
        return;
    }
    // Lane (g, t)'s B fragments of column g: uint4 2 (4 s + t) = {h0, h1, m0, m1}, then {l0, l1}.
    const uint4* xf = XF + ((size_t)g * n_sb + sb) * 64 + 2 * t;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        uint4 hb;
        uint2 lb;
        mma_int_bfrag(xf, s, g < nb, hb, lb);  // columns past nb: zeros, changing nothing
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            u32 a[4];
            mma_q4k_afrag(w.nib[mi][s >> 1], s, a);
            mma_q4k_dot(a, hb, lb, w.sc[mi], s, S[mi]);
        }
    }
    float xa[8], xc[8], ea, ec;
    mma_load_xs(XS, XE, 2 * t, nb, n_sb, sb, xa, ea);
    mma_load_xs(XS, XE, 2 * t + 1, nb, n_sb, sb, xc, ec);
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        float f[4];
        mma_q4k_round(S[mi], f);
        mma_frag_values(f, w.dd[mi], w.mn[mi], xa, xc, ea, ec, v[mi]);
    }
}

// One warp's Q6_K weights of a super-block of MT m-tiles (as MmaQ4kW): the nibble uint4s of
// the four chunk pairs, the high-pair uint4s of chunks 0..3 and 4..7, the scale uint4s of
// rows g and g+8, and their d (low half row g).
template <int MT>
struct MmaQ6kW {
    uint4 nib[MT][4], hi[MT][2], scg[MT], sc8[MT];
    u32 dd[MT];
};
template <int MT>
__device__ __forceinline__ void mma_q6k_load(const u8* const (&base)[MT], int sb, int lane,
                                             MmaQ6kW<MT>& w) {
    const int g = lane >> 2;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        const u8* blk = base[mi] + (size_t)sb * MMA6_BLK;
#pragma unroll
        for (int i = 0; i < 4; ++i) w.nib[mi][i] = mma_ld16(blk + i * 512 + lane * 16);
#pragma unroll
        for (int i = 0; i < 2; ++i) w.hi[mi][i] = mma_ld16(blk + MMA6_HI_OFF + i * 512 + lane * 16);
        w.scg[mi] = mma_ld16(blk + MMA6_SC_OFF + g * 32);
        w.sc8[mi] = mma_ld16(blk + MMA6_SC_OFF + g * 32 + 16);
        w.dd[mi] = __ldg((const u32*)(blk + MMA6_DD_OFF + g * 4));
    }
}

// The compute half (as mma_q4k_sb): the super-block's v of THE ORDER from weights in registers.
// XS: unused (Q6_K has no mins), taken for mma_int_sb's one signature.
template <int MT>
__device__ __forceinline__ void mma_q6k_sb(const MmaQ6kW<MT>& w, int sb, int n_sb,
                                           const uint4* XF, const float* XE, const float* XS,
                                           int nb, int lane, float (&v)[MT][4]) {
    const int g = lane >> 2, t = lane & 3;
    if (nb == 1) {  // the one-row decode (warp-uniform): one mma a chunk and m-tile
        // Lane (g, t)'s B column g: piece p (uint2 0 h, 1 m, 2 l of the column's uint4s 2 (4 s
        // + t), + 1), its half b0 (g < 4: sub-block 2s) or b1 (g >= 4: 2s + 1); p < 0 zeros.
        const int gg = g & 3, p = gg == 0 ? 0 : gg == 1 ? 1 : gg == 3 ? 2 : -1;
        const uint2* xr = (const uint2*)(XF + (size_t)sb * 64 + 2 * t) + max(p, 0);  // in bounds
        uint2 sg[MT], s8[MT];  // the lane's sub-blocks' scales: 2s + (t >> 1), byte s
        int X[MT][2], Y[MT][2];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            sg[mi] = t >= 2 ? make_uint2(w.scg[mi].z, w.scg[mi].w) : make_uint2(w.scg[mi].x, w.scg[mi].y);
            s8[mi] = t >= 2 ? make_uint2(w.sc8[mi].z, w.sc8[mi].w) : make_uint2(w.sc8[mi].x, w.sc8[mi].y);
            X[mi][0] = X[mi][1] = Y[mi][0] = Y[mi][1] = 0;
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const uint2 c = p >= 0 ? xr[s * 16] : make_uint2(0u, 0u);
            const uint2 b = g < 4 ? make_uint2(c.x, 0u) : make_uint2(0u, c.y);
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                u32 a[4];
                mma_q6k_afrag(w.nib[mi][s >> 1], mma_comp4(w.hi[mi][s >> 2], s & 3), s, a);
                mma_q6k_row_dot(a, b, sg[mi], s8[mi], s, X[mi], Y[mi]);
            }
        }
        // Column 0's values only (lane t = 0's v[0], v[2]); the other slots are columns past
        // nb, never stored.
        const float e = XE[sb];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            float f[2];
            mma_q6k_row_round(X[mi], Y[mi], f);
            v[mi][0] = mma_q6k_value(f[0], mma_h2f(w.dd[mi]), e);
            v[mi][2] = mma_q6k_value(f[1], mma_h2f(w.dd[mi] >> 16), e);
            v[mi][1] = v[mi][3] = 0.0f;
        }
        return;
    }
    // Lane (g, t)'s B fragments of column g: uint4 2 (4 s + t) = {h0, h1, m0, m1}, then {l0, l1}.
    const uint4* xf = XF + ((size_t)g * n_sb + sb) * 64 + 2 * t;
    long long S[MT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int c = 0; c < 4; ++c) S[mi][c] = 0;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        uint4 hb;
        uint2 lb;
        mma_int_bfrag(xf, s, g < nb, hb, lb);  // columns past nb: zeros, changing nothing
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            u32 a[4];
            mma_q6k_afrag(w.nib[mi][s >> 1], mma_comp4(w.hi[mi][s >> 2], s & 3), s, a);
            mma_q6k_dot(a, hb, lb, w.scg[mi], w.sc8[mi], s, S[mi]);
        }
    }
    const float ea = m32_xe(XE, 2 * t, nb, n_sb, sb), ec = m32_xe(XE, 2 * t + 1, nb, n_sb, sb);
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        const float dg = mma_h2f(w.dd[mi]), d8 = mma_h2f(w.dd[mi] >> 16);
        v[mi][0] = mma_q6k_value((float)S[mi][0], dg, ea);
        v[mi][1] = mma_q6k_value((float)S[mi][1], dg, ec);
        v[mi][2] = mma_q6k_value((float)S[mi][2], d8, ea);
        v[mi][3] = mma_q6k_value((float)S[mi][3], d8, ec);
    }
}

// The integer formats' weights in registers (MmaIntW<F, MT>::T), their load and compute
// halves: the decode's one structure for Q4_K and Q6_K.
template <int F, int MT>
struct MmaIntW {
    typedef MmaQ4kW<MT> T;
};
template <int MT>
struct MmaIntW<MF_Q6_K, MT> {
    typedef MmaQ6kW<MT> T;
};
template <int F, int MT>
__device__ __forceinline__ void mma_int_load(const u8* const (&base)[MT], int sb, int lane,
                                             typename MmaIntW<F, MT>::T& w) {
    if constexpr (F == MF_Q6_K) mma_q6k_load<MT>(base, sb, lane, w);
    else mma_q4k_load<MT>(base, sb, lane, w);
}
template <int F, int MT>
__device__ __forceinline__ void mma_int_sb(const typename MmaIntW<F, MT>::T& w, int sb, int n_sb,
                                           const uint4* XF, const float* XE, const float* XS,
                                           int nb, int lane, float (&v)[MT][4]) {
    if constexpr (F == MF_Q6_K) mma_q6k_sb<MT>(w, sb, n_sb, XF, XE, XS, nb, lane, v);
    else mma_q4k_sb<MT>(w, sb, n_sb, XF, XE, XS, nb, lane, v);
}

// MT m-tiles x the decode's one n-tile (columns < nb; zeros past them), one warp.
template <int F, int MT>
__device__ __forceinline__ void mma_dec_sb(const u8* const (&base)[MT], int sb, int n_sb,
                                           int nblk, const uint4* XF, const float* XE,
                                           const float* XS, int nb, int lane, float (&v)[MT][4]) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (MmaF<F>::INTS) {
        typename MmaIntW<F, MT>::T w;
        mma_int_load<F, MT>(base, sb, lane, w);
        mma_int_sb<F, MT>(w, sb, n_sb, XF, XE, XS, nb, lane, v);
    } else {
        typedef MmaF<F> T;
        // Every weight load of the super-block issued up front (as Q4_K's).
        uint4 q[MT][4][T::NQ], hb[MT], dm[MT][T::ND];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            const u8* blk = base[mi] + (size_t)sb * T::BLK;
#pragma unroll
            for (int k4 = 0; k4 < 4; ++k4)
#pragma unroll
                for (int j = 0; j < T::NQ; ++j)
                    q[mi][k4][j] = mma_ld16(blk + (k4 * T::NQ + j) * 512 + lane * 16);
            hb[mi] = T::HB ? mma_ld16(blk + T::HBOFF + lane * 16) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int j = 0; j < T::ND; ++j) dm[mi][j] = mma_ld16(blk + T::DOFF + g * 16 * T::ND + 16 * j);
        }
        const float ea = m32_xe(XE, 2 * t, nb, n_sb, sb), ec = m32_xe(XE, 2 * t + 1, nb, n_sb, sb);
        const M32c k = m32_consts<F>();
        float S[MT][4];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int c = 0; c < 4; ++c) v[mi][c] = 0.0f;  // u_sb = 0
        const uint4* xf = XF + ((size_t)g * n_sb + sb) * 64 + t;
#pragma unroll
        for (int ks = 0; ks < 16; ++ks) {
            if (ks % 2 == 0) {  // a block's chain starts from zero: THE ORDER
#pragma unroll
                for (int mi = 0; mi < MT; ++mi)
#pragma unroll
                    for (int c = 0; c < 4; ++c) S[mi][c] = 0.0f;
            }
            // Columns past nb are zeros: they change nothing in the real columns.
            const uint4 xb = g < nb ? xf[ks * 4] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                u32 w4[4];
                m32_afrag<F>(q[mi][ks >> 2], m32_hbits(hb[mi], ks), ks & 3, k, w4);
                mma16816(S[mi], w4, xb.x, xb.y);  // hi, then lo: THE ORDER
                mma16816(S[mi], w4, xb.z, xb.w);
            }
            const int b = ks >> 1;  // the 32 columns of ks
            if (ks % 2 == 1 && sb * 8 + b < nblk) {  // u_sb += v, block order
                const float xa = T::MIN ? m32_xs(XS, 2 * t, nb, n_sb, sb, b) : 0.0f;
                const float xc = T::MIN ? m32_xs(XS, 2 * t + 1, nb, n_sb, sb, b) : 0.0f;
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    const float mg = T::MIN ? m32_h8(dm[mi][2 & (T::ND - 1)], b) : 0.0f;
                    const float m8 = T::MIN ? m32_h8(dm[mi][3 & (T::ND - 1)], b) : 0.0f;
                    const float dg = m32_d(mma_comp4(dm[mi][0], ks >> 2), ks);
                    const float d8 = m32_d(mma_comp4(dm[mi][1], ks >> 2), ks);
                    m32_add_block<F>(v[mi], S[mi], dg, d8, mg, m8, xa, xc, ea, ec);
                }
            }
        }
    }
}

// ---- decode: nb <= 8 columns (one n-tile), MT m-tiles per block, KP warps each taking one
// super-block per round; the v of a round go through shared memory and are added in sb order.
// grid: ceil(n_mt / MT), block KP * 32. MT is even, so a mode-2 block holds gate tile p and
// up tile p (mt0 even).
// FUSE: the kernel prepares the activations itself (mma_prep_block, into dynamic shared
// memory of nb * n_sb * MMA_FUSE_UNIT bytes, engine/mma.rs mma_fused_smem) instead of reading
// mma_prep's scratch: one launch per op instead of two, the same bytes, so the same bits.
template <int F, int MT, int KP, bool FUSE>
__device__ __forceinline__ void mma_decode_body(const MvArgs& a, const uint4* XF, const float* XE,
                                                const float* XS, int n_mt, int n_sb, int nb,
                                                int plant, float (&red)[KP][MT * 128]) {
    pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int mt0 = blockIdx.x * MT, nblk = a.n_in >> 5;
    constexpr int NO = (MT * 128 + KP * 32 - 1) / (KP * 32);
    float acc[NO];
#pragma unroll
    for (int i = 0; i < NO; ++i) acc[i] = 0.0f;
    const u8* base[MT];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        int m, o0;  // past the end: a real tile computed, never stored
        base[mi] = mma_tile(a, min(mt0 + mi, n_mt - 1), n_sb, MmaF<F>::BLK, &m, &o0);
        // The first round's weight block starts its DRAM trip while the previous kernels
        // finish (weights are read-only: safe before pdl_wait; a prefetch writes nothing and
        // carries no ordering). Lane l takes the 128-byte line at byte 128 l of the block,
        // the last such lane the block's last byte (a Q4_K block spans up to 20 lines; a
        // Q8_0 block's last lines beyond 32 lanes are left to the loads).
        constexpr int BLK = MmaF<F>::BLK;
        if (!(MmaF<F>::INTS && !FUSE) && warp < n_sb && lane * 128 < BLK + 127) {
            const u8* p = base[mi] + (size_t)warp * BLK + min(lane * 128, BLK - 1);
#if !defined(PPN_EMU)  // a hint only: the emulator skips it
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
        }
    }
    // The integer formats (Q4_K, Q6_K), unfused (mma_prep ran before): the first round's
    // weights are loaded into registers here, not only asked of L2, so their DRAM trip
    // overlaps the previous kernel's tail and pdl_wait. Safe before pdl_wait: no kernel writes
    // weights (each matrix is uploaded, in its stream's order, before the first launch that
    // reads it, which waits for the upload: programmatic launch overlaps a kernel with the
    // previous KERNEL only), so these loads read the same bytes after the wait as before it:
    // the same bits. Not in the fused kernels: held across the prep they cost a block an SM
    // (116 registers), and one-row eager on the 8B shape measured 3 % slower
    // (receipts/decode-profile-cuda/preload/); unfused, B = 8 measured 8 % faster. With this
    // preload, mma_prep then this kernel beat the fused Q4_K kernel on one row too (+5 to +13 %
    // eager, BENCH.md issue 30 step 23), so the host never fuses Q4_K (cuda/mma.rs
    // mma_fuses); the emulator still runs the fused bodies, which compute the same bits.
    // Q6_K's integer route takes the same structure (measured as a whole, BENCH.md issue 30
    // step 31, not against a fused Q6_K kernel of its own).
    constexpr bool PRE = MmaF<F>::INTS && !FUSE;
    typename MmaIntW<F, MT>::T w0;
    if constexpr (PRE) {
        if (warp < n_sb) mma_int_load<F, MT>(base, warp, lane, w0);
    }
    pdl_wait();
    if constexpr (FUSE) {
        // After pdl_wait: a.x is the previous kernel's output. XF first (uint4 reads), then
        // XS (float4 reads: 16-byte aligned, as XF's size is), then XE.
        DYN_SHARED(uint4, mma_xsm);
        u32* xf = (u32*)mma_xsm;
        float* xs = (float*)(xf + (size_t)nb * n_sb * 256);
        float* xe = xs + (size_t)nb * n_sb * 8;
        mma_prep_block(a, n_sb, nb, plant, MmaF<F>::INTS != 0, xf, xe, xs);
        XF = (const uint4*)xf;
        XE = xe;
        XS = xs;
    }
    const int rounds = (n_sb + KP - 1) / KP;
    for (int r = 0; r < rounds; ++r) {
        const int sb = r * KP + warp;
        if (sb < n_sb) {
            float v[MT][4];
            if constexpr (PRE) {
                if (r > 0) mma_int_load<F, MT>(base, sb, lane, w0);  // round 0's: before pdl_wait
                mma_int_sb<F, MT>(w0, sb, n_sb, XF, XE, XS, nb, lane, v);
            } else {
                mma_dec_sb<F, MT>(base, sb, n_sb, nblk, XF, XE, XS, nb, lane, v);
            }
#pragma unroll
            for (int mi = 0; mi < MT; ++mi)
                *(float4*)&red[warp][mi * 128 + lane * 4] =
                    make_float4(v[mi][0], v[mi][1], v[mi][2], v[mi][3]);
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
    // The finished sums through shared memory, so a mode-2 gate output (tile mi, even) meets
    // its up partner (tile mi + 1, same lane slot: o + 128) in one thread.
#pragma unroll
    for (int i = 0; i < NO; ++i) {
        const int o = threadIdx.x + i * KP * 32;
        if (o < MT * 128) red[0][o] = acc[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NO; ++i) {
        const int o = threadIdx.x + i * KP * 32;
        if (o >= MT * 128) continue;
        const int mi = o >> 7, ln = (o >> 2) & 31, c = o & 3;
        const int rin = (ln >> 2) + (c >= 2 ? 8 : 0);
        const int col = 2 * (ln & 3) + (c & 1);
        if (mt0 + mi >= n_mt || col >= nb) continue;
        int m, o0;
        mma_tile(a, mt0 + mi, n_sb, MmaF<F>::BLK, &m, &o0);
        if (a.mode == 2) {
            if (mi & 1) continue;  // the up tile: finished by its gate's thread
            mv_finish(a, 0, o0 + rin, col, red[0][o], red[0][o + 128]);
        } else {
            mv_finish(a, m, o0 + rin, col, red[0][o], 0.0f);
        }
    }
}

// Super-block sb of one GEMM warp (GMT m-tiles x GNT n-tiles): acc += v_sb (Q4_K) or u_sb
// (32-element formats), each output's one add of this super-block.
template <int F, int GMT, int GNT>
__device__ __forceinline__ void mma_gemm_sb(const u8* const (&blk)[GMT], int sb, int n_sb,
                                            int nblk, const uint4* const (&xf)[GNT],
                                            const float* XE, const float* XS, int ntb, int ncols,
                                            int lane, float (&acc)[GMT][GNT][4]) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (F == MF_Q4K) {
        // The scales now, the mins and d, dmin after the sums (fewer live registers across
        // them: the GEMM is capped at 128, and S takes two an output).
        uint4 sc[GMT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
            sc[mi] = __ldg((const uint4*)(blk[mi] + (size_t)sb * MMA_BLK + MMA_SC_OFF + g * 32));
        MmaQ4kS S[GMT][GNT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < GNT; ++ni) mma_q4k_zero(S[mi][ni]);
#pragma unroll
        for (int p = 0; p < 4; ++p) {  // sub-block pairs: one nibble uint4 each
            uint4 nib[GMT];
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi)
                nib[mi] = __ldg((const uint4*)(blk[mi] + (size_t)sb * MMA_BLK + p * 512 + lane * 16));
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int s = 2 * p + j;
                // xf[ni] points at lane (g, t)'s fragments (mma_gemm_body: + 2t uint4s). One
                // n-tile's at a time, the A fragments rebuilt for each (six integer ops):
                // fewer live registers than every n-tile's fragments at once.
#pragma unroll
                for (int ni = 0; ni < GNT; ++ni) {
                    uint4 hb;
                    uint2 lb;
                    mma_int_bfrag(xf[ni] + (size_t)sb * 64, s, true, hb, lb);
#pragma unroll
                    for (int mi = 0; mi < GMT; ++mi) {
                        u32 a[4];
                        mma_q4k_afrag(nib[mi], s, a);
                        mma_q4k_dot(a, hb, lb, sc[mi], s, S[mi][ni]);
                    }
                }
            }
        }
        uint4 mn[GMT];
        uint2 dd[GMT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi) {
            const u8* b = blk[mi] + (size_t)sb * MMA_BLK;
            mn[mi] = __ldg((const uint4*)(b + MMA_SC_OFF + g * 32 + 16));
            dd[mi] = __ldg((const uint2*)(b + MMA_DD_OFF + g * 8));
        }
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni) {
            const int c0 = (ntb + ni) * 8 + 2 * t;
            float xa[8], xc[8], ea, ec;
            mma_load_xs(XS, XE, c0, ncols, n_sb, sb, xa, ea);
            mma_load_xs(XS, XE, c0 + 1, ncols, n_sb, sb, xc, ec);
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi) {
                float v[4], f[4];
                mma_q4k_round(S[mi][ni], f);
                mma_frag_values(f, dd[mi], mn[mi], xa, xc, ea, ec, v);
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[mi][ni][c] = __fadd_rn(acc[mi][ni][c], v[c]);
            }
        }
    } else if constexpr (F == MF_Q6_K) {
        // Q4_K's walk, d after the sums; per chunk pair one nibble uint4, the pair's high-pair
        // words (uint2: chunks 2p, 2p + 1) and the scale words of its four sub-blocks (rows g,
        // g+8: words p / 2 (even) and 2 + p / 2 (odd), in their places of a uint4 for
        // mma_q6k_sc; its other words unread), per n-tile the A fragments rebuilt: fewer live
        // registers (the GEMM is capped at 128, S takes two an output).
        long long S[GMT][GNT][4];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
                for (int c = 0; c < 4; ++c) S[mi][ni][c] = 0;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            uint4 nib[GMT], scg[GMT], sc8[GMT];
            uint2 hw[GMT];
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi) {
                const u8* b = blk[mi] + (size_t)sb * MMA6_BLK;
                nib[mi] = __ldg((const uint4*)(b + p * 512 + lane * 16));
                hw[mi] = __ldg((const uint2*)(b + MMA6_HI_OFF + (p >> 1) * 512 + lane * 16 + (p & 1) * 8));
                const u32* sw = (const u32*)(b + MMA6_SC_OFF + g * 32);
                scg[mi] = sc8[mi] = make_uint4(0u, 0u, 0u, 0u);
                if (p < 2) {
                    scg[mi].x = __ldg(sw), scg[mi].z = __ldg(sw + 2);
                    sc8[mi].x = __ldg(sw + 4), sc8[mi].z = __ldg(sw + 6);
                } else {
                    scg[mi].y = __ldg(sw + 1), scg[mi].w = __ldg(sw + 3);
                    sc8[mi].y = __ldg(sw + 5), sc8[mi].w = __ldg(sw + 7);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int s = 2 * p + j;
#pragma unroll
                for (int ni = 0; ni < GNT; ++ni) {
                    uint4 hb;
                    uint2 lb;
                    mma_int_bfrag(xf[ni] + (size_t)sb * 64, s, true, hb, lb);
#pragma unroll
                    for (int mi = 0; mi < GMT; ++mi) {
                        u32 a[4];
                        mma_q6k_afrag(nib[mi], j ? hw[mi].y : hw[mi].x, s, a);
                        mma_q6k_dot(a, hb, lb, scg[mi], sc8[mi], s, S[mi][ni]);
                    }
                }
            }
        }
        u32 dd[GMT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
            dd[mi] = __ldg((const u32*)(blk[mi] + (size_t)sb * MMA6_BLK + MMA6_DD_OFF + g * 4));
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni) {
            const int c0 = (ntb + ni) * 8 + 2 * t;
            const float ea = m32_xe(XE, c0, ncols, n_sb, sb), ec = m32_xe(XE, c0 + 1, ncols, n_sb, sb);
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi) {
                const float dg = mma_h2f(dd[mi]), d8 = mma_h2f(dd[mi] >> 16);
                const float v[4] = {mma_q6k_value((float)S[mi][ni][0], dg, ea),
                                    mma_q6k_value((float)S[mi][ni][1], dg, ec),
                                    mma_q6k_value((float)S[mi][ni][2], d8, ea),
                                    mma_q6k_value((float)S[mi][ni][3], d8, ec)};
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[mi][ni][c] = __fadd_rn(acc[mi][ni][c], v[c]);
            }
        }
    } else {
        typedef MmaF<F> T;
        // Q5_0's high bits once per super-block; the quants and the scales' 32-bit words
        // (d rows g, g+8 of the group's 2 blocks; Q4_1 also m) per k4 group (4 k-steps, 2
        // blocks), as Q4_K's nibbles (per sub-block pair): fewer live registers than whole
        // scale words.
        uint4 hb[GMT];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
            hb[mi] = T::HB ? __ldg((const uint4*)(blk[mi] + (size_t)sb * T::BLK + T::HBOFF + lane * 16)) : make_uint4(0u, 0u, 0u, 0u);
        float ea[GNT], ec[GNT];
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni) {
            const int c0 = (ntb + ni) * 8 + 2 * t;
            ea[ni] = m32_xe(XE, c0, ncols, n_sb, sb);
            ec[ni] = m32_xe(XE, c0 + 1, ncols, n_sb, sb);
        }
        const M32c k = m32_consts<F>();
        float S[GMT][GNT][4], u[GMT][GNT][4];
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
                for (int c = 0; c < 4; ++c) u[mi][ni][c] = 0.0f;  // u_sb = 0
#pragma unroll
        for (int k4 = 0; k4 < 4; ++k4) {
            uint4 q[GMT][T::NQ];
            u32 dw[GMT][T::ND];
#pragma unroll
            for (int mi = 0; mi < GMT; ++mi) {
                const u8* b = blk[mi] + (size_t)sb * T::BLK;
#pragma unroll
                for (int j = 0; j < T::NQ; ++j)
                    q[mi][j] = __ldg((const uint4*)(b + (k4 * T::NQ + j) * 512 + lane * 16));
#pragma unroll
                for (int j = 0; j < T::ND; ++j)
                    dw[mi][j] = __ldg((const u32*)(b + T::DOFF + g * 16 * T::ND + 16 * j + 4 * k4));
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const int ks = k4 * 4 + kk;
                if (kk % 2 == 0) {  // a block's chain starts from zero: THE ORDER
#pragma unroll
                    for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
                        for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
                            for (int c = 0; c < 4; ++c) S[mi][ni][c] = 0.0f;
                }
                uint4 xb[GNT];
#pragma unroll
                for (int ni = 0; ni < GNT; ++ni) xb[ni] = xf[ni][(size_t)sb * 64 + ks * 4];
#pragma unroll
                for (int mi = 0; mi < GMT; ++mi) {
                    u32 w4[4];
                    m32_afrag<F>(q[mi], m32_hbits(hb[mi], ks), kk, k, w4);
#pragma unroll
                    for (int ni = 0; ni < GNT; ++ni) {
                        mma16816(S[mi][ni], w4, xb[ni].x, xb[ni].y);  // hi, then lo: THE ORDER
                        mma16816(S[mi][ni], w4, xb[ni].z, xb[ni].w);
                    }
                }
                const int b = ks >> 1;
                if (kk % 2 == 1 && sb * 8 + b < nblk) {  // u_sb += v, block order
#pragma unroll
                    for (int ni = 0; ni < GNT; ++ni) {
                        const int c0 = (ntb + ni) * 8 + 2 * t;
                        const float xa = T::MIN ? m32_xs(XS, c0, ncols, n_sb, sb, b) : 0.0f;
                        const float xc = T::MIN ? m32_xs(XS, c0 + 1, ncols, n_sb, sb, b) : 0.0f;
#pragma unroll
                        for (int mi = 0; mi < GMT; ++mi) {
                            const int sh = 16 * (b & 1);  // block b's f16 in word b / 2 = k4
                            const float mg = T::MIN ? mma_h2f(dw[mi][2 & (T::ND - 1)] >> sh) : 0.0f;
                            const float m8 = T::MIN ? mma_h2f(dw[mi][3 & (T::ND - 1)] >> sh) : 0.0f;
                            m32_add_block<F>(u[mi][ni], S[mi][ni], m32_d(dw[mi][0], ks), m32_d(dw[mi][1], ks),
                                             mg, m8, xa, xc, ea[ni], ec[ni]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int mi = 0; mi < GMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[mi][ni][c] = __fadd_rn(acc[mi][ni][c], u[mi][ni][c]);
    }
}

// ---- GEMM (prefill): ncols columns (XF padded with zero columns to a multiple of 8 by
// mma_prep), each warp GMT m-tiles x GNT n-tiles over all super-blocks in order, accumulating
// in registers. grid (ceil(n_mt / (GMT * GWM)), ceil(n_nt / (GNT * GWN))), block GWM * GWN * 32.
// GMT is even, so in mode 2 a lane holds gate tile p (mi even) and up tile p (mi + 1).
template <int F, int GMT, int GNT, int GWM, int GWN>
__device__ __forceinline__ void mma_gemm_body(const MvArgs& a, const uint4* XF, const float* XE,
                                              const float* XS, int n_mt, int n_sb, int ncols) {
    pdl_trigger();
    pdl_wait();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp % GWM, wn = warp / GWM, nblk = a.n_in >> 5;
    const int n_nt = (ncols + 7) >> 3;
    // The block's warps along n: GWN, or fewer when the host launches fewer warps (narrow
    // launches: more, smaller blocks over the SMs, engine/mma.rs mma_gemm_warps_n). Which warp
    // computes an output never enters its order: each output's super-blocks are added in
    // order in its own lane's registers, whatever the tiling.
    const int gwn = (int)(blockDim.x >> 5) / GWM;
    const int mtb = (blockIdx.x * GWM + wm) * GMT, ntb = (blockIdx.y * gwn + wn) * GNT;
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
    for (int mi = 0; mi < GMT; ++mi) {
        int m, o0;  // past the end: a real tile computed, never stored
        blk[mi] = mma_tile(a, min(mtb + mi, n_mt - 1), n_sb, MmaF<F>::BLK, &m, &o0);
    }
    const uint4* xf[GNT];
#pragma unroll
    for (int ni = 0; ni < GNT; ++ni)  // lane (g, t)'s first B fragment (the head's two forms)
        xf[ni] = XF + (size_t)(min(ntb + ni, n_nt - 1) * 8 + g) * n_sb * 64 + (MmaF<F>::INTS ? 2 * t : t);
    for (int sb = 0; sb < n_sb; ++sb)  // super-blocks in order: THE ORDER's y = y + v_sb
        mma_gemm_sb<F, GMT, GNT>(blk, sb, n_sb, nblk, xf, XE, XS, ntb, ncols, lane, acc);
#pragma unroll
    for (int mi = 0; mi < GMT; ++mi) {
        if (mtb + mi >= n_mt) continue;
        if (a.mode == 2 && (mi & 1)) continue;  // the up tile: finished with its gate
        int m, o0;
        mma_tile(a, mtb + mi, n_sb, MmaF<F>::BLK, &m, &o0);
#pragma unroll
        for (int ni = 0; ni < GNT; ++ni)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int rin = g + (c >= 2 ? 8 : 0);
                const int col = (ntb + ni) * 8 + 2 * t + (c & 1);
                if (ntb + ni >= n_nt || col >= ncols) continue;
                if (a.mode == 2) mv_finish(a, 0, o0 + rin, col, acc[mi][ni][c], acc[mi | 1][ni][c]);
                else mv_finish(a, m, o0 + rin, col, acc[mi][ni][c], 0.0f);
            }
    }
}

// ---- The Q4_K GEMM on Hopper's wgmma (issue 30 step 48; the probe of step 47,
// receipts/prefill-cuda/wgmma-int/probe.cu w2-32-2, measured 1.53x mma_gemm over a layer's four
// 8B-shape matrices on an H100 and an H200, every output the same bits). THE ORDER of Q4_K
// unchanged: the same integer digits of mma_prep, the same exact integer sums S_sb (only how
// the tensor cores sum them differs, and an exact integer has no order), the same one rounding
// rn_f32(S_sb), and mma_frag_values' f32 epilogue, super-blocks added in order in one thread's
// registers. So every output is mma_gemm's bits (kernel-emu checks it; the GPU scripts too).
// Built only for sm_90a (wgmma, bulk copies and transaction-count mbarriers are Hopper's;
// NVRTC defines __CUDA_ARCH_FEAT_SM90_ALL for compute_90a), and in the kernel emulator, which
// models them (tests/kernel-emu/emu.h).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(PPN_EMU)
#define MMA_WG_ON 1
#else
#define MMA_WG_ON 0
#endif
// The block: WG_NWG warpgroups (warp w takes m-tile blockIdx.y * WG_MT + w: a warpgroup's 4
// warps are its 64 rows) x WG_BN columns from blockIdx.x * WG_BN. Each thread holds WG_NO
// outputs (64 x WG_BN / 128). WG_NST stages of the ring, each one super-block's XG tile then
// the block's WG_MT 2368-byte weight blocks.
// WG_NWG and WG_NST come from the module's head (cuda/mma.rs mma_module_head: MMA_WG_NWG,
// MMA_WG_NST, which the host sizes the launch from); these defaults serve the emulator and
// the whole program. One warpgroup a block (step 50): three blocks an SM (WG_MINB; 70.5 KB
// of shared memory each, 168 registers, none spilled), whose block barriers each span one
// warpgroup's 4 warps, against step 48's two blocks of 2 warpgroups at 128 registers (6
// accumulators spilled, the block barrier the first of its stall reasons in Nsight Compute).
// Two wgmma in flight a warpgroup (step 51): sub-block s + 1's issued into a second D before
// sub-block s's integer sums, D declared written only ("=r": scale-d 0), which is what frees
// ptxas from serializing the wgmma (its C7511 note came from a read-write D, not from the
// register count); gate|up 903 -> 852 us, prefill512 +4.7 % on one H100, the same bits
// (receipts/prefill-cuda/two-in-flight/).
#define WG_BN 32
#ifndef WG_NWG
#define WG_NWG 1
#endif
#ifndef WG_NST
#define WG_NST 2
#endif
#define WG_MT (4 * WG_NWG)
// Blocks an SM the registers are bounded for (__launch_bounds__), as the shared memory at 2
// stages allows: three of one warpgroup (12 warps; a fourth's 70.5 KB does not fit), two of
// two (16 warps), else one.
#define WG_MINB (WG_NWG == 1 ? 3 : WG_NWG == 2 ? 2 : 1)
#define WG_NO (WG_BN / 2)
// The prepared activations' layout XG (mma_prep_xg): per block of WG_BN columns and
// super-block sb one WG_TILE of bytes:
//   [0, WG_XS)      the B operand: sub-block s at s * 96 BN, piece p (h, m, l) at + p * 32 BN,
//                   8-column group ct at + ct * 256, k-half kh at + kh * 128, column c8 at
//                   + c8 * 16, byte kb = piece p of v[32 s + 16 kh + kb] (wgmma's K-major
//                   no-swizzle core matrices: LBO 128 between the k-halves, SBO 256 between
//                   the 3 BN / 8 column groups, so one m64n(3 BN)k32 takes h, m, l of BN
//                   columns);
//   [WG_XS, TILE)   per 4-column group j = c / 4, 144 bytes at WG_XS + 144 j: XS, column c's 8
//                   sub-block sums at 32 (c % 4) + 4 s, then XE, the group's four 2^E at
//                   128 + 4 (c % 4) (wg_xs, wg_xe). Why 4-column groups of 36 words and not
//                   every column's sums, then every 2^E: the epilogue's lane (g, t) reads
//                   columns 8 ct + 2 t and + 1 four sums a 16-byte load, and with 32 words a
//                   column lanes t and t + 2 fell 64 words apart, on the same banks (2-way);
//                   with 36 words a group they fall on 16 distinct banks, as do the 2^E pairs.
#define WG_XS (768 * WG_BN)
// Word offsets from WG_XS of column c's sub-block sums and its 2^E.
__device__ __forceinline__ int wg_xs(int c) { return 36 * (c >> 2) + 8 * (c & 3); }
__device__ __forceinline__ int wg_xe(int c) { return 36 * (c >> 2) + 32 + (c & 3); }
#define WG_TILE (804 * WG_BN)
#define WG_STAGE (WG_TILE + WG_MT * MMA_BLK)
// Dynamic shared memory of a block (cuda/mma.rs MMA_WG_SMEM): 128 bytes of mbarriers, the ring.
#define WG_SMEM (128 + WG_NST * WG_STAGE)

#if MMA_WG_ON
// wgmma, mbarrier and bulk-copy operations (PTX ISA 8.0, sm_90a), or the emulator's models.
__device__ __forceinline__ u32 wg_smem(const void* p) {
#if defined(PPN_EMU)
    return emu_smem_addr(p);
#else
    return (u32)__cvta_generic_to_shared(p);
#endif
}
__device__ __forceinline__ void wg_fence() {
#if defined(PPN_EMU)
    emu_wg_fence();
#else
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(PPN_EMU)
    emu_wg_commit();
#else
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// D's registers pinned in program order against the asm around them (the compiler sees no
// dependence between an accumulator and the wait that completes it): after a wgmma's issue
// and after its wait, so no read of D moves above the wait.
__device__ __forceinline__ void wg_fence_d(int (&d)[48]) {
#if !defined(PPN_EMU)
#pragma unroll
    for (int i = 0; i < 48; ++i) asm volatile("" : "+r"(d[i])::"memory");
#endif
}
// Until at most N of the thread's committed wgmma groups are still in flight.
template <int N>
__device__ __forceinline__ void wg_wait() {
#if defined(PPN_EMU)
    emu_wg_wait(N);
#else
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// The shared-memory matrix descriptor, no swizzle: start >> 4 at bits 0-13, LBO >> 4 at
// 16-29, SBO >> 4 at 32-45.
__device__ __forceinline__ u64 wg_desc(const void* p, u32 lbo, u32 sbo) {
    const u32 addr = wg_smem(p);
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16) |
           ((u64)((sbo & 0x3FFFF) >> 4) << 32);
}
// The descriptor of the matrix `off` bytes (a multiple of 16) past desc's: its start field
// advanced, computed once a stage instead of masked and shifted again for each sub-block
// (the ring ends below 2^18 bytes, so the 14-bit field never carries into LBO's).
__device__ __forceinline__ u64 wg_desc_at(u64 desc, u32 off) { return desc + (u64)(off >> 4); }
// D = A * B (scale-d 0: D written, never read): u8 A, the warp's 16 x 32 from registers in
// mma.sync m16n8k32's A layout (mma_q4k_afrag); s8 B, 32 x 96 K-major in shared memory
// (desc); s32 D, thread (g, t) of warp w holding rows 16 w + g (+ 8) x columns 8 ct + 2 t
// (+ 1) at d[4 ct + c] (c: bit 1 the row's + 8, bit 0 the column's + 1).
__device__ __forceinline__ void wg_mma_n96(int (&d)[48], const u32 (&a)[4], u64 desc) {
#if defined(PPN_EMU)
    emu_wgmma_n96_u8s8(d, a, desc);
#else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.s32.u8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
        "{%48, %49, %50, %51}, %52, p;\n}\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]),
          "=r"(d[7]), "=r"(d[8]), "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]),
          "=r"(d[14]), "=r"(d[15]), "=r"(d[16]), "=r"(d[17]), "=r"(d[18]), "=r"(d[19]),
          "=r"(d[20]), "=r"(d[21]), "=r"(d[22]), "=r"(d[23]), "=r"(d[24]), "=r"(d[25]),
          "=r"(d[26]), "=r"(d[27]), "=r"(d[28]), "=r"(d[29]), "=r"(d[30]), "=r"(d[31]),
          "=r"(d[32]), "=r"(d[33]), "=r"(d[34]), "=r"(d[35]), "=r"(d[36]), "=r"(d[37]),
          "=r"(d[38]), "=r"(d[39]), "=r"(d[40]), "=r"(d[41]), "=r"(d[42]), "=r"(d[43]),
          "=r"(d[44]), "=r"(d[45]), "=r"(d[46]), "=r"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#endif
}
__device__ __forceinline__ void mbar_init(u64* b, u32 n) {
#if defined(PPN_EMU)
    emu_mbar_init(b, n);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(wg_smem(b)), "r"(n) : "memory");
#endif
}
// The barriers' initialization visible to the async proxy (the bulk copies complete on them).
__device__ __forceinline__ void mbar_init_fence() {
#if defined(PPN_EMU)
    emu_fence_mbar_init();
#else
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// This thread's arrival on b, the phase then expecting `bytes` more of transactions.
__device__ __forceinline__ void mbar_expect(u64* b, u32 bytes) {
#if defined(PPN_EMU)
    emu_mbar_expect_tx(b, bytes);
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(wg_smem(b)), "r"(bytes)
                 : "memory");
#endif
}
// Until b's phase of `parity` has completed (its arrivals and transaction bytes).
__device__ __forceinline__ void mbar_wait(u64* b, u32 parity) {
#if defined(PPN_EMU)
    while (!emu_mbar_try_wait(b, parity)) {
    }
#else
    u32 done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(wg_smem(b)), "r"(parity)
            : "memory");
    } while (!done);
#endif
}
// One bulk copy of `bytes` (a multiple of 16, both ends 16-byte aligned) global -> shared by
// the copy engine, completing on b's transaction count.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, u32 bytes, u64* b) {
#if defined(PPN_EMU)
    emu_bulk_g2s(dst, src, bytes, b);
#else
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            wg_smem(dst)),
        "l"(src), "r"(bytes), "r"(wg_smem(b))
        : "memory");
#endif
}
// The generic proxy's accesses to shared memory before the async proxy's (the copy engine's
// writes of a refill after the warps' reads of the stage).
__device__ __forceinline__ void fence_proxy_async() {
#if defined(PPN_EMU)
    emu_fence_proxy_async();
#else
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// mma_prep_xg: mma_prep's integer form (Q4_K's digits, 2^E, sub-block sums, the norm and
// the plant: the same function mma_prep_sb, so the same bytes) laid out as XG (above) for
// the wgmma GEMM. grid (columns rounded up to WG_BN, ceil(n_sb / 8)), block 256: warp w of
// block (col, j) prepares super-block 8 j + w of column col into its staging copy of mma_prep's
// words, then moves them into the column's place in the tile. Columns past a.rows (the last
// block's) are zeros: computed by the GEMM, never stored.
__device__ __forceinline__ void mma_prep_xg_body(const MvArgs& a, u8* __restrict__ XG, int plant) {
    __shared__ float red[8];
    // Per warp: mma_prep's 256 XF words, then its 8 sub-block sums and 2^E.
    __shared__ __align__(16) u32 stg[8][256 + 16];
    pdl_trigger();
    pdl_wait();
    const int col = blockIdx.x, n = a.n_in, n_sb = (n + 255) >> 8;
    const int warp = threadIdx.x >> 5, L = threadIdx.x & 31, sb = blockIdx.y * 8 + warp;
    const int c = col % WG_BN;
    u8* tile = XG + ((size_t)(col / WG_BN) * n_sb + sb) * WG_TILE;
    u32* w = stg[warp];
    const bool live = col < a.rows;  // uniform over the block
    float inv = 0.0f;
    if (live && a.norm) inv = mma_prep_inv(a.x + (size_t)col * n, n, a.eps, red);
    if (sb >= n_sb) return;
    if (live) {
        mma_prep_sb(a.x + (size_t)col * n, a.norm, inv, n, sb, L, w, (float*)&w[264], (float*)&w[256],
                    true, plant && a.rows > 1);
        __syncwarp();
    }
    // 48 chunks of 16 bytes: sub-block s, piece p, k-half kh. XF word (s * 4 + t) * 8 + 2 p +
    // kh holds bytes k = 32 s + 16 kh + 4 t + i (mma_prep_ints), so chunk byte 4 t + i.
    for (int i = L; i < 48; i += 32) {
        const int s = i / 6, p = (i % 6) >> 1, kh = i & 1;
        const u32* q = w + s * 32 + 2 * p + kh;
        const uint4 v = live ? make_uint4(q[0], q[8], q[16], q[24]) : make_uint4(0u, 0u, 0u, 0u);
        *(uint4*)(tile + s * 96 * WG_BN + p * 32 * WG_BN + (c >> 3) * 256 + kh * 128 + (c & 7) * 16) = v;
    }
    if (L < 8) ((float*)(tile + WG_XS))[wg_xs(c) + L] = live ? __int_as_float((int)w[256 + L]) : 0.0f;
    if (L == 8) ((float*)(tile + WG_XS))[wg_xe(c)] = live ? __int_as_float((int)w[264]) : 0.0f;
}

// Thread 0's copies of super-block sb into stage q: the XG tile of the block's columns and the
// WG_MT m-tiles' weight blocks (past the launch's last m-tile: its last, computed, never
// stored), all completing on the stage's barrier.
__device__ __forceinline__ void wg_issue(const MvArgs& a, const u8* XG, u8* ring, u64* bar, int q, int sb,
                                         int n_sb, int n_mt, int mt0) {
    u8* st = ring + (size_t)q * WG_STAGE;
    mbar_expect(bar + q, WG_STAGE);
    bulk_g2s(st, XG + ((size_t)blockIdx.x * n_sb + sb) * WG_TILE, WG_TILE, bar + q);
    // Not unrolled: thread 0's registers in this branch are the kernel's tightest (ptxas
    // spilled there unrolled).
#pragma unroll 1
    for (int i = 0; i < WG_MT; ++i) {
        int m, o0;
        const u8* wb = mma_tile(a, min(mt0 + i, n_mt - 1), n_sb, MMA_BLK, &m, &o0);
        bulk_g2s(st + WG_TILE + i * MMA_BLK, wb + (size_t)sb * MMA_BLK, MMA_BLK, bar + q);
    }
}

// Sub-block s's wgmma of the stage whose descriptor is d0 (its weights at wt, the warp's):
// the lane's A fragment into af, then the warpgroup's m64n96k32 into D, committed as its own
// group, D pinned after the issue (wg_fence_d). af and D belong to the wgmma until a wait
// completes its group.
__device__ __forceinline__ void wg_sub_mma(u64 d0, const u8* wt, int lane, int s, u32 (&af)[4],
                                           int (&D)[48]) {
    const uint4 nib = *(const uint4*)(wt + (s >> 1) * 512 + lane * 16);
    mma_q4k_afrag(nib, s, af);
    wg_fence();
    wg_mma_n96(D, af, wg_desc_at(d0, s * 96 * WG_BN));
    wg_commit();
    wg_fence_d(D);
}

// mma_gemm_wg: the Q4_K GEMM (rows > 8; engine/mma.rs mma_gemm_wg picks it). grid
// (ceil(ncols / WG_BN), ceil(n_mt / WG_MT)), block WG_NWG * 128, WG_SMEM bytes of dynamic
// shared memory. The super-blocks in order (THE ORDER's y = y + v_sb), each: its stage's
// barrier waited, then per sub-block s each warp's A fragment (mma_q4k_afrag) and one
// wgmma (h | m | l products of its warpgroup's 64 rows x WG_BN columns; s + 1's issued before
// s's sums, two in flight, each with its own D and A-fragment registers, which the wgmma
// writes and reads asynchronously: a pair is reused, by s + 2, only after the wait that
// completed s), S_hm += sc_s (2^8 D_h + D_m), S_l += sc_s D_l (mma_q4k_dot's integers), then
// v_sb (mma_frag_values) and acc += v_sb; a block barrier (every warp done with the stage)
// and thread 0's refill of it NST super-blocks ahead. Mode 2: the up warp (odd m-tile) hands
// its sums to the gate warp (even, the same feature rows) through the ring, free once the
// walk is over.
__device__ __forceinline__ void mma_gemm_wg_body(const MvArgs& a, const u8* XG, int n_mt, int n_sb,
                                                 int ncols) {
    DYN_SHARED(u8, sm);
    u64* bar = (u64*)sm;
    u8* ring = sm + 128;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int mt0 = blockIdx.y * WG_MT, col0 = blockIdx.x * WG_BN;
    pdl_trigger();
    if (tid == 0) {
        for (int q = 0; q < WG_NST; ++q) mbar_init(bar + q, 1);
        mbar_init_fence();
    }
    __syncthreads();
    // XG is mma_prep_xg's output (the previous launch), y may be read (mode 1): every thread
    // waits before its first access; the weights are only read.
    pdl_wait();
    if (tid == 0)
        for (int q = 0; q < WG_NST && q < n_sb; ++q) wg_issue(a, XG, ring, bar, q, q, n_sb, n_mt, mt0);
    float acc[WG_NO];
#pragma unroll
    for (int o = 0; o < WG_NO; ++o) acc[o] = 0.0f;
    // The ring's descriptor; each stage's and sub-block's by offset from it (wg_desc_at).
    const u64 dring = wg_desc(ring, 128, 256);
    for (int sb = 0; sb < n_sb; ++sb) {
        const int q = sb % WG_NST;
        const u8* st = ring + (size_t)q * WG_STAGE;
        mbar_wait(bar + q, (u32)(sb / WG_NST) & 1u);
        __syncwarp();  // the warp converged again before the warpgroup's aligned wgmma
        const u8* wt = st + WG_TILE + warp * MMA_BLK;
        const uint4 sc = *(const uint4*)(wt + MMA_SC_OFF + g * 32);  // shared: plain loads
        int Shm[WG_NO], Sl[WG_NO];
#pragma unroll
        for (int o = 0; o < WG_NO; ++o) Shm[o] = Sl[o] = 0;
        // Two sub-blocks in flight: sub-block s + 1's wgmma issued into the other D before
        // sub-block s's sums (wait_group 1 leaves only s + 1's group open, so s's D is
        // complete when read; the other D's last reader, s - 1's sums, is done before).
        int D[2][3 * WG_NO];
        u32 af[2][4];
        const u64 d0 = wg_desc_at(dring, (u32)q * WG_STAGE);  // stage q's sub-block 0
        wg_sub_mma(d0, wt, lane, 0, af[0], D[0]);
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            if (s + 1 < 8) {
                wg_sub_mma(d0, wt, lane, s + 1, af[(s + 1) & 1], D[(s + 1) & 1]);
                wg_wait<1>();
            } else {
                wg_wait<0>();
            }
            wg_fence_d(D[s & 1]);
            const int kg = (int)mma_byte_at(sc.x, sc.y, s), k8 = (int)mma_byte_at(sc.z, sc.w, s);
#pragma unroll
            for (int o = 0; o < WG_NO; ++o) {
                const int k = (o & 2) ? k8 : kg;
                Shm[o] += k * (D[s & 1][o] * 256 + D[s & 1][WG_NO + o]);
                Sl[o] += k * D[s & 1][2 * WG_NO + o];
            }
        }
        // THE ORDER's v_sb of the thread's outputs and acc += v_sb.
        const uint4 mn = *(const uint4*)(wt + MMA_SC_OFF + g * 32 + 16);
        const uint2 dd = *(const uint2*)(wt + MMA_DD_OFF + g * 8);
        // Columns 8 ct + 2 t and + 1: wg_xs(8 ct + 2 t) = 72 ct + wg_xs(2 t) (column c + 1's
        // sums 8 words on, its 2^E 1), so one base a lane and a constant offset a ct.
        const float* xsS = (const float*)(st + WG_XS) + wg_xs(2 * t);
        const float* xeS = (const float*)(st + WG_XS) + wg_xe(2 * t);
#pragma unroll
        for (int ct = 0; ct < WG_BN / 8; ++ct) {
            float xa[8], xc[8], f[4], v[4];
#pragma unroll
            for (int s = 0; s < 8; ++s) {
                xa[s] = xsS[72 * ct + s];
                xc[s] = xsS[72 * ct + 8 + s];
            }
#pragma unroll
            for (int c = 0; c < 4; ++c) f[c] = mma_q4k_f32(Shm[4 * ct + c], Sl[4 * ct + c]);
            mma_frag_values(f, dd, mn, xa, xc, xeS[72 * ct], xeS[72 * ct + 1], v);
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[4 * ct + c] = __fadd_rn(acc[4 * ct + c], v[c]);
        }
        // Every warp done with stage q (its wgmma waited, its loads done) before the copy
        // engine overwrites it; the generic reads ordered before the async writes.
        __syncthreads();
        if (tid == 0 && sb + WG_NST < n_sb) {
            fence_proxy_async();
            wg_issue(a, XG, ring, bar, q, sb + WG_NST, n_sb, n_mt, mt0);
        }
    }
    const int mt = mt0 + warp;
    // Mode 2: the up warp's sums to its gate warp, through the ring (every copy has landed and
    // been read: the last refill is of super-block n_sb - 1, waited above, then a barrier).
    float* ex = (float*)ring + (size_t)(warp >> 1) * WG_NO * 32;
    if (a.mode == 2) {  // uniform
        if (warp & 1)
#pragma unroll
            for (int o = 0; o < WG_NO; ++o) ex[o * 32 + lane] = acc[o];
        __syncthreads();
        if (warp & 1) return;
    }
    if (mt >= n_mt) return;
    int m, o0;
    mma_tile(a, mt, n_sb, MMA_BLK, &m, &o0);
#pragma unroll
    for (int o = 0; o < WG_NO; ++o) {
        const int ct = o >> 2, c = o & 3;
        const int col = col0 + 8 * ct + 2 * t + (c & 1), row = o0 + g + ((c & 2) ? 8 : 0);
        if (col >= ncols) continue;
        if (a.mode == 2) mv_finish(a, 0, row, col, acc[o], ex[o * 32 + lane]);
        else mv_finish(a, m, row, col, acc[o], 0.0f);
    }
}
#define MMA_W0                                                                                   \
    extern "C" __global__ void __launch_bounds__(256) mma_prep_xg(MvArgs a, u8* __restrict__ XG, int plant) { \
        mma_prep_xg_body(a, XG, plant);                                                          \
    }
#define MMA_W1                                                                                   \
    extern "C" __global__ void __launch_bounds__(WG_NWG * 128, WG_MINB) mma_gemm_wg(MvArgs a, const u8* XG, int n_mt, \
                                                                          int n_sb, int ncols) { \
        mma_gemm_wg_body(a, XG, n_mt, n_sb, ncols);                                              \
    }
#endif  // MMA_WG_ON

// The kernels the engine launches (src/backend/cuda/mod.rs MMA_KERNELS). Decode: MT = 2
// m-tiles per block, KP = 8 or 16 warps (super-blocks in flight; the host picks by the
// launch's m-tile count, never by the batch); GEMM: the prototype's fastest variant
// (g2x2w4x4: 2 x 2 mma tiles per warp, 4 x 4 warps). Every one computes THE ORDER.
#define MMA_ARGS MvArgs a, const uint4* XF, const float* XE, const float* XS, int n_mt, int n_sb, int ncols
#define MMA_FARGS MvArgs a, int n_mt, int n_sb, int ncols, int plant
// The fused decode kernels (mma_decode_f8/f16: the same bodies with FUSE, no scratch; plant:
// the fault, as mma_prep's) are kernels of their own, not a branch in the others: one kernel
// holding both bodies took the register budget of the larger and spilled (ptxas, sm_90: 4-8
// bytes in four of the 32-element formats' kernels; each alone spills none). `red` is declared
// here, once per kernel.
template <int F, int MT, int KP, bool FUSE>
__device__ __forceinline__ void mma_decode_kernel(MMA_ARGS, int plant) {
    __shared__ __align__(16) float red[KP][MT * 128];
    mma_decode_body<F, MT, KP, FUSE>(a, XF, XE, XS, n_mt, n_sb, ncols, plant, red);
}
// The six kernels of format F's set, named with suffix SUF (empty for Q4_K, as before the
// other formats), one macro each so that a module can hold one of them.
#define MMA_K0(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(8 * 32, MMA_K8_MINB(F)) mma_decode_k8##SUF(MMA_ARGS) { \
        mma_decode_kernel<F, 2, 8, false>(a, XF, XE, XS, n_mt, n_sb, ncols, 0);                \
    }
#define MMA_K1(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(16 * 32) mma_decode_k16##SUF(MMA_ARGS) {     \
        mma_decode_kernel<F, 2, 16, false>(a, XF, XE, XS, n_mt, n_sb, ncols, 0);               \
    }
#define MMA_K2(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(4 * 4 * 32) mma_gemm##SUF(MMA_ARGS) {        \
        mma_gemm_body<F, 2, 2, 4, 4>(a, XF, XE, XS, n_mt, n_sb, ncols);                        \
    }
// The narrow GEMM (engine/mma.rs mma_gemm_narrow): mma_gemm_body with 2 x 1 tiles a warp and
// 4 warps a block, unbounded registers. For launches whose grid the 2 x 2 tiles leave short of
// warps (SmolLM2's 576-row matrices at 512 rows: 160 blocks of 4 warps, 7 % occupancy,
// BENCH.md issue 30 steps 35, 36): twice the warps, and no 128-register cap to spill under. The
// same body and walk, so THE ORDER and the same bits (kernel-emu runs it beside the others).
#define MMA_K3(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(4 * 32) mma_gemm_n##SUF(MMA_ARGS) {          \
        mma_gemm_body<F, 2, 1, 4, 1>(a, XF, XE, XS, n_mt, n_sb, ncols);                        \
    }
#define MMA_K4(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(8 * 32) mma_decode_f8##SUF(MMA_FARGS) {      \
        mma_decode_kernel<F, 2, 8, true>(a, nullptr, nullptr, nullptr, n_mt, n_sb, ncols, plant); \
    }
#define MMA_K5(F, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(16 * 32) mma_decode_f16##SUF(MMA_FARGS) {    \
        mma_decode_kernel<F, 2, 16, true>(a, nullptr, nullptr, nullptr, n_mt, n_sb, ncols, plant); \
    }
// The integer formats' 8-warp decode held to 128 registers, two blocks an SM (16 warps, as
// the f16 route had at 127): unbounded, ptxas gives Q4_K's 134 and Q6_K's 220, so one block
// an SM, half the warps on the launches that pick it (the 8B shape's gate|up, 896 blocks);
// bounded, Q4_K spills nothing and Q6_K 20 bytes. The other formats' 8-warp kernels keep
// their measured register counts (ptxas, sm_90: 159 to 192, one block an SM).
#define MMA_K8_MINB(F) (MmaF<F>::INTS ? 2 : 1)
#define MMA_KERNEL_SET(F, SUF) \
    MMA_K0(F, SUF) MMA_K1(F, SUF) MMA_K2(F, SUF) MMA_K3(F, SUF) MMA_K4(F, SUF) MMA_K5(F, SUF)
// The mixed decode (MMA_SET 6, engine/mma.rs mma_mix_split): ONE launch over Q4_K's matrices
// then Q6_K's, for a Q4_K_M file's q|k|v, whose v is Q6_K in about half the layers. The
// first mt_split m-tiles (even: a block's two m-tiles are of one format) are Q4_K's, the rest
// Q6_K's; each block runs its format's body, unchanged, over the launch's m-tile numbering
// (mma_tile maps a tile to its matrix; each matrix's blocks are its format's size). Both
// formats read mma_prep's integer pieces, so one prep serves the launch. Every output is its
// format's decode body's, so the bits of the two launches it replaces (kernel-emu checks it);
// what it saves is a prep and a decode launch in the layer's chain (BENCH.md issue 30 step 32).
template <int KP>
__device__ __forceinline__ void mma_decode_mix(MMA_ARGS, int mt_split) {
    __shared__ __align__(16) float red[KP][2 * 128];
    if ((int)blockIdx.x * 2 < mt_split) mma_decode_body<MF_Q4K, 2, KP, false>(a, XF, XE, XS, n_mt, n_sb, ncols, 0, red);
    else mma_decode_body<MF_Q6_K, 2, KP, false>(a, XF, XE, XS, n_mt, n_sb, ncols, 0, red);
}
#define MMA_M0                                                                                   \
    extern "C" __global__ void __launch_bounds__(8 * 32, 2) mma_decode_k8_mix(MMA_ARGS, int mt_split) { \
        mma_decode_mix<8>(a, XF, XE, XS, n_mt, n_sb, ncols, mt_split);                           \
    }
#define MMA_M1                                                                                   \
    extern "C" __global__ void __launch_bounds__(16 * 32) mma_decode_k16_mix(MMA_ARGS, int mt_split) { \
        mma_decode_mix<16>(a, XF, XE, XS, n_mt, n_sb, ncols, mt_split);                          \
    }
#if !defined(MMA_SET)
// Every kernel in one program (scripts/nvrtc-check.py compiles it so).
MMA_KERNEL_SET(MF_Q4K, )
MMA_KERNEL_SET(MF_Q8_0, _q8_0)
MMA_KERNEL_SET(MF_Q4_0, _q4_0)
MMA_KERNEL_SET(MF_Q4_1, _q4_1)
MMA_KERNEL_SET(MF_Q5_0, _q5_0)
MMA_KERNEL_SET(MF_Q6_K, _q6_k)
MMA_M0
MMA_M1
#if MMA_WG_ON
MMA_W0
MMA_W1
#endif
#elif MMA_SET >= 0
// The engine's modules: ONE kernel each, MMA_SLOT of format MMA_SET's set (src/backend/cuda/
// mma.rs mma_module_head), so a cold start compiles only the kernels its formats need, all
// at once on the host's cores; compiled alone, each kernel's code is the same as in the whole.
#define MMA_CAT_(a, b) a##b
#define MMA_CAT(a, b) MMA_CAT_(a, b)
#define MMA_ONE(F, SUF) MMA_CAT(MMA_K, MMA_SLOT)(F, SUF)
#if MMA_SET == 0
MMA_ONE(MF_Q4K, )
#elif MMA_SET == 1
MMA_ONE(MF_Q8_0, _q8_0)
#elif MMA_SET == 2
MMA_ONE(MF_Q4_0, _q4_0)
#elif MMA_SET == 3
MMA_ONE(MF_Q4_1, _q4_1)
#elif MMA_SET == 4
MMA_ONE(MF_Q5_0, _q5_0)
#elif MMA_SET == 5
MMA_ONE(MF_Q6_K, _q6_k)
#elif MMA_SET == 6 && MMA_SLOT == 0
MMA_M0
#elif MMA_SET == 6 && MMA_SLOT == 1
MMA_M1
#elif MMA_SET == 7 && !MMA_WG_ON
#error "MMA_SET 7 (the wgmma GEMM) is built for sm_90a only (cuda/mma.rs DevCtx::mma_wg)"
#elif MMA_SET == 7 && MMA_SLOT == 0
MMA_W0
#elif MMA_SET == 7 && MMA_SLOT == 1
MMA_W1
#else
#error "MMA_SET names no format of MMA_FORMATS"
#endif
#endif

#endif
