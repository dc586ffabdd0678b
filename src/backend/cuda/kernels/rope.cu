// RoPE from the host-computed table (crate::math::rope_table, f64 rounded once to f32, the
// very bits the CPU uses) and the KV-cache append.
//
// Table layout per RoPE base: cos[ctx][half] followed by sin[ctx][half].
// style 0 = llama NORM (adjacent pairs 2i, 2i+1); 1 = gemma3 NEOX (i, i + half).
// h[a] = x0 * cos - x1 * sin; h[b] = x0 * sin + x1 * cos (no FMA: --fmad=false).

// One thread per (row, head, i < half) over q heads then k heads; grid.y = row of the chunk.
extern "C" __global__ void rope_qk(float* q, float* k, int n_heads, int n_kv_heads, int hd,
                                   const float* table, int ctx, int style, RowPos rp) {
    int r = blockIdx.y;
    int half = hd / 2;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = (n_heads + n_kv_heads) * half;
    if (idx >= total || (u32)r >= rp.n) return;
    int head = idx / half, i = idx % half;
    u32 p = rp.pos[r];
    float c = table[(size_t)p * half + i];
    float s = table[(size_t)ctx * half + (size_t)p * half + i];
    float* h;
    if (head < n_heads) h = q + (size_t)r * n_heads * hd + (size_t)head * hd;
    else h = k + (size_t)r * n_kv_heads * hd + (size_t)(head - n_heads) * hd;
    int a = style == 0 ? 2 * i : i;
    int b = style == 0 ? 2 * i + 1 : i + half;
    float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
}

// K[row][pos] = k[row], V[row][pos] = v[row]; cache layout [rows, ctx, kv_dim].
// `row0` is the cache row of the chunk's first row.
extern "C" __global__ void kv_store(const float* k, const float* v, float* K, float* V,
                                    int kvd, int ctx, int row0, RowPos rp) {
    int r = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= kvd || (u32)r >= rp.n) return;
    size_t dst = ((size_t)(row0 + r) * ctx + rp.pos[r]) * kvd + j;
    K[dst] = k[(size_t)r * kvd + j];
    V[dst] = v[(size_t)r * kvd + j];
}
