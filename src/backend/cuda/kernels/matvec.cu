// Matrix-vector products straight on GGUF block bytes, and row dequantization (embedding).
//
// Order (identical to crate::quant::dot, so the CUDA and CPU backends agree bit for bit on
// every matmul): eight threads own the eight f32 lanes of one (row, output feature); lane l
// only ever sees elements i with i % 8 == l, and walks the row's 32-element chunks in order
// applying the format's step; then tree8. A [B, n] launch adds grid rows (blockIdx.y) and
// changes nothing in any row's arithmetic.

#define FMT_F32 0
#define FMT_F16 1
#define FMT_BF16 2
#define FMT_Q4_0 3
#define FMT_Q4_1 4
#define FMT_Q5_0 5
#define FMT_Q5_1 6
#define FMT_Q8_0 7
#define FMT_Q2K 8
#define FMT_Q3K 9
#define FMT_Q4K 10
#define FMT_Q5K 11
#define FMT_Q6K 12

// Q4_K/Q5_K 6-bit (scale, min) pair j of the 12 packed scale bytes (ggml get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(const u8* s, int j, u32* sc, u32* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Q3_K signed 6-bit scale i (0..16).
__device__ __forceinline__ int scale_q3k(const u8* s, int i) {
    u32 low = (s[i % 8] >> (4 * (i / 8))) & 0x0F;
    u32 high = (s[8 + i % 4] >> (2 * (i / 4))) & 0x03;
    return (int)(low | (high << 4)) - 32;
}

// One 32-element chunk as lane l sees it: q[k] = code of element 8k + l, plus the scales.
struct Chunk {
    float q[4];
    float s[4];
};

template <int FMT>
__device__ __forceinline__ void decode(const u8* b, int c, int l, Chunk& ch) {
    if (FMT == FMT_Q4_0 || FMT == FMT_Q4_1 || FMT == FMT_Q5_0 || FMT == FMT_Q5_1) {
        // Legacy 4/5-bit: element j < 16 low nibble of qs[j], j + 16 its high nibble.
        int at = FMT == FMT_Q4_0 ? 2 : FMT == FMT_Q4_1 ? 4 : FMT == FMT_Q5_0 ? 6 : 8;
        int off = FMT == FMT_Q4_0 ? 8 : FMT == FMT_Q5_0 ? 16 : 0;
        u32 qh = 0;
        if (FMT == FMT_Q5_0) qh = (u32)b[2] | ((u32)b[3] << 8) | ((u32)b[4] << 16) | ((u32)b[5] << 24);
        if (FMT == FMT_Q5_1) qh = (u32)b[4] | ((u32)b[5] << 8) | ((u32)b[6] << 16) | ((u32)b[7] << 24);
        u32 a = b[at + l], cc = b[at + 8 + l];
        u32 v0 = a & 15, v1 = cc & 15, v2 = a >> 4, v3 = cc >> 4;
        if (FMT == FMT_Q5_0 || FMT == FMT_Q5_1) {
            v0 |= ((qh >> l) & 1) << 4;
            v1 |= ((qh >> (8 + l)) & 1) << 4;
            v2 |= ((qh >> (16 + l)) & 1) << 4;
            v3 |= ((qh >> (24 + l)) & 1) << 4;
        }
        ch.q[0] = (float)((int)v0 - off);
        ch.q[1] = (float)((int)v1 - off);
        ch.q[2] = (float)((int)v2 - off);
        ch.q[3] = (float)((int)v3 - off);
        ch.s[0] = f16_at(b);
        ch.s[1] = (FMT == FMT_Q4_1 || FMT == FMT_Q5_1) ? f16_at(b + 2) : 0.0f;
    } else if (FMT == FMT_Q8_0) {
        for (int k = 0; k < 4; k++) ch.q[k] = (float)(int)(signed char)b[2 + 8 * k + l];
        ch.s[0] = f16_at(b);
    } else if (FMT == FMT_Q2K) {
        int h = c / 4, s = c % 4;
        for (int k = 0; k < 4; k++) ch.q[k] = (float)(int)((b[16 + h * 32 + 8 * k + l] >> (2 * s)) & 3);
        float d = f16_at(b + 80), dmin = f16_at(b + 82);
        u32 sa = b[2 * c], sb = b[2 * c + 1];
        ch.s[0] = d * (float)(sa & 0x0F);
        ch.s[1] = dmin * (float)(sa >> 4);
        ch.s[2] = d * (float)(sb & 0x0F);
        ch.s[3] = dmin * (float)(sb >> 4);
    } else if (FMT == FMT_Q3K) {
        int h = c / 4, s = c % 4;
        for (int k = 0; k < 4; k++) {
            int i = 8 * k + l;
            int low = (b[32 + h * 32 + i] >> (2 * s)) & 3;
            int hm = (((b[i] >> c) & 1) ^ 1) << 2;
            ch.q[k] = (float)(low - hm);
        }
        float d = f16_at(b + 108);
        ch.s[0] = d * (float)scale_q3k(b + 96, 2 * c);
        ch.s[1] = d * (float)scale_q3k(b + 96, 2 * c + 1);
    } else if (FMT == FMT_Q4K || FMT == FMT_Q5K) {
        int pair = c / 2, k4 = c % 2;
        for (int k = 0; k < 4; k++) {
            int i = 8 * k + l;
            u32 v;
            if (FMT == FMT_Q4K) {
                v = (b[16 + pair * 32 + i] >> (4 * k4)) & 15;
            } else {
                v = ((b[48 + pair * 32 + i] >> (4 * k4)) & 15) | (((b[16 + i] >> c) & 1) << 4);
            }
            ch.q[k] = (float)(int)v;
        }
        u32 sc, m;
        scale_min_k4(b + 4, c, &sc, &m);
        ch.s[0] = f16_at(b) * (float)sc;
        ch.s[1] = f16_at(b + 2) * (float)m;
    } else if (FMT == FMT_Q6K) {
        int h = c / 4, s = c % 4;
        for (int k = 0; k < 4; k++) {
            int i = 8 * k + l;
            u32 lo = (b[h * 64 + (s % 2) * 32 + i] >> (4 * (s / 2))) & 15;
            u32 hi = ((b[128 + h * 32 + i] >> (2 * s)) & 3) << 4;
            ch.q[k] = (float)((int)(lo | hi) - 32);
        }
        float d = f16_at(b + 208);
        ch.s[0] = d * (float)(int)(signed char)b[192 + 2 * c];
        ch.s[1] = d * (float)(int)(signed char)b[192 + 2 * c + 1];
    }
}

