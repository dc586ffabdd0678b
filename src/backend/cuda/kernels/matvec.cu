// Matrix-vector products straight on GGUF block bytes (with fused prologues/epilogues), and
// row dequantization (embedding).
//
// Order of every dot (fixed by n_in and the launch's warps-per-feature WPF, which the host
// derives from the matrix shape alone, never from the batch): warp w of a feature's group
// (w < WPF) owns elements e = 32 * (w + WPF * k) + lane, k = 0, 1, ... in increasing order;
// each lane accumulates acc = acc + deq(e) * x[e] (deq: the exact f32 dequantization of
// crate::quant::dequant); the warp closes with the xor tree32; the group's WPF partials are
// summed in warp order. Rows of a [B, n] launch each keep their own accumulator and see the
// same sequence of operations as a single row: a weight element is decoded once and used
// for every row of the tile, which changes nothing in any row's arithmetic. This is NOT the
// CPU's 8-lane order (CUDA vs CPU agree to ~1e-5, not bit for bit).

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


// Element j (0..32) of chunk c (elements 32c..32c+31) of a row, with exactly the f32
// operations of crate::quant::dequant (gguf.quants). Chunks are what the matvec lanes walk
// (lane j of a warp takes element j of a chunk), so the block address is one multiply and
// the position in the block needs no division. 256-element super-blocks hold 8 chunks.
template <int FMT>
__device__ __forceinline__ float deq_c(const u8* row, int c, int j) {
    if (FMT == FMT_F32) return ((const float*)row)[32 * c + j];
    if (FMT == FMT_F16) return f16_at(row + 64 * (size_t)c + 2 * j);
    if (FMT == FMT_BF16) return bf16_at(row + 64 * (size_t)c + 2 * j);
    if (FMT == FMT_Q4_0) {
        const u8* b = row + (size_t)c * 18;
        u32 q = b[2 + (j & 15)]; u32 v = j < 16 ? (q & 15) : (q >> 4);
        return f16_at(b) * (float)((int)v - 8);
    }
    if (FMT == FMT_Q4_1) {
        const u8* b = row + (size_t)c * 20;
        u32 q = b[4 + (j & 15)]; u32 v = j < 16 ? (q & 15) : (q >> 4);
        return f16_at(b) * (float)v + f16_at(b + 2);
    }
    if (FMT == FMT_Q5_0 || FMT == FMT_Q5_1) {
        const bool one = FMT == FMT_Q5_1;
        const u8* b = row + (size_t)c * (one ? 24 : 22);
        const int at = one ? 4 : 2;
        u32 qh = (u32)b[at] | ((u32)b[at + 1] << 8) | ((u32)b[at + 2] << 16) | ((u32)b[at + 3] << 24);
        u32 q = b[at + 4 + (j & 15)];
        u32 v = (j < 16 ? (q & 15) : (q >> 4)) | (((qh >> j) & 1) << 4);
        if (one) return f16_at(b) * (float)v + f16_at(b + 2);
        return f16_at(b) * (float)((int)v - 16);
    }
    if (FMT == FMT_Q8_0) {
        const u8* b = row + (size_t)c * 34;
        return (float)(int)(signed char)b[2 + j] * f16_at(b);
    }
    // K-quants: super-block c / 8, element i of its 256.
    const int i = (c & 7) * 32 + j;
    if (FMT == FMT_Q2K) {
        const u8* b = row + (size_t)(c >> 3) * 84;
        int h = i / 128, s = (i % 128) / 32, l = j;
        u32 sc = b[i / 16];
        float dl = f16_at(b + 80) * (float)(sc & 0x0F);
        float ml = f16_at(b + 82) * (float)(sc >> 4);
        u32 q = (b[16 + h * 32 + l] >> (2 * s)) & 3;
        return dl * (float)q - ml;
    }
    if (FMT == FMT_Q3K) {
        const u8* b = row + (size_t)(c >> 3) * 110;
        int h = i / 128, s = (i % 128) / 32, l = j;
        float dl = f16_at(b + 108) * (float)scale_q3k(b + 96, i / 16);
        int low = (b[32 + h * 32 + l] >> (2 * s)) & 3;
        int hbit = (b[l] >> (i / 32)) & 1;
        return dl * (float)(low - ((hbit ^ 1) << 2));
    }
    if (FMT == FMT_Q4K || FMT == FMT_Q5K) {
        const bool five = FMT == FMT_Q5K;
        const u8* b = row + (size_t)(c >> 3) * (five ? 176 : 144);
        int sub = c & 7, cc = sub / 2, k = sub % 2, l = j;
        u32 sc, m;
        scale_min_k4(b + 4, sub, &sc, &m);
        float dl = f16_at(b) * (float)sc, ml = f16_at(b + 2) * (float)m;
        u32 v;
        if (five) v = ((b[48 + cc * 32 + l] >> (4 * k)) & 15) | (((b[16 + l] >> sub) & 1) << 4);
        else v = (b[16 + cc * 32 + l] >> (4 * k)) & 15;
        return dl * (float)v - ml;
    }
    if (FMT == FMT_Q6K) {
        const u8* b = row + (size_t)(c >> 3) * 210;
        int h = i / 128, s = (i % 128) / 32, l = j;
        int within = s * 32 + l;
        u32 lo = (b[h * 64 + within % 64] >> (4 * (within / 64))) & 15;
        u32 hi = (b[128 + h * 32 + l] >> (2 * s)) & 3;
        int q = (int)(lo | (hi << 4)) - 32;
        float dl = f16_at(b + 208) * (float)(int)(signed char)b[192 + i / 16];
        return dl * (float)q;
    }
    return __int_as_float(0x7fc00000);
}

