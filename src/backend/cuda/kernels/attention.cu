// Decode attention of one query row over its cached window, GQA, one block per (head, row),
// with the steps that precede it fused in: the q/k/v projection biases (qwen2; one f32 add
// each, as crate::model::forward adds them), the q/k head norms (gemma3, qwen3), RoPE from
// the host table (Config::layer_rope_table, the CPU's bits, frequency factors included), and
// the KV-cache append.
//
// The block of q head h loads q head h and k/v head kh = h / group, adds the biases, norms
// them (in shared memory) and rotates them (in registers when there is no norm), and (only
// the group's first head, h % group == 0) stores k/v at (seq, slot). Every block reads
// slots < slot from the cache (written by earlier launches) and its own slot from its own
// shared copy: all copies of a group compute the same bits from the same scratch values
// (biases included), so no block waits for another and the cache ends up holding exactly
// what was read.
//
// kv_mode: 0 fused (store, then attend: rows whose reads never include a sibling row of the
// same launch, i.e. one row per sequence); 1 store only (grid.x = n_kv_heads: one block per
// kv head, as the group's first head; it exits after its store);
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
// out[d] = (group partials in group order) + (p_last * inv) * v_last[d], a group's partial
// the sum over its contiguous range of positions, in position order, of (p_t * inv) * v_t[d]
// starting from 0 (att_fused step (7)). Scores live in dynamic shared memory (n_pos floats;
// the host checks the window fits).
//
// Two kernels run this one body (att_fused): `attention` and `attention_early`, which differ
// only in when the K and V loads leave (the host picks by the launch's blocks, att_kernel in
// engine/attention.rs): the same arithmetic, so the same bits.
//
// Row positions come through `rp` (the step's RowPos groups in device memory, see common.cu),
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

// The first slot a row at position p stored at `slot` attends to: Config::attn_start of its
// position, moved by the slot's offset from the position (RowAt::from_slot; its mirror
// `from_slot_in_kernel` in engine/attention.rs is tested against it). window 0: the whole sequence;
// else the positions (p + 1 - window)..=p. Both attention kernels take it from here.
__device__ __forceinline__ int att_from(int p, int slot, int window) {
    u32 span = (window > 0 && (u32)p + 1 >= (u32)window) ? (u32)window - 1 : (u32)p;
    return slot - (int)((u32)slot < span ? (u32)slot : span);
}

// RoPE rotation of one pair (x0, x1) at cos/sin c, s: the header's two expressions, in
// registers (`attention` rotates the pair its thread loaded) or in place (rope_pair).
__device__ __forceinline__ void rope2(float& x0, float& x1, float c, float s) {
    const float a = x0 * c - x1 * s;
    const float b = x0 * s + x1 * c;
    x0 = a;
    x1 = b;
}

// RoPE of pair (a, b) of head vector v at the position whose cos/sin are c, s (style 0
// pairs 2i, 2i + 1; style 1 pairs i, i + half): rope2 in place, the one expression both
// attention kernels rotate q (and `attention` k) with, so they rotate to the same bits.
__device__ __forceinline__ void rope_pair(float* v, int i, int half, int style, float c,
                                          float s) {
    const int a = style == 0 ? 2 * i : i;
    const int b = style == 0 ? 2 * i + 1 : i + half;
    rope2(v[a], v[b], c, s);
}

// Scores of the common head widths (hd = 8 * PER): each 8-lane group loads P positions' k
// rows (P * PER = 64 values per lane) in one round trip, then forms each position's dot
// exactly as the generic loop in att_fused does (lane l adds elements l, l + 8, ... in order,
// then tree8, then * scale). Why: at a few hundred positions the generic loop is one L2
// round trip per 32 positions; this is one per 32 * P (256 at hd 64, 128 at hd 128, 64 at
// hd 256). Which positions share a trip changes no position's arithmetic.
//
// Split in a load half and a dot half so that the first trip's loads leave with the block's
// other position-dependent loads (the RoPE table, the first V trip), before q and k are
// rotated: the K round trip overlaps the table's instead of following the rotation.
// att_kload leaves position `last` (this row's own slot, not in the cache yet) at 0;
// att_kdots takes its k from the rotated shared copy.
template <int PER, int P>
__device__ __forceinline__ void att_kload(float (&kv)[P][PER], const float* Kr, int kvd, int t0,
                                          int last) {
    const int l = threadIdx.x & 7, g = threadIdx.x >> 3, n_groups = blockDim.x >> 3;
#pragma unroll
    for (int j = 0; j < P; j++) {
        const int t = t0 + j * n_groups + g;
        const float* kt = Kr + (size_t)t * kvd;
#pragma unroll
        for (int u = 0; u < PER; u++) kv[j][u] = t < last ? kt[l + 8 * u] : 0.0f;
    }
}

// The dots of one trip (positions t0 + j * n_groups + g): sc[t] = (8-lane dot + tree8) *
// scale, and the running maximum m of this thread's positions' scores (exact in any order:
// fmaxf rounds nothing), which the block folds into one value instead of rereading sc.
template <int PER, int P>
__device__ __forceinline__ float att_kdots(float (&kv)[P][PER], const float* qs, const float* ks,
                                           int t0, int n_pos, float scale, float* sc, float m) {
    const int l = threadIdx.x & 7, g = threadIdx.x >> 3, n_groups = blockDim.x >> 3;
    const int last = n_pos - 1;
#pragma unroll
    for (int j = 0; j < P; j++) {
        const int t = t0 + j * n_groups + g;
        if (t == last) {
#pragma unroll
            for (int u = 0; u < PER; u++) kv[j][u] = ks[l + 8 * u];
        }
        float acc = 0.0f;
#pragma unroll
        for (int u = 0; u < PER; u++) acc = acc + qs[l + 8 * u] * kv[j][u];
        acc = tree8(acc);  // full warp: every lane runs every j
        const float s = acc * scale;
        if (t < n_pos) {
            if (l == 0) sc[t] = s;
            m = fmaxf(m, s);
        }
    }
    return m;
}