// The format's fixed-order step (see crate::quant::dot's module comment).
template <int FMT>
__device__ __forceinline__ float step(const Chunk& ch, const float* x, float acc) {
    float x0 = x[0], x1 = x[8], x2 = x[16], x3 = x[24];
    float g0 = ch.q[0] * x0, g1 = ch.q[1] * x1, g2 = ch.q[2] * x2, g3 = ch.q[3] * x3;
    if (FMT == FMT_Q4_0 || FMT == FMT_Q5_0 || FMT == FMT_Q8_0) {
        return acc + ch.s[0] * ((g0 + g1) + (g2 + g3));
    } else if (FMT == FMT_Q4_1 || FMT == FMT_Q5_1) {
        return acc + (ch.s[0] * ((g0 + g1) + (g2 + g3)) + ch.s[1] * ((x0 + x1) + (x2 + x3)));
    } else if (FMT == FMT_Q4K || FMT == FMT_Q5K) {
        return acc + (ch.s[0] * ((g0 + g1) + (g2 + g3)) - ch.s[1] * ((x0 + x1) + (x2 + x3)));
    } else if (FMT == FMT_Q3K || FMT == FMT_Q6K) {
        return acc + (ch.s[0] * (g0 + g1) + ch.s[1] * (g2 + g3));
    } else {  // Q2_K
        return acc + ((ch.s[0] * (g0 + g1) - ch.s[1] * (x0 + x1)) +
                      (ch.s[2] * (g2 + g3) - ch.s[3] * (x2 + x3)));
    }
}

// Float formats never take the block path; the primary template only keeps it compilable.
template <int FMT> struct Layout { enum { BB = 1, CPB = 1 }; };
template <> struct Layout<FMT_Q4_0> { enum { BB = 18, CPB = 1 }; };
template <> struct Layout<FMT_Q4_1> { enum { BB = 20, CPB = 1 }; };
template <> struct Layout<FMT_Q5_0> { enum { BB = 22, CPB = 1 }; };
template <> struct Layout<FMT_Q5_1> { enum { BB = 24, CPB = 1 }; };
template <> struct Layout<FMT_Q8_0> { enum { BB = 34, CPB = 1 }; };
template <> struct Layout<FMT_Q2K> { enum { BB = 84, CPB = 8 }; };
template <> struct Layout<FMT_Q3K> { enum { BB = 110, CPB = 8 }; };
template <> struct Layout<FMT_Q4K> { enum { BB = 144, CPB = 8 }; };
template <> struct Layout<FMT_Q5K> { enum { BB = 176, CPB = 8 }; };
template <> struct Layout<FMT_Q6K> { enum { BB = 210, CPB = 8 }; };