// Element e of a row (any format id): the embedding lookup's decoder.
__device__ __forceinline__ float deq(int fmt, const u8* row, int e) {
    int c = e >> 5, j = e & 31;
    switch (fmt) {
    case FMT_F32: return deq_c<FMT_F32>(row, c, j);
    case FMT_F16: return deq_c<FMT_F16>(row, c, j);
    case FMT_BF16: return deq_c<FMT_BF16>(row, c, j);
    case FMT_Q4_0: return deq_c<FMT_Q4_0>(row, c, j);
    case FMT_Q4_1: return deq_c<FMT_Q4_1>(row, c, j);
    case FMT_Q5_0: return deq_c<FMT_Q5_0>(row, c, j);
    case FMT_Q5_1: return deq_c<FMT_Q5_1>(row, c, j);
    case FMT_Q8_0: return deq_c<FMT_Q8_0>(row, c, j);
    case FMT_Q2K: return deq_c<FMT_Q2K>(row, c, j);
    case FMT_Q3K: return deq_c<FMT_Q3K>(row, c, j);
    case FMT_Q4K: return deq_c<FMT_Q4K>(row, c, j);
    case FMT_Q5K: return deq_c<FMT_Q5K>(row, c, j);
    case FMT_Q6K: return deq_c<FMT_Q6K>(row, c, j);
    }
    return __int_as_float(0x7fc00000);
}

#if !defined(MV_FMT) && !defined(MV_GENERIC) && !defined(MVQ_FMT) && !defined(MMA_Q4K)
// x[r] = dequant(table row tokens[r]) * scale; grid (rows), block 256. Token ids arrive as
// f32; one that is not an exact integer below `vocab` (a torn or unordered read) poisons its
// row with NaN so the logits show it, as the CPU backend's embed refuses it.
extern "C" __global__ void embed_rows(const u8* table, u64 row_bytes, int fmt, int n_embd,
                                      int vocab, float scale, const float* ids, float* x) {
    pdl_trigger();
    pdl_wait();
    int r = blockIdx.x;
    float t = ids[r];
    bool ok = t >= 0.0f && t == floorf(t) && t < (float)vocab;
    const u8* row = table + (size_t)(ok ? (u32)t : 0u) * row_bytes;
    for (int e = threadIdx.x; e < n_embd; e += blockDim.x) {
        float v = ok ? deq(fmt, row, e) * scale : __int_as_float(0x7fc00000);
        x[(size_t)r * n_embd + e] = v;
    }
}
#endif

