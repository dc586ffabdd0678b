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
    unsigned short s = (unsigned short)(h & 0xFFFFu);
#if defined(PPN_EMU)  // the kernel emulator (tests/kernel-emu): no PTX on the CPU
    return emu_h2f(s);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
#endif
}

__device__ __forceinline__ u32 comp(const uint4& v, int g) {
    return g == 0 ? v.x : g == 1 ? v.y : g == 2 ? v.z : v.w;
}

// The quants of one word, as f32 values scaled by 2^-24, exactly: w holds 4 bytes b_j, each
// the quant plus the format's BIAS (0 <= b_j < 2 * BIAS, or < 64 without one). Bytes 0 and 2
// masked in place, and bytes 1 and 3 moved down, are f16 pairs whose bits are the subnormals
// b_j * 2^-24 (every b_j < 1024 is one); an f16x2 subtraction of BIAS * 2^-24 gives
// (b_j - BIAS) * 2^-24, exact (a subnormal difference of subnormals); the widening to f32 is
// exact. Why: the previous decode (byte into an f32 mantissa, then an f32 subtraction) spent
// two instructions per element, one of them on the integer pipe the rest of the kernel loads;
// here a word costs one LOP3 and one PRMT, plus f16 conversions that run on the FMA pipe.
// mvq_close multiplies the run's scale by 2^24 back: a product of powers of two, so every sum
// is the previous kernel's exactly scaled by 2^-24 and fmaf(A * 2^24, s, acc) rounds as
// fmaf(A, s', acc) did (same bits) while partial sums stay above 2^-102 in magnitude.
template <int BIAS>
__device__ __forceinline__ void unpack4(u32 w, float& q0, float& q1, float& q2, float& q3) {
    u32 even = w & 0x00FF00FFu;
    u32 odd = __byte_perm(w, 0u, 0x4341);
    if (BIAS) {
        const u32 b = (u32)BIAS * 0x00010001u;  // BIAS * 2^-24 in both f16 halves
#if defined(PPN_EMU)
        even = emu_hsub2(even, b);
        odd = emu_hsub2(odd, b);
#else
        asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(even) : "r"(b));
        asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(odd) : "r"(b));
#endif
    }
#if defined(PPN_EMU)
    q0 = emu_h2f((unsigned short)even);
    q2 = emu_h2f((unsigned short)(even >> 16));
    q1 = emu_h2f((unsigned short)odd);
    q3 = emu_h2f((unsigned short)(odd >> 16));
#else
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}"
        : "=f"(q0), "=f"(q2) : "r"(even));
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}"
        : "=f"(q1), "=f"(q3) : "r"(odd));
#endif
}
#define MVQ_UNSCALE 16777216.0f  // 2^24: what unpack4's values are scaled by

// Bits 0..3 of x to bit 4 of bytes 0..3.
__device__ __forceinline__ u32 spread4(u32 x) {
    return ((x & 1u) | ((x & 2u) << 7) | ((x & 4u) << 14) | ((x & 8u) << 21)) << 4;
}

// One unit of one weight row: its raw registers, loaded by `load`, decoded by `ab` (the
// runs' scale A and offset B) and `word` (the 4 quant bytes of run r, group g, each plus the
// format's BIAS, so that b - BIAS is the signed quant). e0: the unit's first element;
// run 1 starts GAP elements after run 0.
template <int FMT> struct Unit;

// Where one lane's units of one weight row are: set once per row (init: the lane's unit of
// round 0, u = lane) so that round `it` (unit it * 32 + lane) is the same addresses plus
// it times a per-format stride (32 units are whole blocks / super-blocks of every format).
// Why: recomputing a unit's addresses from u on every round (64-bit multiplies, shifts) cost
// about as many integer instructions as the decode, on the pipe the decode needs.
struct Cur {
    const u8* a;
    const u8* b;
    const u8* c;
    const u8* d;
    int lane;  // the lane (Q8_0: where its rounds' second halves start, Unit<FMT_Q8_0>)
};

