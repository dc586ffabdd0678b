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

// One matrix of a fused matvec launch. Mirrors `MvMat` in engine.rs (#[repr(C)], 32 bytes).
struct MvMat {
    const u8* w;   // n_out rows of row_bytes GGUF block bytes
    u64 row_bytes;
    float* y;      // [rows, n_out] output
    int n_out;
    int fmt;       // FMT_* id
};

// A fused matvec launch. Mirrors `MvArgs` in engine.rs (#[repr(C)], 136 bytes).
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
};

#define MV_WARPS 8  // blockDim.x / 32 of every fused matvec launch (the host uses 256)

// Loads of U iterations are issued before any of their arithmetic (a fully unrolled batch:
// the rows are short, so without this every iteration waits for its own DRAM round trip);
// the accumulation still walks e in increasing order.
template <int FMT, int RT>
__device__ __forceinline__ void warp_dot(const u8* row, const float* X, int n_in, int nr,
                                         const float* nw, const float* inv, int w0, int wpf,
                                         float* acc) {
    const int U = RT == 1 ? 8 : 4;
#pragma unroll
    for (int r = 0; r < RT; r++) acc[r] = 0.0f;
    int lane = threadIdx.x & 31;
    int stride = 32 * wpf;
    for (int e0 = 32 * w0 + lane; e0 < n_in; e0 += U * stride) {
        float w[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int e = e0 + u * stride;
            w[u] = e < n_in ? deq(FMT, row, e) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int e = e0 + u * stride;
            if (e < n_in) {
                float g = nw ? nw[e] : 0.0f;
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    if (r < nr) {
                        float xv = X[(size_t)r * n_in + e];
                        if (nw) xv = (xv * inv[r]) * g;
                        acc[r] = acc[r] + w[u] * xv;
                    }
                }
            }
        }
    }
}

template <int RT>
__device__ __forceinline__ void warp_dot_any(int fmt, const u8* row, const float* X, int n_in,
                                          int nr, const float* nw, const float* inv, int w0,
                                          int wpf, float* acc) {
    switch (fmt) {
    case FMT_F32: warp_dot<FMT_F32, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_F16: warp_dot<FMT_F16, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_BF16: warp_dot<FMT_BF16, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q4_0: warp_dot<FMT_Q4_0, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q4_1: warp_dot<FMT_Q4_1, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q5_0: warp_dot<FMT_Q5_0, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q5_1: warp_dot<FMT_Q5_1, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q8_0: warp_dot<FMT_Q8_0, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q2K: warp_dot<FMT_Q2K, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q3K: warp_dot<FMT_Q3K, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q4K: warp_dot<FMT_Q4K, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q5K: warp_dot<FMT_Q5K, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    case FMT_Q6K: warp_dot<FMT_Q6K, RT>(row, X, n_in, nr, nw, inv, w0, wpf, acc); break;
    default:
#pragma unroll
        for (int r = 0; r < RT; r++) acc[r] = __int_as_float(0x7fc00000);
    }
}

// The epilogue of output feature o of matrix mi for batch row r (r0 + r overall): s is the
// finished dot (mode 2: of the gate), t the up projection's.
__device__ __forceinline__ void mv_finish(const MvArgs& a, int mi, int o, int row, float s,
                                          float t) {
    float* Y = mi == 2 ? a.m[2].y : mi == 1 ? a.m[1].y : a.m[0].y;
    int ny = mi == 2 ? a.m[2].n_out : mi == 1 ? a.m[1].n_out : a.m[0].n_out;
    float* y = Y + (size_t)row * ny + o;
    if (a.mode == 0) {
        *y = s;
    } else if (a.mode == 1) {
        *y = *y + s;
    } else {
        *y = act_fn(s, a.act) * t;
    }
}