// One matrix of a fused matvec launch. Mirrors `MvMat` in engine/matvec.rs (#[repr(C)], 32 bytes).
struct MvMat {
    const u8* w;   // n_out rows of row_bytes GGUF block bytes
    u64 row_bytes;
    float* y;      // [rows, n_out] output
    int n_out;
    int fmt;       // FMT_* id
};

// A fused matvec launch. Mirrors `MvArgs` in engine/matvec.rs (#[repr(C)], 136 bytes).
//  mode 0: y_m[r][o] = W_m · in[r]              (up to 3 matrices side by side: q|k|v)
//  mode 1: y_0[r][o] = y_0[r][o] + W_0 · in[r]  (the residual add, x += o, as the CPU does)
//  mode 2: y_0[r][o] = act(W_0 · in[r]) * (W_1 · in[r])   (gate, up)
// in[r] = x[r] when norm == 0, else rms_norm(x[r]) * norm computed in the prologue with the
// expression of crate::math::rms_norm ((x * inv) * w, inv = 1 / sqrt(ss / n + eps)).
struct MvArgs {
    MvMat m[3];
    const float* x;
    const float* norm;
    int n_mat;
    int n_in;
    int rows;
    int mode;
    int act;
    float eps;
    // --fault row-count-order (engine/matvec.rs sets it only under that fault, and only on
    // launches of a step with 2+ rows): each dot's warp partials reduced in another order
    // (plant_pair). 0 in every clean run.
    int plant;
#if defined(MVQ_PRE)
    // gemma3's post-norm residual add folded into a one-row vectorized launch (kernels/mvq.cu
    // mvq_pre_add), in the modules built for it only (`#define MVQ_PRE`: the engine's
    // MVQ_PRE_BASE kinds): the row the launch multiplies is x + post_norm(res_o) with norm
    // weights res_w, and block (0, 0) writes it to res_out; res_o null: no add. The host's
    // struct always has these fields at its end, and a module without them reads the prefix
    // (the driver copies a parameter's size from the kernel's image), so every other kernel
    // is the one it was before the fold.
    const float* res_o;
    const float* res_w;
    float* res_out;
#endif
};

// --fault row-count-order, the planted batch-dependent order: lane pairs (2i, 2i + 1) add
// first and the odd lanes then carry 0, so the tree32 that follows adds the 32 partials
// as ((a0 + a1) + (a16 + a17)) + ... instead of tree32's ((a0 + a16) + (a8 + a24)) + ...: the
// same values, another order, as a kernel picked by batch size computes them. The zeros
// add exactly, so every lane still ends with one bit pattern. All 32 lanes must call it.
__device__ __forceinline__ float plant_pair(float v, int lane) {
    const float t = __shfl_xor_sync(0xffffffffu, v, 1);
    return (lane & 1) ? 0.0f : v + t;
}

#define MV_WARPS 8  // blockDim.x / 32 of every fused matvec launch (the host uses 256)