// The body of both one-row attention kernels for one (head, row) block, after its RowPos
// entry is read (p, slot, seq; live: the entry is one of the group's n). PER, P: the score
// trip shape of the head width (att_kload), PER = 0: the generic score loop. The block is
// 256 threads (the host's launch; `part` and the one RoPE pair per thread rest on it), but
// for the store pass (kv_mode 1), whose blocks are the head's width in whole warps, at least
// 64 (engine/attention.rs att_store_threads): a RoPE pair a thread below hd / 2 and v
// elements tid and tid + 256 below hd cover the head, the norms take warps 0 and 1, and the
// pass returns before anything that rests on 256 threads; no score row (no dynamic memory).
//
// Critical path, in dependent steps: (1) raw q/k pair, v and biases (no position needed);
// (2) the RoPE table at p and, with EARLY, the first K trip and the first V trip (every
// address is known from the RowPos entry, so they leave together); (3) rotate in registers,
// one barrier; (4) scores with per-warp maxima, one barrier; (5) expf, one barrier; (6) the
// 8-lane sum, one barrier; (7) the adds of V (with EARLY, the first trip's values are
// already in registers), then the group partials. Without EARLY, K and V load where they
// are used (a K trip after (3), a V trip after (6)): ~100 registers instead of ~210, two
// blocks per SM. Every value keeps the arithmetic and order of the header either way; only
// when loads leave and where a value waits (register or shared memory) differ.
template <int PER, int P, bool EARLY>
__device__ __forceinline__ void att_fused(
    const float* q, const float* k, const float* v, const float* bq, const float* bk,
    const float* bv, const float* qn, const float* kn, float eps, const float* table, int style,
    float* K, float* V, float* out, int n_heads, int n_kv_heads, int hd, int ctx, float scale,
    int kv_mode, int window, bool live, int p, int slot, size_t seq, float* sc, float* qs,
    float* ks, float* vs, float* red, float* part) {
    // The store pass (kv_mode 1) runs one block per kv head and row (grid.x = n_kv_heads):
    // block kh takes the group's first q head, the one whose block stores; the other heads'
    // blocks of a full grid would only have loaded and left.
    const int group = n_heads / n_kv_heads;
    const int h = kv_mode == 1 ? (int)blockIdx.x * group : (int)blockIdx.x;
    const int r = blockIdx.y, tid = threadIdx.x, kh = h / group;
    const int kvd = n_kv_heads * hd, qd = n_heads * hd, half = hd / 2;
    const float* qh = q + (size_t)r * qd + (size_t)h * hd;
    const float* kr = k + (size_t)r * kvd + (size_t)kh * hd;
    const float* vr = v + (size_t)r * kvd + (size_t)kh * hd;
    // (1) Thread tid holds RoPE pair tid (a, b) of q and k and v elements tid, tid + 256
    // (half <= 256 and hd <= 512 = ATT_MAX_HD), biases added as they load (one add each).
    // Grid rows past the group's n read their scratch row too (it exists: grid.y <= the
    // scratch's rows) and leave below, so these loads need not wait for n.
    const int a = style == 0 ? 2 * tid : tid, b = style == 0 ? 2 * tid + 1 : tid + half;
    const bool pair = tid < half;
    float qa = 0.0f, qb = 0.0f, ka = 0.0f, kb = 0.0f, v0 = 0.0f, v1 = 0.0f;
    if (pair) {
        qa = bq ? qh[a] + bq[(size_t)h * hd + a] : qh[a];
        qb = bq ? qh[b] + bq[(size_t)h * hd + b] : qh[b];
        ka = bk ? kr[a] + bk[(size_t)kh * hd + a] : kr[a];
        kb = bk ? kr[b] + bk[(size_t)kh * hd + b] : kr[b];
    }
    if (tid < hd) v0 = bv ? vr[tid] + bv[(size_t)kh * hd + tid] : vr[tid];
    if (tid + 256 < hd) v1 = bv ? vr[tid + 256] + bv[(size_t)kh * hd + tid + 256] : vr[tid + 256];
    if (!live) return;  // uniform over the block
    const int from = att_from(p, slot, window);  // the first slot this row attends to
    const int n_pos = slot + 1 - from;
    const int last = n_pos - 1;  // window index of position p: read from shared memory
    const bool attend = kv_mode != 1;
    const float* Kr = K + (seq * ctx + from) * kvd + (size_t)kh * hd;
    const float* Vr = V + (seq * ctx + from) * kvd + (size_t)kh * hd;
    // (2) The cos/sin of position p for this thread's pair, then the first K trip and the
    // first V trip (positions < last: written by earlier launches, read after pdl_wait).
    float c = 0.0f, s = 0.0f;
    if (pair) {
        c = table[(size_t)p * half + tid];
        s = table[(size_t)ctx * half + (size_t)p * half + tid];
    }
    float kv[PER > 0 ? P : 1][PER > 0 ? PER : 1];
    if constexpr (PER > 0 && EARLY) {
        if (attend) att_kload<PER, P>(kv, Kr, kvd, 0, last);
    }
    // Output split (see (7)): G = blockDim / hd thread groups (at least 1) over the cached
    // positions 0..last, thread (vd, vg) walking range [va, vb) of group vg for element vd
    // (its first d block; heads over 256 wide have a second). With EARLY, its first
    // ATT_VDEPTH values now.
    int G = blockDim.x / hd;
    if (G < 1) G = 1;
    const int chunk = (last + G - 1) / G;
    int vd = tid % hd, vg = tid / hd;
    if (G == 1) { vd = tid; vg = 0; }
    const int va = vg * chunk, vb = (vg + 1) * chunk < last ? (vg + 1) * chunk : last;
    const bool vown = attend && vd < hd && vg < G;
    float vv0[EARLY ? ATT_VDEPTH : 1];
    if constexpr (EARLY) {
        // One pointer stepped by a row (an add per load, not a 64-bit multiply).
        const float* vt = Vr + (size_t)va * kvd + vd;
#pragma unroll
        for (int u = 0; u < ATT_VDEPTH; u++, vt += kvd)
            vv0[u] = vown && va + u < vb ? *vt : 0.0f;
    }
    // The cached rows not loaded yet start their trip to L2 now (a hint: no value and no
    // ordering depends on it).
    const int kcov = PER > 0 && EARLY ? (int)(blockDim.x >> 3) * P : 0;
    const int vcov = EARLY ? ATT_VDEPTH : 0;
    for (int t = tid; attend && t < last; t += blockDim.x) {
        if (t >= kcov) prefetch_l2((const u8*)(Kr + (size_t)t * kvd), 4 * (u64)hd, 0, 1);
        if (t - (t / chunk) * chunk >= vcov)
            prefetch_l2((const u8*)(Vr + (size_t)t * kvd), 4 * (u64)hd, 0, 1);
    }
    // (3) Rotate in registers (no head norm) or stage raw for the norm, one barrier.
    if (pair) {
        if (!qn) {
            rope2(qa, qb, c, s);
            rope2(ka, kb, c, s);
        }
        qs[a] = qa;
        qs[b] = qb;
        ks[a] = ka;
        ks[b] = kb;
    }
    if (tid < hd) vs[tid] = v0;
    if (tid + 256 < hd) vs[tid + 256] = v1;
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
        if (pair) {
            rope_pair(qs, tid, half, style, c, s);
            rope_pair(ks, tid, half, style, c, s);
        }
        __syncthreads();
    }
    if (h % group == 0 && kv_mode != 2) {
        size_t dst = (seq * ctx + slot) * kvd + (size_t)kh * hd;
        for (int i = tid; i < hd; i += blockDim.x) {
            K[dst + i] = ks[i];
            V[dst + i] = vs[i];
        }
    }
    if (!attend) return;  // uniform over the block
    // (4) Scores: 8 threads per position; loop bounds uniform so the shuffles are full-warp.
    float m = __int_as_float(0xff800000);  // -inf
    if constexpr (PER > 0) {
        for (int t0 = 0; t0 < n_pos; t0 += (int)(blockDim.x >> 3) * P) {
            if (!EARLY || t0 > 0) att_kload<PER, P>(kv, Kr, kvd, t0, last);
            m = att_kdots<PER, P>(kv, qs, ks, t0, n_pos, scale, sc, m);
        }
    } else {
        const int l = tid & 7, g = tid >> 3, n_groups = blockDim.x >> 3;
        for (int t0 = 0; t0 < n_pos; t0 += n_groups) {
            int t = t0 + g;
            float acc = 0.0f;
            if (t < n_pos) {
                const float* kt = t == last ? ks : Kr + (size_t)t * kvd;
                // ATT_DEPTH loads in flight (a whole head of up to 8 * ATT_DEPTH values in
                // one round trip), then the adds in element order: l, l + 8, l + 16, ...
                for (int i0 = l; i0 < hd; i0 += 8 * ATT_DEPTH) {
                    float kd[ATT_DEPTH];
#pragma unroll
                    for (int u = 0; u < ATT_DEPTH; u++)
                        kd[u] = i0 + 8 * u < hd ? kt[i0 + 8 * u] : 0.0f;
#pragma unroll
                    for (int u = 0; u < ATT_DEPTH; u++)
                        if (i0 + 8 * u < hd) acc = acc + qs[i0 + 8 * u] * kd[u];
                }
            }
            acc = tree8(acc);
            const float sv = acc * scale;
            if (t < n_pos) {
                if (l == 0) sc[t] = sv;
                m = fmaxf(m, sv);
            }
        }
    }
    // The max is exact in any order (fmaxf rounds nothing): each warp's lanes by a shuffle
    // tree, then every thread over the warps' maxima, instead of one warp rereading sc after
    // a barrier of its own.
    for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    if ((tid & 31) == 0) red[4 + (tid >> 5)] = m;
    __syncthreads();
    m = red[4];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, red[4 + w]);
    // (5) p_t = expf(score_t - max).
    for (int t = tid; t < n_pos; t += blockDim.x) sc[t] = expf(sc[t] - m);
    __syncthreads();
    // (6) Sum by 8 lanes over positions (lane l: t % 8 == l in order), 8 loads in flight
    // per trip, then tree8; inv = 1 / sum.
    if (tid < 32) {
        float acc = 0.0f;
        if (tid < 8) {
            for (int t0 = tid; t0 < n_pos; t0 += 64) {
                float x[8];
#pragma unroll
                for (int u = 0; u < 8; u++) x[u] = t0 + 8 * u < n_pos ? sc[t0 + 8 * u] : 0.0f;
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (t0 + 8 * u < n_pos) acc = acc + x[u];
            }
        }
        acc = tree8(acc);
        if (tid == 0) red[2] = 1.0f / acc;
    }
    __syncthreads();
    const float inv = red[2];
    // (7) Output: group vg sums its range in position order, then the group partials are
    // added in group order and the current position last. Fixed by n_pos, hd and the block
    // size (always 256). With EARLY the first trip of the first d block is vv0.
    float* oh = out + (size_t)r * qd + (size_t)h * hd;
    for (int d0 = 0; d0 < hd; d0 += blockDim.x) {
        const int d = d0 + vd, g = vg;
        float o = 0.0f;
        if (d < hd && g < G) {
            // ATT_VDEPTH cached V values in flight per trip, then the adds in position order.
            for (int t0 = va; t0 < vb; t0 += ATT_VDEPTH) {
                float vv[ATT_VDEPTH];
                if (EARLY && d0 == 0 && t0 == va) {
#pragma unroll
                    for (int u = 0; u < ATT_VDEPTH; u++) vv[u] = vv0[EARLY ? u : 0];
                } else {
                    const float* vt = Vr + (size_t)t0 * kvd + d;
#pragma unroll
                    for (int u = 0; u < ATT_VDEPTH; u++, vt += kvd)
                        vv[u] = t0 + u < vb ? *vt : 0.0f;
                }
#pragma unroll
                for (int u = 0; u < ATT_VDEPTH; u++)
                    if (t0 + u < vb) o = o + (sc[t0 + u] * inv) * vv[u];
            }
            part[g * hd + d - d0] = o;
        }
        __syncthreads();
        if (d < hd && g == 0) {
            float sum = part[d - d0];
            for (int i = 1; i < G; i++) sum = sum + part[i * hd + d - d0];
            oh[d] = sum + (sc[last] * inv) * vs[d];
        }
        // part is rewritten by the next d block only (heads over 256 wide): no barrier
        // after the last one (uniform over the block).
        if (d0 + (int)blockDim.x < hd) __syncthreads();
    }
}