// Lane l's partial sum of one block-format row.
template <int FMT>
__device__ __forceinline__ float lane_dot_blocks(const u8* w, const float* x, int n_in, int l) {
    const int BB = Layout<FMT>::BB, CPB = Layout<FMT>::CPB;
    int n_blocks = n_in / (32 * CPB);
    float acc = 0.0f;
    for (int bi = 0; bi < n_blocks; bi++) {
        const u8* b = w + (size_t)bi * BB;
#pragma unroll
        for (int c = 0; c < CPB; c++) {
            Chunk ch;
            decode<FMT>(b, c, l, ch);
            acc = step<FMT>(ch, x + (size_t)(bi * CPB + c) * 32 + l, acc);
        }
    }
    return acc;
}

// Float rows: acc[i % 8] += w[i] * x[i] in element order (the CPU's tail rule is the same
// lane assignment).
template <int FMT>
__device__ __forceinline__ float lane_dot_float(const u8* w, const float* x, int n_in, int l) {
    float acc = 0.0f;
    for (int i = l; i < n_in; i += 8) {
        float wi = FMT == FMT_F32 ? f32_at(w + 4 * (size_t)i)
                 : FMT == FMT_F16 ? f16_at(w + 2 * (size_t)i) : bf16_at(w + 2 * (size_t)i);
        acc = acc + wi * x[i];
    }
    return acc;
}

// Y[r][o] = dot(W row o, X[r]) for o < n_out; grid (ceil(n_out / 32), rows), block 256:
// 32 output features of one row per block, 8 lanes each.
template <int FMT>
__device__ __forceinline__ void mv_body(const u8* W, u64 row_bytes, int n_in, int n_out,
                                        const float* X, float* Y) {
    int l = threadIdx.x & 7;
    int o = blockIdx.x * (blockDim.x >> 3) + (threadIdx.x >> 3);
    int r = blockIdx.y;
    bool ok = o < n_out;
    const float* x = X + (size_t)r * n_in;
    float acc = 0.0f;
    if (ok) {
        const u8* w = W + (size_t)o * row_bytes;
        if (FMT == FMT_F32 || FMT == FMT_F16 || FMT == FMT_BF16) acc = lane_dot_float<FMT>(w, x, n_in, l);
        else acc = lane_dot_blocks<FMT>(w, x, n_in, l);
    }
    acc = tree8(acc);
    if (ok && l == 0) Y[(size_t)r * n_out + o] = acc;
}

#define MV(NAME, FMT)                                                                       \
    extern "C" __global__ void NAME(const u8* W, u64 row_bytes, int n_in, int n_out,        \
                                    const float* X, float* Y) {                             \
        mv_body<FMT>(W, row_bytes, n_in, n_out, X, Y);                                      \
    }
MV(mv_f32, FMT_F32)
MV(mv_f16, FMT_F16)
MV(mv_bf16, FMT_BF16)
MV(mv_q4_0, FMT_Q4_0)
MV(mv_q4_1, FMT_Q4_1)
MV(mv_q5_0, FMT_Q5_0)
MV(mv_q5_1, FMT_Q5_1)
MV(mv_q8_0, FMT_Q8_0)
MV(mv_q2_k, FMT_Q2K)
MV(mv_q3_k, FMT_Q3K)
MV(mv_q4_k, FMT_Q4K)
MV(mv_q5_k, FMT_Q5K)
MV(mv_q6_k, FMT_Q6K)