// A hint that pulls the 128-byte lines of [p, p + n) into L2 ahead of the loads that need
// them (weights do not depend on the prologue's results, so their DRAM round trip can overlap
// it). A prefetch writes nothing and changes no value; it carries no ordering.
__device__ __forceinline__ void prefetch_l2(const u8* p, u64 n, int slot, int slots) {
    u64 a = (u64)p & ~(u64)127;
    u64 end = (u64)p + n;
#if !defined(PPN_EMU)  // a hint only: the kernel emulator (tests/kernel-emu) skips it
    for (u64 at = a + (u64)slot * 128; at < end; at += (u64)slots * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
#else
    (void)a, (void)end;
#endif
}

// K chunks c0, c0 + wpf, ... (all inside the row) of NP dots over a full tile of RT rows of
// ready (normalized) x: every weight load of the round issued before its arithmetic, and no
// bound, row or norm check (warp_dots calls it only when all hold).
template <int FMT, int RT, int NP, int K>
__device__ __forceinline__ void dots_round(const u8* r0p, const u8* r1p, const float* X,
                                           int n_in, int c0, int wpf, int lane,
                                           float (&acc)[2][RT]) {
    float w[NP][K];
#pragma unroll
    for (int u = 0; u < K; u++) {
        int c = c0 + u * wpf;
        w[0][u] = deq_c<FMT>(r0p, c, lane);
        if (NP == 2) w[NP - 1][u] = deq_c<FMT>(r1p, c, lane);
    }
#pragma unroll
    for (int u = 0; u < K; u++) {
        const float* xe = X + 32 * (c0 + u * wpf) + lane;
#pragma unroll
        for (int r = 0; r < RT; r++) {
            float xv = xe[(size_t)r * n_in];
#pragma unroll
            for (int p = 0; p < NP; p++) acc[p][r] = acc[p][r] + w[p][u] * xv;
        }
    }
}

// NP dots (NP = 1 or 2) of rows r0p / r1p (both of format FMT) with the same input rows,
// loads of U rounds issued before their arithmetic (the rows are short: without the batch
// every chunk waits for its own DRAM round trip). Each accumulator still walks e in
// increasing order, one `acc = acc + w * x` per element, so how the loop is blocked (U) and
// how many dots share it (NP) change no bit of any result.
template <int FMT, int RT, int NP, bool GENERIC = false>
__device__ __forceinline__ void warp_dots(const u8* r0p, const u8* r1p, const float* X, int n_in,
                                          int nr, const float* nw, const float* inv, int w0,
                                          int wpf, float (&acc)[2][RT]) {
    // The generic kernel (GENERIC) keeps its unrolled loops short: thirteen of them compile
    // into one function.
    const int U = GENERIC ? 4 : RT == 1 ? (NP == 1 ? 8 : 9) : (NP == 1 ? 8 : 4);
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
        for (int r = 0; r < RT; r++) acc[p][r] = 0.0f;
    int lane = threadIdx.x & 31;
    int n_chunks = n_in >> 5;  // n_in is a whole number of 32-element chunks (host-checked)
    if (!GENERIC && nw == nullptr && nr == RT) {
        // Normalized x and a full tile (uniform over the launch): whole rounds of U chunks,
        // then the row's last k < U chunks, every round without a check per chunk (the
        // checked loop below takes the rest; the generic kernel always, for its compile
        // time). The chunks still go in increasing order: the same bits as the loop below.
        int c0 = w0;
        for (; c0 + (U - 1) * wpf < n_chunks; c0 += U * wpf)
            dots_round<FMT, RT, NP, U>(r0p, r1p, X, n_in, c0, wpf, lane, acc);
        if (c0 < n_chunks) {
            int k = (n_chunks - c0 + wpf - 1) / wpf;  // 1 .. U-1
            if constexpr (RT == 1) {
                // Latency-bound single row: the k chunks' loads all in one round.
#define MV_TAIL(K) \
    if constexpr (K < U) \
        if (k == K) dots_round<FMT, RT, NP, K>(r0p, r1p, X, n_in, c0, wpf, lane, acc);
                MV_TAIL(1) MV_TAIL(2) MV_TAIL(3) MV_TAIL(4) MV_TAIL(5) MV_TAIL(6) MV_TAIL(7)
                MV_TAIL(8)
#undef MV_TAIL
            } else {
                // A tile has RT rows of arithmetic per load to hide latency: rounds of 4, 2, 1
                // (fewer bodies, fewer registers).
                if (U > 4 && k >= 4) {
                    dots_round<FMT, RT, NP, 4>(r0p, r1p, X, n_in, c0, wpf, lane, acc);
                    c0 += 4 * wpf;
                    k -= 4;
                }
                if (k >= 2) {
                    dots_round<FMT, RT, NP, 2>(r0p, r1p, X, n_in, c0, wpf, lane, acc);
                    c0 += 2 * wpf;
                    k -= 2;
                }
                if (k >= 1) dots_round<FMT, RT, NP, 1>(r0p, r1p, X, n_in, c0, wpf, lane, acc);
            }
        }
        return;
    }
    for (int c0 = w0; c0 < n_chunks; c0 += U * wpf) {
        float w[NP][U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + u * wpf;
            w[0][u] = c < n_chunks ? deq_c<FMT>(r0p, c, lane) : 0.0f;
            if (NP == 2) w[NP - 1][u] = c < n_chunks ? deq_c<FMT>(r1p, c, lane) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + u * wpf;
            if (c < n_chunks) {
                int e = 32 * c + lane;
                float g = nw ? nw[e] : 0.0f;
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    if (RT == 1 || r < nr) {
                        float xv = X[(size_t)r * n_in + e];
                        if (nw) xv = (xv * inv[r]) * g;
#pragma unroll
                        for (int p = 0; p < NP; p++) acc[p][r] = acc[p][r] + w[p][u] * xv;
                    }
                }
            }
        }
    }
}