// The parameters of both one-row kernels (and att_entry), and their names as arguments.
#define ATT_PARAMS                                                                      \
    const float* q, const float* k, const float* v, const float* bq, const float* bk,   \
        const float* bv, const float* qn, const float* kn, float eps, const float* table, \
        int style, float* K, float* V, float* out, int n_heads, int n_kv_heads, int hd,  \
        int ctx, float scale, int kv_mode, int window, const RowPos* rp
#define ATT_ARGS                                                                        \
    q, k, v, bq, bk, bv, qn, kn, eps, table, style, K, V, out, n_heads, n_kv_heads, hd, \
        ctx, scale, kv_mode, window, rp
// att_entry's call of att_fused: the kernel's values, the row's positions, the shared arrays.
#define ATT_FUSED_ARGS                                                                  \
    q, k, v, bq, bk, bv, qn, kn, eps, table, style, K, V, out, n_heads, n_kv_heads, hd, \
        ctx, scale, kv_mode, window, live, p, slot, seq, sc, qs, ks, vs, red, part

// Both one-row kernels: the block's shared memory, the RowPos read and the dispatch over
// the head widths with a trip shape (att_kload). Each kernel instantiates it once, so each
// holds one copy of these arrays.
template <bool EARLY>
__device__ __forceinline__ void att_entry(ATT_PARAMS) {
    DYN_SHARED(float, sc);
    __shared__ float qs[ATT_MAX_HD], ks[ATT_MAX_HD], vs[ATT_MAX_HD];
    // red: [0], [1] the q/k head norms' 1 / rms, [2] 1 / sum, [4 + w] warp w's score maximum.
    __shared__ float red[12];
    __shared__ float part[256];  // output partials (G groups x hd <= blockDim = 256)
    pdl_trigger();
    // Everything below reads the step's RowPos (written by rowpos_set earlier on the stream)
    // or the scratch the previous kernel wrote: only after the wait (read after write).
    pdl_wait();
    // Row r's positions: entry r % POS_ROWS of group r / POS_ROWS (the groups lie back to
    // back; one launch covers all the step's rows). All four fields load together, and the
    // row's q/k/v (att_fused's first step) with them, before n is tested.
    rp += blockIdx.y / POS_ROWS;
    const int re = blockIdx.y % POS_ROWS;
    const bool live = (u32)re < rp->n;
    const int p = (int)rp->pos[re];
    const int slot = (int)rp->slot[re];
    const size_t seq = (size_t)rp->seq[re];
#if !defined(ATT_HD)
    if (blockDim.x == 256 && hd == 64)
        att_fused<8, 8, EARLY>(ATT_FUSED_ARGS);
    else if (blockDim.x == 256 && hd == 128)
        att_fused<16, 4, EARLY>(ATT_FUSED_ARGS);
    else if (blockDim.x == 256 && hd == 256)
        att_fused<32, 2, EARLY>(ATT_FUSED_ARGS);
    else
        att_fused<0, 0, EARLY>(ATT_FUSED_ARGS);
#else
    // The engine's modules hold one head width each (ATT_HD: 64, 128, 256, or 0 for any
    // other; src/backend/cuda/nvrtc.rs att_module_head), and the host launches the module of
    // its model's width with blocks of 256: the branch above that it would take, alone.
#if ATT_HD == 64
    att_fused<8, 8, EARLY>(ATT_FUSED_ARGS);
#elif ATT_HD == 128
    att_fused<16, 4, EARLY>(ATT_FUSED_ARGS);
#elif ATT_HD == 256
    att_fused<32, 2, EARLY>(ATT_FUSED_ARGS);
#else
    att_fused<0, 0, EARLY>(ATT_FUSED_ARGS);
#endif
#endif
}