// Q4_K repacked: per super-block qs 128 | scales 16 (for unit pair p: scale 2p, scale 2p+1,
// min 2p, min 2p+1, unpacked), then a plane of (d, dmin) per super-block. Unit u: super-block
// u / 8, quant chunk c = u % 8: low nibbles are sub-block 2(c/2), high nibbles 2(c/2)+1,
// elements (c/2)*64 + (c%2)*16 + i and +32. Q5_K: qh 32 | qs 128 | scales 16, the same plane.
template <int FIVE>
struct UnitK4 {
    static constexpr int GAP = 32;
    static constexpr int BIAS = 0;
    static constexpr int SB = FIVE ? 176 : 144;
    uint4 q, qh;
    u32 sc, dd;
    int c;
    __device__ __forceinline__ static void init(Cur& k, const u8* row, int lane, int nu) {
        const int sb = lane >> 3, c = lane & 7;
        const u8* b = row + (size_t)sb * SB;
        k.a = b + (FIVE ? 32 : 0) + 16 * c;
        k.b = b + SB - 16 + 4 * (c >> 1);
        k.c = row + (size_t)(nu >> 3) * SB + 4 * sb;
        k.d = b + 16 * (c & 1);
        k.lane = lane;
    }
    // Round it: super-blocks 4 it + lane / 8, the same chunk c = lane % 8.
    __device__ __forceinline__ void load(const Cur& k, int it) {
        const size_t o = (size_t)it * (4 * SB);
        c = k.lane & 7;
        q = ldw16(k.a + o);
        if (FIVE) qh = ldw16(k.d + o);
        sc = ldw4(k.b + o);
        dd = ldw4(k.c + 16 * it);
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
    static constexpr int BIAS = 32;
    uint4 ql, qh;
    u32 sc;
    float d;
    int c;
    __device__ __forceinline__ static void init(Cur& k, const u8* row, int lane, int nu) {
        const int sb = lane >> 3, c = lane & 7, hh = c >> 2, t = c & 3;
        const u8* b = row + (size_t)sb * 208;
        k.a = b + hh * 64 + 16 * t;
        k.b = b + 128 + hh * 32 + 16 * (t & 1);
        k.c = b + 192 + 2 * c;  // this unit's two scales (the repack put them side by side)
        k.d = row + (size_t)(nu >> 3) * 208 + 2 * sb;
        k.lane = lane;
    }
    __device__ __forceinline__ void load(const Cur& k, int it) {
        const size_t o = (size_t)it * (4 * 208);
        c = k.lane & 7;
        ql = ldw16(k.a + o);
        qh = ldw16(k.b + o);
        sc = __ldg((const unsigned short*)(k.c + o));
        d = h2f(__ldg((const unsigned short*)(k.d + 8 * it)));
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

// Q8_0 repacked: the quant plane in rounds of 32 blocks (the last round m = nu % 32 blocks
// when nu is not a multiple of 32), a round holding the first 16 quant bytes of each of its
// blocks in block order, then the last 16 of each (crate::quant::repack::q8_half_at), then
// the d's. Elements 32u + j. Why halves: a lane's unit is 32 bytes; laid out whole, each of
// its two 16-byte loads touched every 32-byte sector of the warp's 1 KB at half use, so L1
// looked up twice the sectors (L2 still served each once: Nsight Compute, BENCH.md step 43).
// By halves, each load is 512 contiguous bytes of the round: +3 to +5 % eager on the Q8_0
// files, measured only in the graph (alone, the launches were no faster).
template <> struct Unit<FMT_Q8_0> {
    static constexpr int GAP = 16;
    static constexpr int BIAS = 128;
    uint4 q0, q1;
    float d;
    // lane: the unit of round 0 (the plain walk's lane; the dense walk's unit, any u < nu).
    // k.lane holds, instead of the lane, where each round's second halves start: 64 f + m,
    // f = the whole rounds from this cursor's first round on (their second halves 512 bytes
    // in), m = the blocks of the row's partial last round (16 m bytes in). One int where a
    // field for nu spilled the one-row two-rows-a-warp kernel at its 80 registers (ptxas).
    __device__ __forceinline__ static void init(Cur& k, const u8* row, int lane, int nu) {
        k.a = row + 1024 * (size_t)(lane >> 5) + 16 * (lane & 31);
        k.b = row + 32 * (size_t)nu + 2 * lane;
        k.c = k.d = row;
        k.lane = 64 * ((nu >> 5) - (lane >> 5)) + (nu & 31);
    }
    __device__ __forceinline__ void load(const Cur& k, int it) {
        const size_t o = (size_t)it * 1024;
        const int h1 = it < (k.lane >> 6) ? 512 : 16 * (k.lane & 63);
        q0 = ldw16(k.a + o);
        q1 = ldw16(k.a + o + h1);
        d = h2f(__ldg((const unsigned short*)(k.b + 64 * it)));
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
    static constexpr int BIAS = FMT == FMT_Q4_0 ? 8 : FMT == FMT_Q5_0 ? 16 : 0;
    static constexpr int SZ = FIVE ? 8 : MIN ? 4 : 2;  // scale bytes per block
    uint4 q;
    u32 s, qh;
    __device__ __forceinline__ static void init(Cur& k, const u8* row, int lane, int nu) {
        k.a = row + 16 * (size_t)lane;
        k.b = row + 16 * (size_t)nu + SZ * lane;
        k.c = k.d = row;
        k.lane = lane;
    }
    __device__ __forceinline__ void load(const Cur& k, int it) {
        q = ldw16(k.a + (size_t)it * 512);
        const u8* m = k.b + (size_t)it * (32 * SZ);
        if (FIVE) {
            uint2 v = ldw8(m);
            s = v.x;
            qh = v.y;
        } else if (MIN) {
            s = ldw4(m);
            qh = 0;
        } else {
            s = __ldg((const unsigned short*)m);
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
// order), x read from the swizzled rows X (stride n) at float4 slot sv = swz(v), v the
// group's float4 of the row.
template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_group(const Unit<FMT> (&w)[NW], int sv, int r, int g,
                                          const float* X, int n, float (&s)[NW][RT]) {
    typedef Unit<FMT> U;
    float4 xv[RT];
#pragma unroll
    for (int b = 0; b < RT; b++) xv[b] = ((const float4*)(X + (size_t)b * n))[sv];
#pragma unroll
    for (int i = 0; i < NW; i++) {
        float q0, q1, q2, q3;  // the quants * 2^-24 (unpack4)
        unpack4<U::BIAS>(w[i].word(r, g), q0, q1, q2, q3);
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
        A = A * MVQ_UNSCALE;  // s is the run's sum * 2^-24 (unpack4): the same product
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
// ONE_SWZ (the dense walk): group g of run r is float4 v = v0 + g of the row, v0 = (e0 +
// GAP r) / 4 a multiple of 4 (every format's e0 and GAP are multiples of 16), so v's bits
// 3.. are v0's and swz(v) = swz(v0) ^ g: one swizzle a run, not one a group. The same slots;
// fewer integer instructions on the pipe the decode needs (gemma3's heads on an H200,
// BENCH.md step 18: Q5_0 84.0 -> 77.7 us, Q8_0 92.9 -> 88.4 us). Not in the plain walks:
// holding both runs' slots raised ptxas's spills in several of their modules (Q6_K at 8
// rows: 72 -> 236 bytes).
template <int FMT, int RT, int NW, bool ONE_SWZ = false>
__device__ __forceinline__ void mvq_unit(const Unit<FMT> (&w)[NW], int u, const float* X, int n,
                                         const float* xsum, float (&acc)[NW][RT]) {
    typedef Unit<FMT> U;
    const int e0 = U::e0(u), n16 = n >> 4;
    static_assert(U::GAP % 16 == 0, "a run must start at a multiple of 4 float4s");
    const int sv0 = swz(e0 / 4), sv1 = swz((e0 + U::GAP) / 4);
    // Run r's group g: its float4's slot.
    auto slot = [&](int r, int g) {
        return ONE_SWZ ? (r ? sv1 : sv0) ^ g : swz((e0 + U::GAP * r) / 4 + g);
    };
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
                mvq_group<FMT, RT, NW>(w, slot(r, g), r, g, X, n, s[r]);
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
                mvq_group<FMT, RT, NW>(w, slot(r, g), r, g, X, n, s);
            mvq_close<FMT, RT, NW>(w, (e0 + U::GAP * r) >> 4, r, xsum, n16, s, acc);
        }
    }
}

template <int M> struct Log2 { static constexpr int v = 1 + Log2<M / 2>::v; };
template <> struct Log2<1> { static constexpr int v = 0; };

// One level of tree32_split: n values (v[o / RT][o % RT], o < n) at xor distance d. A
// template per level, so every index is a constant (rolled loops with a runtime bound
// index the accumulators dynamically, which puts them on the stack).
template <int N, int NW, int RT>
__device__ __forceinline__ void split_level(float (&v)[NW][RT], int lane, int d) {
    if constexpr (N > 1) {
        const bool up = (lane & d) != 0;
#pragma unroll
        for (int k = 0; k < N / 2; k++) {
            const int h = k + N / 2;
            const float lo = v[k / RT][k % RT], hi = v[h / RT][h % RT];
            const float send = up ? lo : hi, keep = up ? hi : lo;
            v[k / RT][k % RT] = keep + __shfl_xor_sync(0xffffffffu, send, d);
        }
        split_level<N / 2, NW, RT>(v, lane, d >> 1);
    }
}

// tree32 of each of the M = NW * RT values per lane (v[o / RT][o % RT] is value o; M a
// power of two, 2..32), the warp's sums computed once instead of M times: at xor distance
// d = 16, 8, .. (tree32's order), while a lane holds n > 1 values it keeps the half whose
// index bit (n / 2) equals its lane bit d, sends the other half to lane ^ d and adds what
// it receives to what it kept (own + partner, as tree32); with one value left, tree32's
// remaining levels. Every sum is tree32's pairwise sum at the same level, so each output
// has tree32's bits; output o ends in the lanes (o << (5 - log2 M)) .. + (1 << (5 - log2
// M)) - 1. Why: an 8-row tile of 4 weight rows spent 160 shuffles and adds per group on
// tree32 (the shuffle pipe issues a quarter of the FMA pipe's rate), here 31.
template <int NW, int RT>
__device__ __forceinline__ float tree32_split(float (&v)[NW][RT], int lane) {
    constexpr int M = NW * RT;
    split_level<M, NW, RT>(v, lane, 16);
    float a = v[0][0];
#pragma unroll
    for (int d = 16 >> Log2<M>::v; d > 0; d >>= 1) a = a + __shfl_xor_sync(0xffffffffu, a, d);
    return a;
}

// One item of a warp's walk: the next item's units load into `nxt` (its group's cursors set
// first when it starts a group), then the current one's (in `cur`) are multiplied in, and a
// finished group is reduced (tree32) and written. Returns whether an item is left.
template <int FMT, int RT, int NW, typename RowOf>
__device__ __forceinline__ bool mvq_item(const MvArgs& a, int f0, int features, int groups, int nf,
                                         bool gu, int all_warps, int rounds, int nu, int lane,
                                         int r0, RowOf& row_of, Cur (&k)[NW],
                                         Unit<FMT> (&cur)[NW], Unit<FMT> (&nxt)[NW], int& grp,
                                         int& it, const float* X, int n, const float* xsum,
                                         float (&acc)[NW][RT]) {
    int ngrp = grp, nit = it + 1;
    if (nit == rounds) {
        // The current item's units are loaded already: its cursors may move on.
        nit = 0;
        ngrp = grp + all_warps;
        if (ngrp < groups) {
#pragma unroll
            for (int i = 0; i < NW; i++) Unit<FMT>::init(k[i], row_of(ngrp, i), lane, nu);
        }
    }
    if (ngrp < groups && nit * 32 + lane < nu) {
#pragma unroll
        for (int i = 0; i < NW; i++) nxt[i].load(k[i], nit);
    }
    const int u = it * 32 + lane;
    if (u < nu) mvq_unit<FMT, RT, NW>(cur, u, X, n, xsum, acc);
    if (it == rounds - 1) {
        // The group is done: every lane reaches the shuffles (the branch is uniform).
        // Lane j finishes (feature slot j / RT, batch row j % RT): output j = i * RT + b,
        // and in mode 2 the up row's output j + nf * RT.
        float sv = 0.0f, tv = 0.0f;
        constexpr int M = NW * RT;
        if (a.plant) {  // uniform: --fault row-count-order only (kernels/matvec.cu plant_pair)
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) acc[i][b] = plant_pair(acc[i][b], lane);
        }
        if constexpr ((M & (M - 1)) == 0 && M >= 2) {
            // tree32's sums, M per lane, reduced by transposing halves (tree32_split,
            // in place: acc[o / RT][o % RT] is output o).
            const float r = tree32_split<NW, RT>(acc, lane);
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) acc[i][b] = 0.0f;
            constexpr int SH = 5 - Log2<M>::v;  // output o sits in lanes o << SH ..
            sv = __shfl_sync(0xffffffffu, r, (lane << SH) & 31);
            if (gu) tv = __shfl_sync(0xffffffffu, r, ((lane + nf * RT) << SH) & 31);
        } else {
#pragma unroll
            for (int i = 0; i < NW; i++)
#pragma unroll
                for (int b = 0; b < RT; b++) acc[i][b] = tree32(acc[i][b]);
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
        }
        if (lane < nf * RT) {
            int o, f = f0 + grp * nf + lane / RT;
            int mi = mv_locate(a, features, f, &o);
            if (mi >= 0) mv_finish(a, mi, o, r0 + lane % RT, sv, tv);
        }
    }
    grp = ngrp;
    it = nit;
    return grp < groups;
}

// The staged prologue of rows up to 4096 wide (n4 = n / 4 <= 1024 float4s, so each of the
// 256 threads holds at most 4 of a row): every load of the tile issues at once, then per row
// the exact sumsq256 of those values (thread t: float4s t + 256k in k order, x y z w each;
// tree32 per warp; the 8 warp sums ((w0 + w1) + (w2 + w3)) + ((w4 + w5) + (w6 + w7))), inv =
// 1 / sqrt(ss / n + eps) as the general path, and each thread stores its own float4s
// (x * inv) * g into the swizzled tile. The values, adds and trees are sumsq256's and the
// general path's, so the bits are; only when the loads issue changes. `red` holds 8 * RT.
template <int RT>
__device__ __forceinline__ void mvq_stage_fast(const MvArgs& a, const float* X, int n, float* smem,
                                               float* red, float* inv) {
    const int n4 = n >> 2, t = threadIdx.x;
    float4 q[RT][4];
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int b = 0; b < RT; b++)
            if (t + 256 * k < n4) q[b][k] = ((const float4*)(X + (size_t)b * n))[t + 256 * k];
    if (a.norm) {
        float4 g[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (t + 256 * k < n4) g[k] = ((const float4*)a.norm)[t + 256 * k];
#pragma unroll
        for (int b = 0; b < RT; b++) {
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (t + 256 * k < n4) {
                    acc = acc + q[b][k].x * q[b][k].x;
                    acc = acc + q[b][k].y * q[b][k].y;
                    acc = acc + q[b][k].z * q[b][k].z;
                    acc = acc + q[b][k].w * q[b][k].w;
                }
            acc = tree32(acc);
            if ((t & 31) == 0) red[8 * b + (t >> 5)] = acc;
        }
        __syncthreads();
        if (t < RT) {
            const float* w = red + 8 * t;
            float ss = ((w[0] + w[1]) + (w[2] + w[3])) + ((w[4] + w[5]) + (w[6] + w[7]));
            inv[t] = 1.0f / sqrtf(ss / (float)n + a.eps);
        }
        __syncthreads();
#pragma unroll
        for (int b = 0; b < RT; b++) {
            const float iv = inv[b];
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (t + 256 * k < n4) {
                    float4 x = q[b][k];
                    x.x = (x.x * iv) * g[k].x;
                    x.y = (x.y * iv) * g[k].y;
                    x.z = (x.z * iv) * g[k].z;
                    x.w = (x.w * iv) * g[k].w;
                    q[b][k] = x;
                }
        }
    }
#pragma unroll
    for (int b = 0; b < RT; b++)
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (t + 256 * k < n4) ((float4*)smem)[b * n4 + swz(t + 256 * k)] = q[b][k];
    __syncthreads();
}

// The weight row of feature slot i of group grp, groups of nf features from feature f0 on
// (mode 2: slots nf..2nf - 1 are the up rows of slots 0..nf - 1); a dead slot reads row 0 of
// matrix 0.
__device__ __forceinline__ const u8* mvq_row(const MvArgs& a, int f0, int features, int nf,
                                             bool gu, int grp, int i) {
    int o;
    int f = f0 + grp * nf + (gu ? i % nf : i);
    int m = mv_locate(a, features, f, &o);
    if (m < 0) return a.m[0].w;
    if (gu && i >= nf) return a.m[1].w + (size_t)o * a.m[1].row_bytes;
    return MV_FIELD(a, m, w) + (size_t)o * MV_FIELD(a, m, row_bytes);
}

#if defined(MVQ_PRE)
// gemma3's post-norm residual add, folded into a one-row launch's prologue (compiled only into
// the modules built for it, MVQ_PRE: measured on an H200, the larger one-row kernels cost
// SmolLM2's eager 2 %, a model with no post-norm; the host sets a.res_o only for one-row
// staged tiles of rows up to MVQ_PRE_MAX wide: engine/matvec.rs
// pre_fuses): x' = x + (o * inv) * w in add_residual's expressions and order (kernels/norm.cu:
// warp 0's lane l adds o[i] * o[i] for i = l, l + 32, ... in increasing i, then tree32; inv =
// 1 / sqrt(ss / n + eps)), so x' has the standalone kernel's bits. Every block forms x' from
// x and o itself in `xr` (3 n floats of its shared memory: o, x and w staged in one round
// trip, x' written over o), where the prologue then reads its row, and block (0, 0) also
// writes x' to a.res_out, a buffer this launch does not read (x and o are the previous
// launches' outputs; no block waits for another). Why: gemma3 adds twice a layer, and as
// launches of their own the adds cost about 5.5 us each, 36 a token. Staged through shared
// memory, not held in registers: held, they spilled the Q8_0 gate|up kernel (ptxas).
// `red`: red[0] carries inv.
#define MVQ_PRE_MAX 4096
__device__ __forceinline__ const float* mvq_pre_add(const MvArgs& a, const float* X, int r0,
                                                    float* xr, float* red) {
    const int n = a.n_in, n4 = n >> 2, t = threadIdx.x;
    const float4* o4 = (const float4*)(a.res_o + (size_t)r0 * n);
    const float4* x4 = (const float4*)X;
    const float4* w4 = (const float4*)a.res_w;
    float4* s4 = (float4*)xr;  // [0, n4) o then x', [n4, 2 n4) x, [2 n4, 3 n4) w
#pragma unroll 1
    for (int v = t; v < n4; v += blockDim.x) {
        const float4 ov = o4[v], xv = x4[v], wv = w4[v];
        s4[v] = ov;
        s4[n4 + v] = xv;
        s4[2 * n4 + v] = wv;
    }
    __syncthreads();
    if (t < 32) {
        const float ss = sumsq32(xr, n);  // add_residual's order (common.cu)
        if (t == 0) red[0] = 1.0f / sqrtf(ss / (float)n + a.eps);
    }
    __syncthreads();
    const float inv = red[0];
    float4* out = blockIdx.x == 0 && blockIdx.y == 0 ? (float4*)(a.res_out + (size_t)r0 * n)
                                                     : nullptr;
#pragma unroll 1
    for (int v = t; v < n4; v += blockDim.x) {
        const float4 ov = s4[v], xv = s4[n4 + v], wv = s4[2 * n4 + v];
        float4 y;
        y.x = xv.x + (ov.x * inv) * wv.x;
        y.y = xv.y + (ov.y * inv) * wv.y;
        y.z = xv.z + (ov.z * inv) * wv.z;
        y.w = xv.w + (ov.w * inv) * wv.w;
        s4[v] = y;  // thread t rewrites only the float4s it read
        if (out) out[v] = y;
    }
    __syncthreads();  // xr complete for every thread; red[0] read by all before its reuse
    return xr;
}

// Where mvq_pre_add's rows lie in a vectorized launch's dynamic shared memory: after the
// tile (when staged), the run sums and the norm factors, at a 16-byte boundary
// (engine/matvec.rs mvq_smem).
template <int FMT, int RT, bool XS>
__device__ __forceinline__ int mvq_pre_at(int n) {
    const int used = (XS ? RT * n : 0) + (HasMin<FMT>::v ? RT * (n >> 4) : 0) + RT;
    return (used + 3) & ~3;
}
#endif

// What every vectorized walk does after pdl_wait and before its first dot: the tile of RT
// rows from x (row r0 on) into shared memory when XS (normalized when the launch has a
// norm), and for a format with offsets the run sums of the (normalized) x. Returns where
// the walk reads x: the staged tile, or the global rows stage_rows laid out. FAST: the
// kernel holds the one-trip prologue (see the caller).
template <int FMT, int RT, bool FAST, bool XS>
__device__ __forceinline__ const float* mvq_prologue(const MvArgs& a, int r0, float* smem,
                                                     float* red, const float** xsum_out) {
    const int n = a.n_in;
    const float* X = a.x + (size_t)r0 * n;
    // gemma3's post-norm add first, when the host folded it in (one-row staged tiles only:
    // a laid-out tile's x is stage_rows' swizzled copy).
#if defined(MVQ_PRE)
    if constexpr (RT == 1 && XS) {
        if (a.res_o) X = mvq_pre_add(a, X, r0, smem + mvq_pre_at<FMT, RT, XS>(n), red);
    }
#endif
    float* xsum = smem + (XS ? RT * n : 0);
    float* inv = xsum + (HasMin<FMT>::v ? RT * (n >> 4) : 0);  // RT floats
    const bool fast = XS && FAST && n <= 4096;
    if (fast) {
        // The whole tile in one round trip (rows up to 4096 wide: 4 float4s of each row per
        // thread): thread t loads float4s t, t + 256, t + 512, t + 768 of every row at once,
        // forms each row's sumsq256 from them (same loads, same adds in the same order, same
        // trees: same bits), and stores its own float4s normalized. Why: the general path
        // below walks the rows one at a time, one L2 round trip each for the norm and one per
        // 1024 float4s for the tile, ~16 dependent trips (~10 us) for an 8-row tile before
        // any weight is multiplied.
        // Compiled only into the kernels that take it (a runtime `fast` alone would still
        // instantiate it, and its registers, everywhere).
        if constexpr (FAST) mvq_stage_fast<RT>(a, X, n, smem, red, inv);
    } else if (XS && a.norm) {
        // Only a staged launch normalizes (stage_rows lays out the others, with the same
        // expressions): sumsq256 over the global row (the whole block, row by row), then
        // crate::math::rms_norm's inv = 1 / sqrt(ss / n + eps), written by thread 0 (every
        // thread holds the same ss) and published to the block by the barrier below.
        for (int r = 0; r < RT; r++) {
            float ss = sumsq256(X + (size_t)r * n, n, red);
            if (threadIdx.x == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
        }
        __syncthreads();
    }
    if (XS && !fast) {
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
    *xsum_out = xsum;
    return XS ? smem : X;
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
// The walk covers features f0 .. features - 1 with blocks bx of nb (a launch of one format:
// 0, all of them, blockIdx.x of gridDim.x; the mixed launch, mvq_mix_body, gives each
// format's features its own share of the grid). Which block and warp computes a feature is
// timing only.
template <int FMT, int RT, int NW, bool XS>
__device__ __forceinline__ void mvq_run(const MvArgs& a, int f0, int features, int bx, int nb,
                                        float* smem, float* red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = a.n_in, nu = n >> 5, rounds = (nu + 31) >> 5;
    const int r0 = blockIdx.y * RT;
    const bool gu = a.mode == 2;
    const int nf = gu ? NW / 2 : NW;
    const int groups = (features - f0 + nf - 1) / nf;
    const int all_warps = nb * MV_WARPS;
    auto row_of = [&](int grp, int i) -> const u8* {
        return mvq_row(a, f0, features, nf, gu, grp, i);
    };
    int grp = bx * MV_WARPS + warp, it = 0;
    Cur k[NW];  // this warp's current group's rows (lane cursors)
    Unit<FMT> ua[NW], ub[NW];
#pragma unroll
    for (int i = 0; i < NW; i++) Unit<FMT>::init(k[i], row_of(grp < groups ? grp : 0, i), lane, nu);
    // The first item's weights load before the wait: they are read-only.
    if (grp < groups && lane < nu) {
#pragma unroll
        for (int i = 0; i < NW; i++) ua[i].load(k[i], 0);
    }
    pdl_wait();
    // Rows up to 4096 wide take the one-trip prologue in the four-rows-per-warp kernels (tiles
    // of 5..8 rows, up to 255 registers) and in one-row tiles of the 32-element-block formats
    // (a norm launch: one trip instead of two, the sumsq and the tile). Not in the others:
    // 80..128-register kernels holding 2..4 rows' float4s, or a K-quant's larger units, spill
    // (cuobjdump: Q5_K/Q6_K one-row 2-rows-per-warp kernels 48 -> 104 bytes of stack, 2..8-row
    // tiles 200+).
    constexpr bool FAST_KERNEL = (NW == 4 && RT >= 4) || (RT == 1 && FMT <= FMT_Q8_0);
    const float* xsum;
    const float* X = mvq_prologue<FMT, RT, FAST_KERNEL, XS>(a, r0, smem, red, &xsum);
    float acc[NW][RT];
#pragma unroll
    for (int i = 0; i < NW; i++)
#pragma unroll
        for (int b = 0; b < RT; b++) acc[i][b] = 0.0f;
    // Items (group, round) in order; the current item's units are in one of ua / ub and the
    // next item's load into the other before the current one computes, so loads stay in
    // flight across rounds and groups. Two items per trip, the buffers' roles swapped, so no
    // unit is copied between registers.
    while (grp < groups) {  // uniform over the warp
        if (!mvq_item<FMT, RT, NW>(a, f0, features, groups, nf, gu, all_warps, rounds, nu, lane,
                                   r0, row_of, k, ua, ub, grp, it, X, n, xsum, acc))
            break;
        mvq_item<FMT, RT, NW>(a, f0, features, groups, nf, gu, all_warps, rounds, nu, lane, r0,
                              row_of, k, ub, ua, grp, it, X, n, xsum, acc);
    }
}

// The dense one-row walk (RT = 1) of rows narrower than 32 units (n_in < 1024, so a row is
// one round of the walk above, with only nu = n_in / 32 of its 32 lanes holding a unit:
// 20 on gemma3's 640-wide rows, 18 on SmolLM2's 576). Here a warp's group is MVD_ROWS rows
// and their G * nu units are dealt to the 32 lanes densely, unit g of the group (row g / nu,
// unit g % nu) in round g / 32 to lane g % 32, so every lane holds a unit in every round
// but the group's last. Why: the vocabulary head of those models (262144 rows on gemma3) is
// the biggest matvec of a token, and it ran at a third of the bandwidth with 12 of 32 lanes
// idle in every load and every FMA.
// The bits are the walk above's: a unit's value is what its lane there computes for it (a
// one-round row's lane holds one unit: acc = 0, then mvq_unit), computed here by whichever
// lane holds it; the values go to shared memory at (row, unit), the unused slots nu..31
// hold 0.0f as the idle lanes' accumulators do, and lane l then reads slot l of every row:
// exactly the value lane l holds there, so tree32_split (tree32's sums, as every variant
// reduces) and the planted order act on the same values in the same lanes.
#define MVD_ROWS 8
#define MVD_STRIDE 33  // floats a row's slots take: lanes storing one unit index of two rows
                       // in a round land in different banks

// A position of a warp's dense walk: group grp, round it, and this lane's unit there (row si
// of the group, unit su of the row). Two walk the same items: the loads' (ahead) and the
// multiplies' (behind).
struct MvdPos {
    int grp, it, si, su;
};

// The walk's constants: per lane, its unit in a group's round 0 (i0, u0) and how far 32
// units move it (di rows, du units).
struct MvdWalk {
    int groups, rounds, units, nu, all_warps, i0, u0, di, du;
    __device__ __forceinline__ void step(MvdPos& p) const {
        p.it++;
        p.si += di;
        p.su += du;
        if (p.su >= nu) {
            p.su -= nu;
            p.si++;
        }
        if (p.it == rounds) {
            p.it = 0;
            p.grp += all_warps;
            p.si = i0;
            p.su = u0;
        }
    }
};

// Where a group's rows are, found once when the loads enter it: when its MVD_ROWS rows are
// consecutive rows of one matrix (not gate|up, every row a feature of the launch), row i is
// base + i * rb, and a load costs one multiply-add; otherwise (the launch's last group, a
// group across two matrices of q|k|v, gate|up) each load asks mvq_row. Timing only: the
// same row either way. Measured alone on an H200 (BENCH.md, step 18) it saved nothing (the
// Q8_0 head of gemma3 45.2 -> 46.0 M warp instructions, 92.9 -> 93.7 us: the loads' cursor
// now steps apart from the multiplies'); with ONE_SWZ (mvq_unit) the head is 42.9 M, 88.4 us.
struct MvdRows {
    const u8* base;
    size_t rb;
    bool fast;
};

__device__ __forceinline__ void mvd_rows(const MvArgs& a, int features, int nf, bool gu, int grp,
                                         MvdRows& r) {
    const int f0 = grp * nf;
    int o0, o1;
    const int m0 = mv_locate(a, features, f0, &o0);
    const int m1 = gu ? -1 : mv_locate(a, features, f0 + MVD_ROWS - 1, &o1);
    r.fast = m0 >= 0 && m1 == m0;
    r.rb = r.fast ? (size_t)MV_FIELD(a, m0, row_bytes) : 0;
    r.base = r.fast ? MV_FIELD(a, m0, w) + (size_t)o0 * r.rb : nullptr;
}

// The unit of position p into u (the caller has checked that p holds one).
template <int FMT>
__device__ __forceinline__ void mvd_load(const MvArgs& a, int features, int nf, bool gu, int nu,
                                         const MvdPos& p, const MvdRows& r, Unit<FMT> (&u)[1]) {
    const u8* row = r.fast ? r.base + (size_t)p.si * r.rb : mvq_row(a, 0, features, nf, gu, p.grp, p.si);
    Cur k;
    Unit<FMT>::init(k, row, p.su, nu);
    u[0].load(k, 0);
}

// The loads' side of one item: position L's unit into u when it holds one, then L steps on
// (and finds its new group's rows when it enters one).
template <int FMT>
__device__ __forceinline__ void mvd_ahead(const MvArgs& a, int features, int nf, bool gu,
                                          const MvdWalk& w, int lane, MvdPos& L, MvdRows& R,
                                          Unit<FMT> (&u)[1]) {
    if (L.grp < w.groups && L.it * 32 + lane < w.units) mvd_load<FMT>(a, features, nf, gu, w.nu, L, R, u);
    w.step(L);
    if (L.it == 0 && L.grp < w.groups) mvd_rows(a, features, nf, gu, L.grp, R);
}

// The multiplies' side of one item (position C, its unit in `cur`): the unit's value to its
// slot, and after the group's last round the rows reduced and written. Returns whether an
// item is left.
template <int FMT>
__device__ __forceinline__ bool mvd_item(const MvArgs& a, int features, int nf, bool gu,
                                         const MvdWalk& w, int lane, int r0, MvdPos& C,
                                         const Unit<FMT> (&cur)[1], const float* X,
                                         const float* xsum, float* vb) {
    if (C.it * 32 + lane < w.units) {
        float acc[1][1] = {{0.0f}};
        mvq_unit<FMT, 1, 1, true>(cur, C.su, X, a.n_in, xsum, acc);
        vb[C.si * MVD_STRIDE + C.su] = acc[0][0];
    }
    if (C.it == w.rounds - 1) {
        // The group is done: every lane reaches the shuffles (the branch is uniform).
        __syncwarp();  // every slot stored before any lane reads
        float v[MVD_ROWS][1];
#pragma unroll
        for (int i = 0; i < MVD_ROWS; i++) v[i][0] = vb[i * MVD_STRIDE + lane];
        __syncwarp();  // every slot read before the next group's stores
        if (a.plant) {  // uniform: --fault row-count-order only (kernels/matvec.cu plant_pair)
#pragma unroll
            for (int i = 0; i < MVD_ROWS; i++) v[i][0] = plant_pair(v[i][0], lane);
        }
        const float r = tree32_split<MVD_ROWS, 1>(v, lane);
        constexpr int SH = 5 - Log2<MVD_ROWS>::v;  // row o's sum sits in lanes o << SH ..
        const float sv = __shfl_sync(0xffffffffu, r, (lane << SH) & 31);
        float tv = 0.0f;
        if (gu) tv = __shfl_sync(0xffffffffu, r, ((lane + nf) << SH) & 31);
        if (lane < nf) {
            int o, f = C.grp * nf + lane;
            int mi = mv_locate(a, features, f, &o);
            if (mi >= 0) mv_finish(a, mi, o, r0, sv, tv);
        }
    }
    w.step(C);
    return C.grp < w.groups;
}

// Items in flight a warp of the dense walk: the loads run MVD_DEPTH - 1 items ahead of the
// multiplies, in a ring of MVD_DEPTH units of registers. 2 is what was measured; at 3 ptxas
// spills most formats' walks (8-32 bytes) under the launch bounds' 80 registers.
#define MVD_DEPTH 2

// Grid (blocks, rows), block 32 * MV_WARPS, dynamic shared memory as mvq_run's at RT = 1.
// Groups of MVD_ROWS weight rows (mode 2: MVD_ROWS / 2 features, gate rows then their up
// rows), warp w taking groups w, w + all warps, ...; item j + MVD_DEPTH - 1's loads leave
// before item j computes (a ring of units: no unit is copied between registers). It walks
// one-row tiles of rows under 1024 wide (nu < 32: a row is one round of the plain walk);
// the host takes it for the heads of rows of at most 24 units only (matvec.rs mvq_dense).
template <int FMT, bool XS>
__device__ __forceinline__ void mvd_run(const MvArgs& a, int features, float* smem, float* red,
                                        float* vbuf) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float* vb = vbuf + warp * (MVD_ROWS * MVD_STRIDE);
    const int nu = a.n_in >> 5;  // 1..31 (host)
    const int r0 = blockIdx.y;
    const bool gu = a.mode == 2;
    const int nf = gu ? MVD_ROWS / 2 : MVD_ROWS;
    MvdWalk w;
    w.nu = nu;
    w.groups = (features + nf - 1) / nf;
    w.all_warps = gridDim.x * MV_WARPS;
    w.units = MVD_ROWS * nu;
    w.rounds = (w.units + 31) >> 5;
    w.i0 = lane / nu;
    w.u0 = lane - w.i0 * nu;
    w.di = 32 / nu;
    w.du = 32 - w.di * nu;
    // The slots past the row's units: 0.0f for every group (no store reaches them).
    for (int i = 0; i < MVD_ROWS; i++)
        if (lane >= nu) vb[i * MVD_STRIDE + lane] = 0.0f;
    MvdPos C = {(int)blockIdx.x * MV_WARPS + warp, 0, w.i0, w.u0};
    MvdPos L = C;
    MvdRows R;
    if (L.grp < w.groups) mvd_rows(a, features, nf, gu, L.grp, R);
    Unit<FMT> u[MVD_DEPTH][1];
    // The first items' weights load before the wait: they are read-only.
#pragma unroll
    for (int j = 0; j < MVD_DEPTH - 1; j++) mvd_ahead<FMT>(a, features, nf, gu, w, lane, L, R, u[j]);
    pdl_wait();
    constexpr bool FAST_KERNEL = FMT <= FMT_Q8_0;  // mvq_run's rule at RT = 1
    const float* xsum;
    const float* X = mvq_prologue<FMT, 1, FAST_KERNEL, XS>(a, r0, smem, red, &xsum);
    bool more = C.grp < w.groups;
    while (more) {  // uniform over the warp
#pragma unroll
        for (int j = 0; j < MVD_DEPTH && more; j++) {
            mvd_ahead<FMT>(a, features, nf, gu, w, lane, L, R, u[(j + MVD_DEPTH - 1) % MVD_DEPTH]);
            more = mvd_item<FMT>(a, features, nf, gu, w, lane, r0, C, u[j], X, xsum, vb);
        }
    }
}

template <int FMT, int RT, int NW>
__device__ __forceinline__ void mvq_body(const MvArgs& a, int features, int stage_x) {
    DYN_SHARED(float4, mvq_smem4);
    __shared__ float red[8 * RT];  // sumsq256's warp sums (8 per row: mvq_stage_fast)
    pdl_trigger();
    if (stage_x) mvq_run<FMT, RT, NW, true>(a, 0, features, blockIdx.x, gridDim.x, (float*)mvq_smem4, red);
    else mvq_run<FMT, RT, NW, false>(a, 0, features, blockIdx.x, gridDim.x, (float*)mvq_smem4, red);
}

// The mixed one-row launch: matrices side by side (mode 0, q|k|v) of two formats, FA's
// first (features 0 .. fa - 1), then FB's (fa .. features - 1), in one launch instead of one
// per format. Blocks 0 .. nba - 1 walk FA's features as mvq_run<FA> over a grid of nba
// blocks, the rest FB's as mvq_run<FB> over the others: each feature's dot is its format's
// walk, the one its own launch runs, so every output has that launch's bits (mvq_emu). Each
// block stages the tile itself (one-row tiles, always staged: the host's rule), and a folded
// post-norm add (MVQ_PRE) is formed by every block and written by block (0, 0) only, as in
// a launch of one format. Why: gemma3's Q4_K_M file holds v in Q8_0 beside q and k in Q5_0
// in 9 of its 18 layers, and each of those layers paid a second launch's whole chain (the
// wait, the norm, the staging) for v's 256 rows.
template <int FA, int FB, int NW>
__device__ __forceinline__ void mvq_mix_body(const MvArgs& a, int features, int fa, int nba) {
    DYN_SHARED(float4, mvq_smem4);
    __shared__ float red[8];  // sumsq256's warp sums (mvq_stage_fast at RT = 1)
    pdl_trigger();
    if ((int)blockIdx.x < nba)
        mvq_run<FA, 1, NW, true>(a, 0, fa, blockIdx.x, nba, (float*)mvq_smem4, red);
    else
        mvq_run<FB, 1, NW, true>(a, fa, features, blockIdx.x - nba, gridDim.x - nba,
                                 (float*)mvq_smem4, red);
}

template <int FMT>
__device__ __forceinline__ void mvd_body(const MvArgs& a, int features, int stage_x) {
    DYN_SHARED(float4, mvq_smem4);
    __shared__ float red[8];  // sumsq256's warp sums (mvq_stage_fast at RT = 1)
    // Each warp's slots (declared here, once for both instantiations of mvd_run).
    __shared__ float vbuf[MV_WARPS * MVD_ROWS * MVD_STRIDE];
    pdl_trigger();
    if (stage_x) mvd_run<FMT, true>(a, features, (float*)mvq_smem4, red, vbuf);
    else mvd_run<FMT, false>(a, features, (float*)mvq_smem4, red, vbuf);
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
// One variant per engine module (MVQ_NW, src/backend/cuda/nvrtc.rs build_mv), all of them
// without it (scripts/nvrtc-check.py); the dense walk (MVQ_NW 8) in one-row modules only.
// A mixed module (MVQ_FMT2 defined: engine/matvec.rs mix_of) holds only mvq_x1 / mvq_x2.
#if defined(MVQ_FMT2)
#if MV_RT != 1
#error "a mixed vectorized module is one-row only"
#endif
#define MVQ_MIX_ARGS MvArgs a, int features, int fa, int nba
#define MVQ_MIX_KERNEL(NAME, NW)                                                                \
    extern "C" __global__ void __launch_bounds__(256, MVQ_MIN_BLOCKS(NW)) NAME(MVQ_MIX_ARGS) { \
        mvq_mix_body<MVQ_FMT, MVQ_FMT2, NW>(a, features, fa, nba);                               \
    }
#if !defined(MVQ_NW) || MVQ_NW == 1
MVQ_MIX_KERNEL(mvq_x1, 1)
#endif
#if !defined(MVQ_NW) || MVQ_NW == 2
MVQ_MIX_KERNEL(mvq_x2, 2)
#endif
#else
#if !defined(MVQ_NW) || MVQ_NW == 1
MVQ_KERNEL(mvq_w1, 1)
#endif
#if !defined(MVQ_NW) || MVQ_NW == 2
MVQ_KERNEL(mvq_w2, 2)
#endif
#if !defined(MVQ_NW) || MVQ_NW == 4
MVQ_KERNEL(mvq_w4, 4)
#endif
#if (!defined(MVQ_NW) || MVQ_NW == 8) && MV_RT == 1
// 3 blocks an SM (79-80 registers, no spill). The head it runs is bound by latency, so
// occupancy moves it more than instructions do (one H200, BENCH.md step 19): two or three
// units a lane an item (4-12 % fewer instructions, 114-128 registers, 2 blocks) made the Q8_0
// head 10 % slower; 4 blocks (64 registers, spilled) the Gemma-3 heads 3-8 % faster but
// SmolLM2's slower, eager within noise. Neither kept.
extern "C" __global__ void __launch_bounds__(256, 3) mvq_d8(MVQ_ARGS) {
    mvd_body<MVQ_FMT>(a, features, stage_x);
}
#endif
#endif  // MVQ_FMT2

#endif