template <int RT, int NP>
__device__ __forceinline__ void warp_dots_any(int fmt, const u8* r0p, const u8* r1p,
                                              const float* X, int n_in, int nr, const float* nw,
                                              const float* inv, int w0, int wpf,
                                              float (&acc)[2][RT]) {
#define MV_CASE(F) \
    case F: warp_dots<F, RT, NP, true>(r0p, r1p, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    switch (fmt) {
    MV_CASE(FMT_F32) MV_CASE(FMT_F16) MV_CASE(FMT_BF16) MV_CASE(FMT_Q4_0) MV_CASE(FMT_Q4_1)
    MV_CASE(FMT_Q5_0) MV_CASE(FMT_Q5_1) MV_CASE(FMT_Q8_0) MV_CASE(FMT_Q2K) MV_CASE(FMT_Q3K)
    MV_CASE(FMT_Q4K) MV_CASE(FMT_Q5K) MV_CASE(FMT_Q6K)
    default:
#pragma unroll
        for (int p = 0; p < 2; p++)
#pragma unroll
            for (int r = 0; r < RT; r++) acc[p][r] = __int_as_float(0x7fc00000);
    }
#undef MV_CASE
}

// The dots in the launch's format: FMT >= 0 in a kernel compiled for one format (the host
// launches it only when every matrix of the launch has that format; `fmt` is then ignored),
// FMT = -1 in the generic kernel, which dispatches on `fmt` at run time and never pairs (its
// thirteen unrolled loops are compiled once per NP; one NP keeps its compile time short).
template <int RT, int NP, int FMT>
__device__ __forceinline__ void warp_dots_sel(int fmt, const u8* r0p, const u8* r1p,
                                              const float* X, int n_in, int nr, const float* nw,
                                              const float* inv, int w0, int wpf,
                                              float (&acc)[2][RT]) {
    if constexpr (FMT >= 0) {
        warp_dots<FMT, RT, NP>(r0p, r1p, X, n_in, nr, nw, inv, w0, wpf, acc);
    } else if constexpr (NP == 1) {
        warp_dots_any<RT, 1>(fmt, r0p, r1p, X, n_in, nr, nw, inv, w0, wpf, acc);
    }
}

// Matrix mi's field, selected field-wise so the kernel parameter stays in param space.
#define MV_FIELD(a, mi, f) ((mi) == 2 ? (a).m[2].f : (mi) == 1 ? (a).m[1].f : (a).m[0].f)

// Which matrix and output row feature f is (mi = -1 past the end). Mode 2: the gate's row o
// (the up projection's row o is its partner).
__device__ __forceinline__ int mv_locate(const MvArgs& a, int features, int f, int* o) {
    *o = 0;
    if (f >= features) return -1;
    int n0 = a.m[0].n_out;
    int n1 = a.n_mat > 1 ? a.m[1].n_out : 0;
    int n2 = a.n_mat > 2 ? a.m[2].n_out : 0;
    if (a.mode == 2 || f < n0) { *o = f; return 0; }
    if (f < n0 + n1) { *o = f - n0; return 1; }
    if (f < n0 + n1 + n2) { *o = f - n0 - n1; return 2; }
    return -1;
}

// The epilogue of output feature o of matrix mi for batch row `row`: s is the finished dot
// (mode 2: of the gate), t the up projection's.
__device__ __forceinline__ void mv_finish(const MvArgs& a, int mi, int o, int row, float s,
                                          float t) {
    float* Y = MV_FIELD(a, mi, y);
    int ny = MV_FIELD(a, mi, n_out);
    float* y = Y + (size_t)row * ny + o;
    if (a.mode == 0) {
        *y = s;
    } else if (a.mode == 1) {
        *y = *y + s;
    } else {
        *y = act_fn(s, a.act) * t;
    }
}

// The weight rows a slot will read: features f (and f + 1 when fps = 2), and in mode 2 the
// up row of the same feature, prefetched by the slot's warp w0 of wpf.
__device__ __forceinline__ void mv_prefetch(const MvArgs& a, int features, int f, int fps, int w0,
                                            int wpf) {
    for (int i = 0; i < fps; i++) {
        int o;
        int mi = mv_locate(a, features, f + i, &o);
        if (mi < 0) return;
        u64 rb = MV_FIELD(a, mi, row_bytes);
        prefetch_l2(MV_FIELD(a, mi, w) + (size_t)o * rb, rb, w0 * 32 + (threadIdx.x & 31), 32 * wpf);
        if (a.mode == 2) prefetch_l2(a.m[1].w + (size_t)o * a.m[1].row_bytes, a.m[1].row_bytes,
                                     w0 * 32 + (threadIdx.x & 31), 32 * wpf);
    }
}

// Grid (blocks, ceil(rows / RT)), block 32 * MV_WARPS; blocks <= what the GPU holds at once,
// each block walking rounds of feature slots (the grid size changes which block computes a
// feature, never how). A slot is wpf consecutive warps (wpf divides MV_WARPS) and holds one
// feature, or two adjacent ones when pair = 1 in modes 0/1 (the host sets it only for one
// matrix); pair = 1 in mode 2 means gate and up share a format and are read in one pass.
// Grid row t covers batch rows t*RT..t*RT+RT-1.
// stage_x = 1 (every launch whose tile fits): the rows (and the norm weights) are loaded into
// dynamic shared memory in one round and, for a norm launch, normalized in place with the
// same expressions as the on-the-fly path (sumsq32 over the same values, then (x * inv) * w).
template <int RT, int FMT>
__device__ __forceinline__ void mv_body(const MvArgs& a, int wpf, int features, int stage_x,
                                        int pair) {
    DYN_SHARED(float, xs);
    __shared__ float inv[RT];
    __shared__ float pa[MV_WARPS][RT];
    __shared__ float pb[MV_WARPS][RT];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = blockIdx.y * RT;
    int nr = a.rows - r0;
    if (nr > RT) nr = RT;
    int fpb = MV_WARPS / wpf;
    int w0 = warp % wpf;
    if (FMT < 0) pair = 0;  // the generic kernel has no two-dot pass
    int fps = pair && a.mode != 2 ? 2 : 1;
    int step = fpb * fps;
    int mine = (warp / wpf) * fps;  // this slot's first feature within a round
    pdl_trigger();
    // The first round's weights start their DRAM trip while the previous kernel finishes
    // and the prologue runs (weights are read-only: safe before pdl_wait).
    if (blockIdx.x * step < features) mv_prefetch(a, features, blockIdx.x * step + mine, fps, w0, wpf);
    pdl_wait();
    const float* X = a.x + (size_t)r0 * a.n_in;
    const float* nw = a.norm;
    const float* iv = inv;
    int n = a.n_in, total = nr * n;
    if (stage_x) {
        // The tile (and the norm weights) into shared memory in one round: every thread
        // issues its loads (8 at a time) before its stores, so the dot loop below reads x
        // from shared memory instead of waiting on global loads per chunk.
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
            // rms_norm in place with the on-the-fly path's expressions: sumsq32 over the same
            // values, inv = 1 / sqrt(ss / n + eps), then (x * inv) * w.
            const float* gs = xs + total;
            for (int r = warp; r < nr; r += MV_WARPS) {
                float ss = sumsq32(xs + (size_t)r * n, n);
                if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
            }
            __syncthreads();
            for (int r = 0; r < nr; r++)
                for (int e = threadIdx.x; e < n; e += blockDim.x)
                    xs[(size_t)r * n + e] = (xs[(size_t)r * n + e] * inv[r]) * gs[e];
            __syncthreads();
        }
        X = xs;
        nw = 0;
    } else if (a.norm) {
        // Too large to stage: inv per row here, the norm applied per element in the dots.
        for (int r = warp; r < nr; r += MV_WARPS) {
            float ss = sumsq32(X + (size_t)r * n, n);
            if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)n + a.eps);
        }
        __syncthreads();
    }
    for (int base = blockIdx.x * step; base < features; base += gridDim.x * step) {
        int next = base + gridDim.x * step;
        if (next < features) mv_prefetch(a, features, next + mine, fps, w0, wpf);
        int f = base + mine;
        int o, o1;
        int mi = mv_locate(a, features, f, &o);
        int mi1 = fps == 2 ? mv_locate(a, features, f + 1, &o1) : -1;
        float s0[RT], s1[RT];
        if (mi >= 0) {
            float acc[2][RT];
            u64 rb = MV_FIELD(a, mi, row_bytes);
            const u8* row = MV_FIELD(a, mi, w) + (size_t)o * rb;
            int fmt = MV_FIELD(a, mi, fmt);
            if (a.mode == 2) {
                const u8* up = a.m[1].w + (size_t)o * a.m[1].row_bytes;
                if (FMT >= 0 && pair) {
                    warp_dots_sel<RT, 2, FMT>(fmt, row, up, X, a.n_in, nr, nw, iv, w0, wpf, acc);
#pragma unroll
                    for (int r = 0; r < RT; r++) { s0[r] = acc[0][r]; s1[r] = acc[1][r]; }
                } else {
                    warp_dots_sel<RT, 1, FMT>(fmt, row, row, X, a.n_in, nr, nw, iv, w0, wpf, acc);
#pragma unroll
                    for (int r = 0; r < RT; r++) s0[r] = acc[0][r];
                    warp_dots_sel<RT, 1, FMT>(a.m[1].fmt, up, up, X, a.n_in, nr, nw, iv, w0, wpf, acc);
#pragma unroll
                    for (int r = 0; r < RT; r++) s1[r] = acc[0][r];
                }
            } else if (FMT >= 0 && fps == 2) {
                // The partner feature is in the same (only) matrix; past the end it re-reads
                // row f and its result is dropped.
                const u8* row1 = mi1 >= 0 ? MV_FIELD(a, mi1, w) + (size_t)o1 * rb : row;
                warp_dots_sel<RT, 2, FMT>(fmt, row, row1, X, a.n_in, nr, nw, iv, w0, wpf, acc);
#pragma unroll
                for (int r = 0; r < RT; r++) { s0[r] = acc[0][r]; s1[r] = acc[1][r]; }
            } else {
                warp_dots_sel<RT, 1, FMT>(fmt, row, row, X, a.n_in, nr, nw, iv, w0, wpf, acc);
#pragma unroll
                for (int r = 0; r < RT; r++) { s0[r] = acc[0][r]; s1[r] = 0.0f; }
            }
        } else {
#pragma unroll
            for (int r = 0; r < RT; r++) { s0[r] = 0.0f; s1[r] = 0.0f; }
        }
        // Uniform over the warp (mi is per warp), so the shuffles are full-warp.
        bool two = a.mode == 2 || fps == 2;
        if (a.plant) {  // uniform: a launch parameter (--fault row-count-order only)
#pragma unroll
            for (int r = 0; r < RT; r++) {
                s0[r] = plant_pair(s0[r], lane);
                s1[r] = plant_pair(s1[r], lane);
            }
        }
#pragma unroll
        for (int r = 0; r < RT; r++) {
            s0[r] = tree32(s0[r]);
            if (two) s1[r] = tree32(s1[r]);
        }
        if (wpf == 1) {
            // The warp holds the whole dot: lane 0 finishes every row.
            if (lane == 0) {
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    if (r < nr && mi >= 0) {
                        if (a.mode == 2) mv_finish(a, mi, o, r0 + r, s0[r], s1[r]);
                        else mv_finish(a, mi, o, r0 + r, s0[r], 0.0f);
                    }
                    if (r < nr && mi1 >= 0) mv_finish(a, mi1, o1, r0 + r, s1[r], 0.0f);
                }
            }
            continue;  // uniform: wpf is a launch parameter
        }
        if (mi >= 0 && lane == 0) {
#pragma unroll
            for (int r = 0; r < RT; r++) {
                pa[warp][r] = s0[r];
                pb[warp][r] = s1[r];
            }
        }
        __syncthreads();
        // The slot's first warp; lane r finishes batch row r, summing partials in warp order.
        if (mi >= 0 && w0 == 0 && lane < nr) {
            float s = pa[warp][lane], t = pb[warp][lane];
            for (int i = 1; i < wpf; i++) {
                s = s + pa[warp + i][lane];
                t = t + pb[warp + i][lane];
            }
            if (a.mode == 2) mv_finish(a, mi, o, r0 + lane, s, t);
            else mv_finish(a, mi, o, r0 + lane, s, 0.0f);
            if (mi1 >= 0) mv_finish(a, mi1, o1, r0 + lane, t, 0.0f);
        }
        __syncthreads();  // pa/pb are reused by the next round
    }
}

