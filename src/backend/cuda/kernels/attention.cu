// Decode attention of one query row over its cached window, GQA, one block per (head, row),
// with the steps that precede it fused in: the q/k/v projection biases (qwen2; one f32 add
// each, as crate::model::forward adds them), the q/k head norms (gemma3, qwen3), RoPE from
// the host table (Config::layer_rope_table, the CPU's bits, frequency factors included), and
// the KV-cache append.
//
// The block of q head h stages raw q head h and k/v head kh = h / group in shared memory,
// adds the biases, norms and rotates them there, and (only the group's first head,
// h % group == 0) stores k/v at (seq, slot). Every block reads slots < slot from the cache
// (written by earlier launches) and its own slot from its own shared copy: all copies of a
// group compute the same bits from the same scratch values (biases included), so no block
// waits for another and the cache ends up holding exactly what was read.
//
// kv_mode: 0 fused (store, then attend: rows whose reads never include a sibling row of the
// same launch, i.e. one row per sequence); 1 store only (the block exits after its store);
// 2 attend only (no store). Rows of ONE sequence at consecutive slots (a prime chunk, a
// verify round) read their siblings' slots, so the host launches mode 1 over every row of
// the step before mode 2 over any (stream order: every store before any read). Mode 2
// recomputes a row's own k/v in shared memory from the same scratch, so it reads the same
// bits mode 1 stored, and each row's arithmetic is the one-row path's.
//
// Orders: head norm = sumsq32 + (x * inv) * w; RoPE h[a] = x0 * cos - x1 * sin,
// h[b] = x0 * sin + x1 * cos (style 0 llama NORM pairs 2i, 2i+1; 1 gemma3/qwen NEOX i,
// i + half);
// score_t = (8-lane dot + tree8) * scale; max (exact, order-free); p_t = exp(score_t - max);
// sum by 8 lanes over positions (lane l takes t % 8 == l in order) + tree8; inv = 1 / sum;
// out[d] = sum over t in position order of (p_t * inv) * v_t[d], starting from 0. Scores
// live in dynamic shared memory (n_pos floats; the host checks the window fits).
//
// Row positions come through `rp` (the step's RowPos group in device memory, see common.cu),
// the layer's sliding window (0: none) by value: the only per-step data is in the buffer, so
// a CUDA graph of the layers replays this launch unchanged.
#define ATT_MAX_HD 512
// Loads each thread keeps in flight in the score and output loops. Why 32: at a few hundred
// positions these loops are chains of dependent round trips to L2 (8 loads each, 16 trips
// for gemma3's 256-wide heads at 128 positions); 32 cuts the chain by 4 and changes no sum's
// order (each thread still adds in element, then position, order).
#define ATT_DEPTH 32
// The output loop keeps twice as many V loads in flight: a head of 256 (one thread group) at
// 128 positions is 4 round trips at 32, 2 at 64. Same adds in the same order.
#define ATT_VDEPTH 64

// Scores of the common head widths (hd = 8 * PER): each 8-lane group loads P positions' k
// rows (P * PER = 64 values per lane) in one round trip, then forms each position's dot
// exactly as the generic loop below does (lane l adds elements l, l + 8, ... in order, then
// tree8, then * scale). Why: at a few hundred positions the generic loop is one L2 round
// trip per 32 positions; this is one per 32 * P (256 at hd 64, 128 at hd 128, 64 at hd 256).
// Which positions share a trip changes no position's arithmetic.
template <int PER, int P>
__device__ __forceinline__ void att_scores(const float* qs, const float* ks, const float* Kr,
                                           int kvd, int n_pos, float scale, float* sc) {
    const int l = threadIdx.x & 7, g = threadIdx.x >> 3, n_groups = blockDim.x >> 3;
    const int last = n_pos - 1;
    for (int t0 = 0; t0 < n_pos; t0 += n_groups * P) {
        float kv[P][PER];
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int t = t0 + j * n_groups + g;
            const float* kt = t == last ? ks : Kr + (size_t)t * kvd;
#pragma unroll
            for (int u = 0; u < PER; u++) kv[j][u] = t < n_pos ? kt[l + 8 * u] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int t = t0 + j * n_groups + g;
            float acc = 0.0f;
#pragma unroll
            for (int u = 0; u < PER; u++) acc = acc + qs[l + 8 * u] * kv[j][u];
            acc = tree8(acc);  // full warp: every lane runs every j
            if (t < n_pos && l == 0) sc[t] = acc * scale;
        }
    }
}