// Grid (blocks, ceil(rows / RT)), block 32 * MV_WARPS; blocks <= what the GPU holds at once,
// each block walking feature groups blockIdx.x, blockIdx.x + gridDim.x, ... (the grid size
// changes which block computes a feature, never how). In a group, feature f is computed by
// wpf consecutive warps (wpf divides MV_WARPS). Grid row t covers batch rows t*RT..t*RT+RT-1.
// stage_x = 1 (norm launches whose tile fits): the normalized rows are computed once per
// block into dynamic shared memory, with the same expression as the on-the-fly path.
template <int RT>
__device__ __forceinline__ void mv_body(const MvArgs& a, int wpf, int features, int stage_x) {
    extern __shared__ float xs[];
    __shared__ float inv[RT];
    __shared__ float pa[MV_WARPS][RT];
    __shared__ float pb[MV_WARPS][RT];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = blockIdx.y * RT;
    int nr = a.rows - r0;
    if (nr > RT) nr = RT;
    const float* X = a.x + (size_t)r0 * a.n_in;
    const float* nw = a.norm;
    if (a.norm) {
        for (int r = warp; r < nr; r += MV_WARPS) {
            float ss = sumsq32(X + (size_t)r * a.n_in, a.n_in);
            if (lane == 0) inv[r] = 1.0f / sqrtf(ss / (float)a.n_in + a.eps);
        }
        __syncthreads();
        if (stage_x) {
            for (int i = threadIdx.x; i < nr * a.n_in; i += blockDim.x) {
                int r = i / a.n_in, e = i - r * a.n_in;
                xs[i] = (X[i] * inv[r]) * a.norm[e];
            }
            __syncthreads();
            X = xs;
            nw = 0;
        }
    }
    int n0 = a.m[0].n_out;
    int n1 = a.n_mat > 1 ? a.m[1].n_out : 0;
    int n2 = a.n_mat > 2 ? a.m[2].n_out : 0;
    int fpb = MV_WARPS / wpf;
    int w0 = warp % wpf;
    for (int base = blockIdx.x * fpb; base < features; base += gridDim.x * fpb) {
        int f = base + warp / wpf;
        // Which matrix and output feature this warp works on (-1: past the end).
        int mi = -1, o = 0;
        if (f < features) {
            if (a.mode == 2 || f < n0) {
                mi = 0; o = f;
            } else if (f < n0 + n1) {
                mi = 1; o = f - n0;
            } else if (f < n0 + n1 + n2) {
                mi = 2; o = f - n0 - n1;
            }
        }
        float ga[RT], gb[RT];
#pragma unroll
        for (int r = 0; r < RT; r++) { ga[r] = 0.0f; gb[r] = 0.0f; }
        int passes = a.mode == 2 ? 2 : 1;
        for (int pass = 0; pass < passes; pass++) {
            if (mi < 0) break;
            // Field-wise selects keep the kernel parameter in param space (no local copy).
            // Pass 1 (mode 2 only) is the up projection of the same output feature.
            int pm = pass == 1 ? 1 : mi;
            const u8* W = pm == 2 ? a.m[2].w : pm == 1 ? a.m[1].w : a.m[0].w;
            u64 rb = pm == 2 ? a.m[2].row_bytes : pm == 1 ? a.m[1].row_bytes : a.m[0].row_bytes;
            int fmt = pm == 2 ? a.m[2].fmt : pm == 1 ? a.m[1].fmt : a.m[0].fmt;
            float acc[RT];
            warp_dot_any<RT>(fmt, W + (size_t)o * rb, X, a.n_in, nr, nw, inv, w0, wpf, acc);
#pragma unroll
            for (int r = 0; r < RT; r++) {
                acc[r] = tree32(acc[r]);
                if (pass == 0) ga[r] = acc[r];
                else gb[r] = acc[r];
            }
        }
        if (wpf == 1) {
            // The warp holds the whole dot: lane 0 finishes every row.
            if (mi >= 0 && lane == 0) {
#pragma unroll
                for (int r = 0; r < RT; r++)
                    if (r < nr) mv_finish(a, mi, o, r0 + r, ga[r], gb[r]);
            }
            continue;  // uniform: wpf is a launch parameter
        }
        if (mi >= 0 && lane == 0) {
#pragma unroll
            for (int r = 0; r < RT; r++) {
                pa[warp][r] = ga[r];
                pb[warp][r] = gb[r];
            }
        }
        __syncthreads();
        // The group's first warp; lane r finishes batch row r, summing partials in warp order.
        if (mi >= 0 && w0 == 0 && lane < nr) {
            float s = pa[warp][lane], t = pb[warp][lane];
            for (int i = 1; i < wpf; i++) {
                s = s + pa[warp + i][lane];
                t = t + pb[warp + i][lane];
            }
            mv_finish(a, mi, o, r0 + lane, s, t);
        }
        __syncthreads();  // pa/pb are reused by the next round
    }
}

// RT = 1 for single-row launches, 8 for batches: the per-row arithmetic is the same in both.
// At least 4 blocks (32 warps) per SM: decode matvecs are latency-bound, and the bytes in
// flight scale with resident warps.
extern "C" __global__ void __launch_bounds__(256, 4) mv_r1(MvArgs a, int wpf, int features, int stage_x) { mv_body<1>(a, wpf, features, stage_x); }
extern "C" __global__ void __launch_bounds__(256, 4) mv_r8(MvArgs a, int wpf, int features, int stage_x) { mv_body<8>(a, wpf, features, stage_x); }