// One kernel per module, `mv_tile`, for one row tile RT (`#define MV_RT`, 1..8; the host
// launches a tile only over whole tiles of rows, so the dot loop never needs its per-row
// checks: see engine/matvec.rs `row_tiles`): the per-row arithmetic is the same for every RT.
// RT <= 4: at least 4 blocks (32 warps) per SM: decode matvecs are latency-bound, and the
// bytes in flight scale with resident warps. RT > 4: 3 blocks per SM, so up to 8 rows'
// accumulators and 8 chunks of weights in flight fit in registers without spilling.
// Matvec modules (the host compiles one only when an engine needs it): MV_FMT defined to one
// FMT_* id gives the kernel for that format, with the two-dot pass; MV_GENERIC gives it for
// launches that mix formats (the same arithmetic, dispatched at run time). The main module
// (neither defined) holds embed_rows and no matvec.
#define MV_ARGS MvArgs a, int wpf, int features, int stage_x, int pair
#define MV_PASS a, wpf, features, stage_x, pair
#if defined(MV_FMT) || defined(MV_GENERIC)
#if !defined(MV_RT) || MV_RT < 1 || MV_RT > 8
#error "a matvec module needs MV_RT in 1..8"
#endif
#if defined(MV_FMT)
#define MV_KFMT MV_FMT
#else
#define MV_KFMT -1
#endif
extern "C" __global__ void __launch_bounds__(256, MV_RT <= 4 ? 4 : 3) mv_tile(MV_ARGS) {
    mv_body<MV_RT, MV_KFMT>(MV_PASS);
}
#endif