// The one-row kernel (see the header) for launches of more blocks than SMs: K and V load
// where they are used (~100 registers, two blocks per SM).
// One kernel per engine module (ATT_KERNEL 0, 1, 2; -1: none, the main module); every
// kernel without it (scripts/nvrtc-check.py's whole program).
#if !defined(ATT_KERNEL) || ATT_KERNEL == 0
extern "C" __global__ void attention(ATT_PARAMS) { att_entry<false>(ATT_ARGS); }
#endif

// The same kernel for launches of at most one block per SM (a decode step of a few rows):
// the first K and V trips leave with the RoPE table (EARLY in att_fused; ~210 registers, one
// block per SM). The same att_fused arithmetic as `attention`, so the same bits.
#if !defined(ATT_KERNEL) || ATT_KERNEL == 1
extern "C" __global__ void attention_early(ATT_PARAMS) { att_entry<true>(ATT_ARGS); }
#endif

// The attend pass (kv_mode 2) of a step whose rows are ONE sequence at consecutive slots (a
// prime chunk, a verify round), for R rows per block instead of one: every row gets
// exactly the bits `attention` gives it, with each cached K/V row read once per block and
// head instead of once per row and head. Why: a 512-row SmolLM2 chunk read its K/V ~600 MB
// per layer from L2 as 4,608 one-row blocks of 2 per SM (17 waves of ~11 us).
//
// Launched after the store pass (kv_mode 1) over every row of the step, so the cache holds
// every row's k/v at its slot, bit-equal to what `attention`'s attend pass recomputes in
// shared memory for its own slot (the same expressions on the same scratch): this kernel
// reads the own slot from the cache like any other. Per row i (window [from_i, slot_i],
// n_i positions, last = slot_i), the same arithmetic as `attention`:
// - q: raw q (+ bias), head norm (sumsq32 by one warp, (x * inv) * w), RoPE at pos_i;
// - score_t = (((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))) * scale, a_l the sum over
//   elements l, l + 8, ... in order of q * k (what tree8 of the 8-lane dot leaves in lane 0);
// - max (exact), p_t = expf(score_t - max), sum = tree8 of 8 lanes' position-strided sums
//   (lane l: t % 8 == l in order), inv = 1 / sum;
// - out[d] = ((part_0 + part_1) + ...) + (p_last * inv) * v_last[d], part_g the sum in
//   position order of (p_t * inv) * v_t[d] over the g-th of G = max(1, 256 / hd) contiguous
//   ranges of ceil(last / G) positions (the block size `attention` is launched with, 256).
//
// How the work is laid out (none of it changes an operation or its order):
// - Scores: one thread per cached position t of the rows' union window, each row's q read
//   from shared memory by the whole warp at one address (a broadcast: one 16-byte load per 4
//   products). Heads of 64, 128, 256 (atr_scores_tiled): the block's 256 positions' k rows
//   pass through shared memory 16 elements at a time (ATR_KS, double-buffered, loaded by
//   the whole block a row's 64 bytes at a time while the step before is multiplied), and
//   every row's 8 partials live across the whole head. Why: a thread reading its own k row
//   from global memory put its warp's 32 lanes on 32 lines 4 KB apart, 32 L1 wavefronts a
//   load, twice for 8 rows (BENCH.md issue 30 step 56). Other widths: k read from global.
// - p_t * inv is formed once per (row, position), in place over the score, instead of once
//   per (row, position, element); every output add reads it.
// - Output: thread (g, d) walks its group's positions, one V value serving every row whose
//   range holds it; a trip of ATR_VDEPTH positions fully inside a row's range (the common
//   case) adds without a per-position test, and the next trip's V loads leave before this
//   trip's adds. The group partials of all rows meet after ONE barrier (was two per row).
// - p values are read four at a time (16-byte shared loads): a row's scores are stored from
//   the union's first position, and the output trips start there plus multiples of 4.
// Grid (n_heads, ceil(rows / R)), block 256; dynamic shared memory (floats): R * hd (q),
// R * smax (scores; smax >= the union's span, at most every n_i + R - 1, plus one trip of
// ATR_VDEPTH read past it, a multiple of 4), and R * 256 output partials when G > 1
// (hd <= 128); the host sizes it (att_rows_tile, att_rows_smax).
#define ATR_MAX_R 8
#define ATR_VDEPTH 16
// The staged k tile of atr_scores_tiled: 256 positions x 16 elements, rows ATR_KS_STRIDE
// floats apart, two buffers (engine/attention.rs att_rows_tile adds the same bytes). Why
// 20: a warp's 16-byte reads of 8 consecutive rows (one shared-memory phase) start on banks
// 20 i mod 32 = 0, 20, 8, 28, 16, 4, 24, 12: eight disjoint 4-bank groups, no conflict.
#define ATR_KS_STRIDE 20
#define ATR_KS (2 * 256 * ATR_KS_STRIDE)