extern "C" __global__ void attention(const float* q, const float* k, const float* v,
                                     const float* bq, const float* bk, const float* bv,
                                     const float* qn, const float* kn, float eps,
                                     const float* table, int style, float* K, float* V,
                                     float* out, int n_heads, int n_kv_heads, int hd, int ctx,
                                     float scale, int kv_mode, int window,
                                     const RowPos* rp) {
    extern __shared__ float sc[];
    __shared__ float qs[ATT_MAX_HD], ks[ATT_MAX_HD], vs[ATT_MAX_HD];
    __shared__ float cs[ATT_MAX_HD / 2], sn[ATT_MAX_HD / 2];
    __shared__ float red[4];
    __shared__ float part[256];  // output partials (G groups x hd <= blockDim = 256)
    pdl_trigger();
    // Everything below reads the step's RowPos (written by rowpos_set earlier on the stream)
    // or the scratch the previous kernel wrote: only after the wait (read after write).
    pdl_wait();
    int h = blockIdx.x, r = blockIdx.y;
    if ((u32)r >= rp->n) return;  // uniform over the block
    int group = n_heads / n_kv_heads;
    int kh = h / group;
    int kvd = n_kv_heads * hd;
    int qd = n_heads * hd;
    int p = (int)rp->pos[r];
    int slot = (int)rp->slot[r];
    size_t seq = (size_t)rp->seq[r];
    // The first slot this row attends to: Config::attn_start of its position, moved by the
    // slot's offset from the position (RowAt::from_slot; its mirror `from_slot_in_kernel`
    // in engine.rs is tested against it). window 0: the whole sequence; else the positions
    // (p + 1 - window)..=p.
    u32 span = (window > 0 && (u32)p + 1 >= (u32)window) ? (u32)window - 1 : (u32)p;
    int from = slot - (int)((u32)slot < span ? (u32)slot : span);
    int n_pos = slot + 1 - from;
    int tid = threadIdx.x;
    const float* qh = q + (size_t)r * qd + (size_t)h * hd;
    const float* kr = k + (size_t)r * kvd + (size_t)kh * hd;
    const float* vr = v + (size_t)r * kvd + (size_t)kh * hd;
    int half = hd / 2;
    const float* Kr = K + (seq * ctx + from) * kvd + (size_t)kh * hd;
    const float* Vr = V + (seq * ctx + from) * kvd + (size_t)kh * hd;
    // The cached K and V rows this block will read start their trip to L2 now, while the
    // block loads and rotates its q/k/v (a hint: no value and no ordering depends on it).
    for (int t = tid; kv_mode != 1 && t < n_pos - 1; t += blockDim.x) {
        prefetch_l2((const u8*)(Kr + (size_t)t * kvd), 4 * (u64)hd, 0, 1);
        prefetch_l2((const u8*)(Vr + (size_t)t * kvd), 4 * (u64)hd, 0, 1);
    }
    // One round of loads: this head's q, k, v (plus their biases, each null or one value per
    // projection output) and the RoPE cos/sin of position p.
    for (int i = tid; i < hd; i += blockDim.x) {
        qs[i] = bq ? qh[i] + bq[(size_t)h * hd + i] : qh[i];
        ks[i] = bk ? kr[i] + bk[(size_t)kh * hd + i] : kr[i];
        vs[i] = bv ? vr[i] + bv[(size_t)kh * hd + i] : vr[i];
    }
    for (int i = tid; i < half; i += blockDim.x) {
        cs[i] = table[(size_t)p * half + i];
        sn[i] = table[(size_t)ctx * half + (size_t)p * half + i];
    }
    __syncthreads();
    if (qn) {
        // Warp 0 norms q, warp 1 norms k (whole warps: the block has >= 64 threads).
        if (tid < 64) {
            const float* src = tid < 32 ? qs : ks;
            float ss = sumsq32(src, hd);
            if ((tid & 31) == 0) red[tid >> 5] = 1.0f / sqrtf(ss / (float)hd + eps);
        }
        __syncthreads();
        float iq = red[0], ik = red[1];
        for (int i = tid; i < hd; i += blockDim.x) {
            qs[i] = (qs[i] * iq) * qn[i];
            ks[i] = (ks[i] * ik) * kn[i];
        }
        __syncthreads();
    }
    for (int i = tid; i < half; i += blockDim.x) {
        float c = cs[i];
        float s = sn[i];
        int a = style == 0 ? 2 * i : i;
        int b = style == 0 ? 2 * i + 1 : i + half;
        float x0 = qs[a], x1 = qs[b];
        qs[a] = x0 * c - x1 * s;
        qs[b] = x0 * s + x1 * c;
        x0 = ks[a];
        x1 = ks[b];
        ks[a] = x0 * c - x1 * s;
        ks[b] = x0 * s + x1 * c;
    }
    __syncthreads();
    if (h % group == 0 && kv_mode != 2) {
        size_t dst = (seq * ctx + slot) * kvd + (size_t)kh * hd;
        for (int i = tid; i < hd; i += blockDim.x) {
            K[dst + i] = ks[i];
            V[dst + i] = vs[i];
        }
    }
    if (kv_mode == 1) return;  // uniform over the block
    int l = tid & 7, g = tid >> 3, n_groups = blockDim.x >> 3;
    int last = n_pos - 1;  // window index of position p: read from shared memory

    // Scores: 8 threads per position; loop bounds uniform so the shuffles are full-warp.
    if (blockDim.x == 256 && hd == 64) att_scores<8, 8>(qs, ks, Kr, kvd, n_pos, scale, sc);
    else if (blockDim.x == 256 && hd == 128) att_scores<16, 4>(qs, ks, Kr, kvd, n_pos, scale, sc);
    else if (blockDim.x == 256 && hd == 256) att_scores<32, 2>(qs, ks, Kr, kvd, n_pos, scale, sc);
    else for (int t0 = 0; t0 < n_pos; t0 += n_groups) {
        int t = t0 + g;
        float acc = 0.0f;
        if (t < n_pos) {
            const float* kt = t == last ? ks : Kr + (size_t)t * kvd;
            // ATT_DEPTH loads in flight (a whole head of up to 8 * ATT_DEPTH values in one
            // round trip), then the adds in element order: l, l + 8, l + 16, ...
            for (int i0 = l; i0 < hd; i0 += 8 * ATT_DEPTH) {
                float kv[ATT_DEPTH];
#pragma unroll
                for (int u = 0; u < ATT_DEPTH; u++) kv[u] = i0 + 8 * u < hd ? kt[i0 + 8 * u] : 0.0f;
#pragma unroll
                for (int u = 0; u < ATT_DEPTH; u++)
                    if (i0 + 8 * u < hd) acc = acc + qs[i0 + 8 * u] * kv[u];
            }
        }
        acc = tree8(acc);
        if (t < n_pos && l == 0) sc[t] = acc * scale;
    }
    __syncthreads();
    if (tid < 32) {
        // The max is exact in any order (fmaxf rounds nothing): 32 lanes, then a shuffle tree.
        float m = __int_as_float(0xff800000);  // -inf
        for (int t = tid; t < n_pos; t += 32) m = fmaxf(m, sc[t]);
        for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
        if (tid == 0) red[2] = m;
    }
    __syncthreads();
    float m = red[2];
    for (int t = tid; t < n_pos; t += blockDim.x) sc[t] = expf(sc[t] - m);
    __syncthreads();
    if (tid < 32) {
        float acc = 0.0f;
        if (tid < 8) {
            for (int t = tid; t < n_pos; t += 8) acc = acc + sc[t];
        }
        acc = tree8(acc);
        if (tid == 0) red[3] = 1.0f / acc;
    }
    __syncthreads();
    float inv = red[3];
    // Output: G = blockDim / hd thread groups (at least 1) split the cached positions
    // 0..last into G contiguous ranges; each sums its range in position order, then group
    // partials are added in group order and the current position last. Fixed by n_pos, hd
    // and the block size (always 256).
    int G = blockDim.x / hd;
    if (G < 1) G = 1;
    int chunk = (last + G - 1) / G;
    float* oh = out + (size_t)r * qd + (size_t)h * hd;
    for (int d0 = 0; d0 < hd; d0 += blockDim.x) {
        int d = d0 + tid % hd, g = tid / hd;
        if (G == 1) { d = d0 + tid; g = 0; }
        float o = 0.0f;
        if (d < hd && g < G) {
            int t1 = (g + 1) * chunk < last ? (g + 1) * chunk : last;
            // ATT_VDEPTH cached V values in flight per trip, then the adds in position order.
            for (int t0 = g * chunk; t0 < t1; t0 += ATT_VDEPTH) {
                float vv[ATT_VDEPTH];
#pragma unroll
                for (int u = 0; u < ATT_VDEPTH; u++)
                    vv[u] = t0 + u < t1 ? Vr[(size_t)(t0 + u) * kvd + d] : 0.0f;
#pragma unroll
                for (int u = 0; u < ATT_VDEPTH; u++)
                    if (t0 + u < t1) o = o + (sc[t0 + u] * inv) * vv[u];
            }
            part[g * hd + d - d0] = o;
        }
        __syncthreads();
        if (d < hd && g == 0) {
            float s = part[d - d0];
            for (int i = 1; i < G; i++) s = s + part[i * hd + d - d0];
            oh[d] = s + (sc[last] * inv) * vs[d];
        }
        __syncthreads();
    }
}