// Element e of a row, with exactly the f32 operations of crate::quant::dequant (gguf.quants).
__device__ __forceinline__ float deq(int fmt, const u8* row, int e) {
    switch (fmt) {
    case FMT_F32: return f32_at(row + 4 * (size_t)e);
    case FMT_F16: return f16_at(row + 2 * (size_t)e);
    case FMT_BF16: return bf16_at(row + 2 * (size_t)e);
    case FMT_Q4_0: {
        const u8* b = row + (size_t)(e / 32) * 18; int j = e % 32;
        u32 q = b[2 + (j % 16)]; u32 v = j < 16 ? (q & 15) : (q >> 4);
        return f16_at(b) * (float)((int)v - 8);
    }
    case FMT_Q4_1: {
        const u8* b = row + (size_t)(e / 32) * 20; int j = e % 32;
        u32 q = b[4 + (j % 16)]; u32 v = j < 16 ? (q & 15) : (q >> 4);
        return f16_at(b) * (float)v + f16_at(b + 2);
    }
    case FMT_Q5_0: case FMT_Q5_1: {
        bool one = fmt == FMT_Q5_1;
        const u8* b = row + (size_t)(e / 32) * (one ? 24 : 22); int j = e % 32;
        int at = one ? 4 : 2;
        u32 qh = (u32)b[at] | ((u32)b[at + 1] << 8) | ((u32)b[at + 2] << 16) | ((u32)b[at + 3] << 24);
        u32 q = b[at + 4 + (j % 16)];
        u32 v = (j < 16 ? (q & 15) : (q >> 4)) | (((qh >> j) & 1) << 4);
        if (one) return f16_at(b) * (float)v + f16_at(b + 2);
        return f16_at(b) * (float)((int)v - 16);
    }
    case FMT_Q8_0: {
        const u8* b = row + (size_t)(e / 32) * 34; int j = e % 32;
        return (float)(int)(signed char)b[2 + j] * f16_at(b);
    }
    case FMT_Q2K: {
        const u8* b = row + (size_t)(e / 256) * 84; int i = e % 256;
        int h = i / 128, s = (i % 128) / 32, l = i % 32;
        u32 sc = b[i / 16];
        float dl = f16_at(b + 80) * (float)(sc & 0x0F);
        float ml = f16_at(b + 82) * (float)(sc >> 4);
        u32 q = (b[16 + h * 32 + l] >> (2 * s)) & 3;
        return dl * (float)q - ml;
    }
    case FMT_Q3K: {
        const u8* b = row + (size_t)(e / 256) * 110; int i = e % 256;
        int h = i / 128, s = (i % 128) / 32, l = i % 32;
        float dl = f16_at(b + 108) * (float)scale_q3k(b + 96, i / 16);
        int low = (b[32 + h * 32 + l] >> (2 * s)) & 3;
        int hbit = (b[l] >> (i / 32)) & 1;
        return dl * (float)(low - ((hbit ^ 1) << 2));
    }
    case FMT_Q4K: case FMT_Q5K: {
        bool five = fmt == FMT_Q5K;
        const u8* b = row + (size_t)(e / 256) * (five ? 176 : 144); int i = e % 256;
        int sub = i / 32, c = sub / 2, k = sub % 2, l = i % 32;
        u32 sc, m;
        scale_min_k4(b + 4, sub, &sc, &m);
        float dl = f16_at(b) * (float)sc, ml = f16_at(b + 2) * (float)m;
        u32 v;
        if (five) v = ((b[48 + c * 32 + l] >> (4 * k)) & 15) | (((b[16 + l] >> sub) & 1) << 4);
        else v = (b[16 + c * 32 + l] >> (4 * k)) & 15;
        return dl * (float)v - ml;
    }
    case FMT_Q6K: {
        const u8* b = row + (size_t)(e / 256) * 210; int i = e % 256;
        int h = i / 128, s = (i % 128) / 32, l = i % 32;
        int within = s * 32 + l;
        u32 lo = (b[h * 64 + within % 64] >> (4 * (within / 64))) & 15;
        u32 hi = (b[128 + h * 32 + l] >> (2 * s)) & 3;
        int q = (int)(lo | (hi << 4)) - 32;
        float dl = f16_at(b + 208) * (float)(int)(signed char)b[192 + i / 16];
        return dl * (float)q;
    }
    }
    return __int_as_float(0x7fc00000);
}

// x[r] = dequant(table row tokens[r]) * scale; grid (rows), block 256. Token ids arrive as
// f32; one that is not an exact integer below `vocab` (a torn or unordered read) poisons its
// row with NaN so the logits show it, as the CPU backend's embed refuses it.
extern "C" __global__ void embed_rows(const u8* table, u64 row_bytes, int fmt, int n_embd,
                                      int vocab, float scale, const float* ids, float* x) {
    int r = blockIdx.x;
    float t = ids[r];
    bool ok = t >= 0.0f && t == floorf(t) && t < (float)vocab;
    const u8* row = table + (size_t)(ok ? (u32)t : 0u) * row_bytes;
    for (int e = threadIdx.x; e < n_embd; e += blockDim.x) {
        float v = ok ? deq(fmt, row, e) * scale : __int_as_float(0x7fc00000);
        x[(size_t)r * n_embd + e] = v;
    }
}