// The 8-lane tree of the score (what tree8 leaves in lane 0), over a thread's own partials.
__device__ __forceinline__ float atr_tree(const float (&a)[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// The scores of rows [0, nr) at cached position t, whose k row is kt: S[i][t - lo] for
// every row whose window holds t (lo: the block's score origin, the union's first position,
// atr_body), for heads of any width, read element by element (64, 128, 256:
// atr_scores_tiled).
__device__ __forceinline__ void atr_scores(const float* Q, const float* kt, int hd, int nr, int t,
                                           const int* s_from, const int* s_slot, float* S,
                                           int smax, int lo, float scale) {
    for (int i = 0; i < nr; i++) {
        if (t < s_from[i] || t > s_slot[i]) continue;
        const float* qi = Q + i * hd;
        float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        for (int e0 = 0; e0 < hd; e0 += 8) {
#pragma unroll
            for (int l = 0; l < 8; l++)
                if (e0 + l < hd) a[l] = a[l] + qi[e0 + l] * kt[e0 + l];
        }
        S[i * smax + (t - lo)] = atr_tree(a) * scale;
    }
}

// The scores of heads HD wide (a multiple of 64) for every position of the union [lo, hi],
// 256 at a time, the bits of atr_scores (row i's a_l the sum over u = 0, 1, ... in order of
// q[8u + l] * k[8u + l]; atr_tree; * scale). The block's k rows of a pass come through Ks
// 16 elements (two u) a step: the step's 1024 float4 loaded by the block (thread tid the
// float4s tid + 256 m, 4 a position: 64 bytes of one row by 4 lanes), stored to one buffer
// while the other is read. Block-uniform: every thread takes every step and barrier,
// positions past hi load nothing and store no score.
template <int HD>
__device__ __forceinline__ void atr_scores_tiled(const float* Q, const float* Kb, int kvd, int nr,
                                                 int lo, int hi, const int* s_from,
                                                 const int* s_slot, float* S, int smax,
                                                 float scale, float* Ks, int tid) {
    constexpr int NS = HD / 16;  // steps a pass (even: the last step reads buffer 1)
    for (int base = lo; base <= hi; base += 256) {
        const int t = base + tid;
        float a[ATR_MAX_R][8];
#pragma unroll
        for (int r = 0; r < ATR_MAX_R; r++)
#pragma unroll
            for (int l = 0; l < 8; l++) a[r][l] = 0.0f;
        // Step st's float4 m (0..3) of this thread: position base + (tid + 256 m) / 4,
        // elements 16 st + 4 ((tid + 256 m) % 4); zeros past hi (never stored as a score).
        auto load = [&](int st, int m) {
            const int f = tid + 256 * m, p = base + (f >> 2);
            return p <= hi ? *(const float4*)(Kb + (size_t)p * kvd + 16 * st + 4 * (f & 3))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        };
        auto store = [&](int buf, int m, float4 v) {
            const int f = tid + 256 * m;
            *(float4*)(Ks + buf * (256 * ATR_KS_STRIDE) + (f >> 2) * ATR_KS_STRIDE + 4 * (f & 3)) = v;
        };
        // Buffer 0's last readers (the pass before, step NS - 2) passed that pass's barrier
        // after it; buffer 1's (step NS - 1) pass the barrier below before step 0 writes it.
#pragma unroll
        for (int m = 0; m < 4; m++) store(0, m, load(0, m));
        __syncthreads();
#pragma unroll 1
        for (int st = 0; st < NS; st++) {
            const bool next = st + 1 < NS;
            const float4* kp = (const float4*)(Ks + (st & 1) * (256 * ATR_KS_STRIDE) + tid * ATR_KS_STRIDE);
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                // Half of the next step's tile in flight while this half multiplies (8
                // registers, not 16: 128 a thread keeps two blocks an SM). Buffer
                // (st + 1) & 1 was last read at step st - 1, before the barrier that ended it.
                float4 n0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), n1 = n0;
                if (next) {
                    n0 = load(st + 1, 2 * h2);
                    n1 = load(st + 1, 2 * h2 + 1);
                }
                const int u = 2 * st + h2;
                const float4 k0 = kp[2 * h2], k1 = kp[2 * h2 + 1];
#pragma unroll
                for (int r = 0; r < ATR_MAX_R; r++) {
                    if (r >= nr) break;  // uniform over the block
                    const float4* qp = (const float4*)(Q + r * HD + 8 * u);
                    const float4 q0 = qp[0], q1 = qp[1];
                    a[r][0] = a[r][0] + q0.x * k0.x;
                    a[r][1] = a[r][1] + q0.y * k0.y;
                    a[r][2] = a[r][2] + q0.z * k0.z;
                    a[r][3] = a[r][3] + q0.w * k0.w;
                    a[r][4] = a[r][4] + q1.x * k1.x;
                    a[r][5] = a[r][5] + q1.y * k1.y;
                    a[r][6] = a[r][6] + q1.z * k1.z;
                    a[r][7] = a[r][7] + q1.w * k1.w;
                }
                if (next) {
                    store((st + 1) & 1, 2 * h2, n0);
                    store((st + 1) & 1, 2 * h2 + 1, n1);
                }
            }
            if (next) __syncthreads();
        }
#pragma unroll
        for (int r = 0; r < ATR_MAX_R; r++) {
            if (r >= nr) break;
            if (t >= s_from[r] && t <= s_slot[r]) S[r * smax + (t - lo)] = atr_tree(a[r]) * scale;
        }
    }
}

// The kernel body for heads of HD (0: any width, read element by element). One module holds
// every width (nvrtc.rs att_module: no ATT_HD), so attention_rows picks the body at run time.
template <int HD>
__device__ __forceinline__ void atr_body(const float* q, const float* bq, const float* qn,
                                         float eps, const float* table, int style,
                                         const float* K, const float* V, float* out, int n_heads,
                                         int n_kv_heads, int hd_arg, int ctx, float scale,
                                         int window, const RowPos* rp, int rows, int R, int smax) {
    DYN_SHARED(float, atr);
    __shared__ int s_from[ATR_MAX_R], s_slot[ATR_MAX_R], s_pos[ATR_MAX_R];
    __shared__ float s_inv[ATR_MAX_R];
    const int hd = HD > 0 ? HD : hd_arg;
    // Row blocks in reverse: the last rows attend over the most positions, so the longest
    // blocks start first and the short ones fill the GPU behind them (which block takes which
    // rows changes no row's arithmetic).
    const int h = blockIdx.x, r0 = (int)(gridDim.y - 1 - blockIdx.y) * R, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int group = n_heads / n_kv_heads, kh = h / group;
    const int kvd = n_kv_heads * hd, qd = n_heads * hd, half = hd / 2;
    float* Q = atr;           // R x hd
    float* S = Q + R * hd;    // R x smax: scores, then p_t * inv
    float* part = S + R * smax;  // R x 256 output partials (G > 1)
    // Rows of this block (r0 + i < rows, each in its RowPos group), windows as `attention`.
    int nr = rows - r0 < R ? rows - r0 : R;
    if (tid < nr) {
        const int r = r0 + tid;
        const RowPos* g = rp + r / POS_ROWS;
        const int e = r % POS_ROWS;
        const int p = (int)g->pos[e], slot = (int)g->slot[e];
        s_from[tid] = att_from(p, slot, window);
        s_slot[tid] = slot;
        s_pos[tid] = p;
    }
    // One sequence: row r0's (the host launches this kernel only for such steps).
    const size_t seq = (size_t)rp[r0 / POS_ROWS].seq[r0 % POS_ROWS];
    for (int j = tid; j < nr * hd; j += blockDim.x) {
        const int i = j / hd, d = j - i * hd;
        const float x = q[(size_t)(r0 + i) * qd + (size_t)h * hd + d];
        Q[j] = bq ? x + bq[(size_t)h * hd + d] : x;
    }
    __syncthreads();
    if (qn) {
        for (int i = warp; i < nr; i += blockDim.x >> 5) {
            float ss = sumsq32(Q + i * hd, hd);
            if (lane == 0) s_inv[i] = 1.0f / sqrtf(ss / (float)hd + eps);
        }
        __syncthreads();
        for (int j = tid; j < nr * hd; j += blockDim.x) {
            const int i = j / hd, d = j - i * hd;
            Q[j] = (Q[j] * s_inv[i]) * qn[d];
        }
        __syncthreads();
    }
    for (int j = tid; j < nr * half; j += blockDim.x) {
        const int i = j / half, e = j - i * half;
        const int p = s_pos[i];
        const float c = table[(size_t)p * half + e];
        const float s = table[(size_t)ctx * half + (size_t)p * half + e];
        rope_pair(Q + i * hd, e, half, style, c, s);
    }
    // The union of the windows (one sequence: slots consecutive, windows nested by start).
    int lo = s_from[0], hi = s_slot[0];
    for (int i = 1; i < nr; i++) {
        lo = s_from[i] < lo ? s_from[i] : lo;
        hi = s_slot[i] > hi ? s_slot[i] : hi;
    }
    // The scores' origin is lo: every row's score of position t at S[i * smax + (t - lo)], so
    // that the output loop's trips (which start at lo plus multiples of 4) read four p values
    // in one 16-byte load (smax a multiple of 4). The host's smax covers the union's span
    // plus one trip (att_rows_smax).
    const float* Kb = K + seq * ctx * kvd + (size_t)kh * hd;
    const float* Vb = V + seq * ctx * kvd + (size_t)kh * hd;
    __syncthreads();  // q is rotated
    // Scores: one thread per position of the union, every row at once.
    if constexpr (HD > 0 && HD % 64 == 0) {
        // After the output partials (G > 1: hd <= 128) or the scores.
        float* Ks = part + (256 / HD > 1 ? R * 256 : 0);
        atr_scores_tiled<HD>(Q, Kb, kvd, nr, lo, hi, s_from, s_slot, S, smax, scale, Ks, tid);
    } else {
        for (int t = lo + tid; t <= hi; t += blockDim.x)
            atr_scores(Q, Kb + (size_t)t * kvd, hd, nr, t, s_from, s_slot, S, smax, lo, scale);
    }
    __syncthreads();
    // Softmax per row, one warp per row: exact max, expf, 8-lane position-strided sums and
    // tree8 (lanes 8..31 hold 0 and never reach lane 0's value), inv = 1 / sum; then
    // p_t * inv in place (the product every output add of the row reads).
    for (int i = warp; i < nr; i += blockDim.x >> 5) {
        const int n = s_slot[i] + 1 - s_from[i];
        float* si = S + i * smax + (s_from[i] - lo);
        float m = __int_as_float(0xff800000);  // -inf
        for (int t = lane; t < n; t += 32) m = fmaxf(m, si[t]);
        for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
        for (int t = lane; t < n; t += 32) si[t] = expf(si[t] - m);
        __syncwarp();
        float acc = 0.0f;
        if (lane < 8) {
            for (int t = lane; t < n; t += 8) acc = acc + si[t];
        }
        acc = tree8(acc);
        const float inv = 1.0f / __shfl_sync(0xffffffffu, acc, 0);
        __syncwarp();  // every lane's sum reads are done before the writes below
        for (int t = lane; t < n; t += 32) si[t] = si[t] * inv;
    }
    // Output: thread tid owns (g, d) = (tid / hd, tid % hd) of every row (hd <= 256: G * hd
    // = 256 items per row; wider heads: G = 1 and d = tid + 256 k2), its partial o[k][k2]
    // for row k running over its range in position order. Each V value read serves the
    // rows whose range holds it; the rows' chains are independent (ILP across rows).
    const int G = (256 / hd) < 1 ? 1 : 256 / hd;
    constexpr int DB = HD > 0 ? (HD + 255) / 256 : 2;  // d blocks of 256 (hd > 256: 2)
    const int dblocks = (hd + 255) / 256;
    const int g = G > 1 ? tid / hd : 0;
    const bool owner = g < G;  // hd not dividing 256: threads past G * hd own nothing
    float o[ATR_MAX_R][DB];
    int ra[ATR_MAX_R], rb[ATR_MAX_R];  // row k's range of this group: slots [ra, rb)
    int so[ATR_MAX_R];                 // row k's p values: S[so[k] + slot]
    __syncthreads();  // every row's p values are written
#pragma unroll
    for (int k = 0; k < ATR_MAX_R; k++) {
#pragma unroll
        for (int k2 = 0; k2 < DB; k2++) o[k][k2] = 0.0f;
        ra[k] = rb[k] = 0;
        so[k] = k * smax - lo;
        if (k < nr && owner) {
            const int from = s_from[k], last = s_slot[k] - from;
            const int chunk = (last + G - 1) / G;
            ra[k] = from + g * chunk;
            rb[k] = from + ((g + 1) * chunk < last ? (g + 1) * chunk : last);
        }
    }
    // The union of the rows' ranges of this thread's group; V read straight from the cache
    // (L2), ATR_VDEPTH values in flight per trip, each serving every row whose range holds
    // it. Trips start at lo plus a multiple of 4 (ua rounded down; the positions before a
    // row's range are outside it, never added), so each row's p values of a trip are four
    // aligned 16-byte shared loads; a trip's reads past a row's scores fall in the slack the
    // host adds to smax, and none of them is added.
    int ua = 0x7fffffff, ub = 0;
#pragma unroll
    for (int k = 0; k < ATR_MAX_R; k++)
        if (ra[k] < rb[k]) {
            ua = ra[k] < ua ? ra[k] : ua;
            ub = rb[k] > ub ? rb[k] : ub;
        }
    if (ua >= ub) ua = ub;  // no range: no trip (and no ua + u past INT_MAX)
    else ua = lo + ((ua - lo) & ~3);
#pragma unroll
    for (int k2 = 0; k2 < DB; k2++) {
        const int d = G > 1 ? tid % hd : tid + 256 * k2;
        if (k2 >= dblocks || d >= hd || !owner) continue;
        // V[t][d] of a trip [t, t + ATR_VDEPTH) into vv (the next trip's into vn), positions
        // from ub on as 0 (never added: past every range). The address steps by kvd a
        // position (one 64-bit add a load, where recomputing (size_t)t * kvd cost a dozen
        // integer instructions: BENCH.md issue 30 step 37).
        const float* vd = Vb + d;
        const size_t vstep = (size_t)kvd;
        float vv[ATR_VDEPTH];
        {
            const float* p = vd + (size_t)ua * vstep;
#pragma unroll
            for (int u = 0; u < ATR_VDEPTH; u++, p += vstep) vv[u] = ua + u < ub ? *p : 0.0f;
        }
        for (int t0 = ua; t0 < ub; t0 += ATR_VDEPTH) {
            // The next trip's loads leave before this trip's adds.
            float vn[ATR_VDEPTH];
            const int t1 = t0 + ATR_VDEPTH;
            const float* p = vd + (size_t)t1 * vstep;
            if (t1 + ATR_VDEPTH <= ub) {
#pragma unroll
                for (int u = 0; u < ATR_VDEPTH; u++, p += vstep) vn[u] = *p;
            } else {
#pragma unroll
                for (int u = 0; u < ATR_VDEPTH; u++, p += vstep) vn[u] = t1 + u < ub ? *p : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < ATR_MAX_R; k++) {
                if (k >= nr) break;  // uniform over the block
                const float4* pk = (const float4*)(S + so[k] + t0);  // 16-byte aligned: so[k] + t0 = k * smax + 4m
                if (t0 >= ra[k] && t1 <= rb[k]) {
#pragma unroll
                    for (int j = 0; j < ATR_VDEPTH / 4; j++) {
                        const float4 p4 = pk[j];
                        o[k][k2] = o[k][k2] + p4.x * vv[4 * j];
                        o[k][k2] = o[k][k2] + p4.y * vv[4 * j + 1];
                        o[k][k2] = o[k][k2] + p4.z * vv[4 * j + 2];
                        o[k][k2] = o[k][k2] + p4.w * vv[4 * j + 3];
                    }
                } else if (t0 < rb[k] && t1 > ra[k]) {
                    // The trip's positions in [ra, rb): u in [ua_k, ub_k).
                    const int ua_k = ra[k] - t0, ub_k = rb[k] - t0;
#pragma unroll
                    for (int j = 0; j < ATR_VDEPTH / 4; j++) {
                        const float4 p4 = pk[j];
                        const float pj[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
                        for (int c = 0; c < 4; c++) {
                            const int u = 4 * j + c;
                            if (u >= ua_k && u < ub_k) o[k][k2] = o[k][k2] + pj[c] * vv[u];
                        }
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < ATR_VDEPTH; u++) vv[u] = vn[u];
        }
    }
    // Group partials in group order, then the row's own position (its V from the cache).
    if (G > 1) {
        if (owner) {
#pragma unroll
            for (int k = 0; k < ATR_MAX_R; k++)
                if (k < nr) part[k * 256 + g * hd + tid % hd] = o[k][0];
        }
        __syncthreads();
        for (int j = tid; j < nr * hd; j += blockDim.x) {
            const int k = j / hd, d = j - k * hd;
            float s = part[k * 256 + d];
            for (int gi = 1; gi < G; gi++) s = s + part[k * 256 + gi * hd + d];
            const float vlast = Vb[(size_t)s_slot[k] * kvd + d];
            out[(size_t)(r0 + k) * qd + (size_t)h * hd + d] = s + S[k * smax + (s_slot[k] - lo)] * vlast;
        }
    } else {
#pragma unroll
        for (int k = 0; k < ATR_MAX_R; k++) {
            if (k >= nr) break;
            const int last = s_slot[k] - lo;
#pragma unroll
            for (int k2 = 0; k2 < DB; k2++) {
                const int d = tid + 256 * k2;
                if (k2 >= dblocks || d >= hd) continue;
                const float vlast = Vb[(size_t)s_slot[k] * kvd + d];
                out[(size_t)(r0 + k) * qd + (size_t)h * hd + d] = o[k][k2] + S[k * smax + last] * vlast;
            }
        }
    }
}

#if !defined(ATT_KERNEL) || ATT_KERNEL == 2
// Two blocks an SM (at most 128 registers a thread; engine/attention.rs ATT_ROWS_PER_SM).
// Today's 124 fit without the bound; it holds the host's count true if a change grows the
// kernel (a first form of the staged score pass took 147: one block an SM) by spilling
// instead, which ptxas reports (scripts/nvrtc-check.py --regs).
extern "C" __global__ void __launch_bounds__(256, 2) attention_rows(
    const float* q, const float* bq, const float* qn, float eps, const float* table, int style,
    const float* K, const float* V, float* out, int n_heads, int n_kv_heads, int hd, int ctx,
    float scale, int window, const RowPos* rp, int rows, int R, int smax) {
    pdl_trigger();
    pdl_wait();  // positions, q and the cache come from earlier launches (read after write)
#define ATR_ARGS q, bq, qn, eps, table, style, K, V, out, n_heads, n_kv_heads, hd, ctx, scale, window, rp, rows, R, smax
    if (hd == 64)
        atr_body<64>(ATR_ARGS);
    else if (hd == 128)
        atr_body<128>(ATR_ARGS);
    else if (hd == 256)
        atr_body<256>(ATR_ARGS);
    else
        atr_body<0>(ATR_ARGS);
#undef ATR_ARGS
}
#endif
