// Decode attention of one query row over its cached window, GQA, one block per (head, row).
//
// Order (crate::math::attention): score_t = dot_f32(q_h, k_t) * scale (8 lanes + tree8);
// max (exact, order-free); p_t = exp(score_t - max); sum by 8 lanes over positions (lane l
// takes t % 8 == l in order) + tree8; inv = 1 / sum; out[d] = sum over t in position order
// of (p_t * inv) * v_t[d], starting from 0. Scores live in dynamic shared memory
// (n_pos floats; the host checks the window fits).
extern "C" __global__ void attention(const float* q, const float* K, const float* V, float* out,
                                     int n_heads, int n_kv_heads, int hd, int ctx, float scale,
                                     int row0, RowPos rp) {
    extern __shared__ float sc[];
    __shared__ float red[2];
    int h = blockIdx.x, r = blockIdx.y;
    if ((u32)r >= rp.n) return;  // uniform over the block
    int group = n_heads / n_kv_heads;
    int kh = h / group;
    int kvd = n_kv_heads * hd;
    int qd = n_heads * hd;
    int from = (int)rp.from[r];
    int n_pos = (int)rp.pos[r] + 1 - from;
    const float* qh = q + (size_t)r * qd + (size_t)h * hd;
    const float* Kr = K + ((size_t)(row0 + r) * ctx + from) * kvd + (size_t)kh * hd;
    const float* Vr = V + ((size_t)(row0 + r) * ctx + from) * kvd + (size_t)kh * hd;
    int tid = threadIdx.x;
    int l = tid & 7, g = tid >> 3, n_groups = blockDim.x >> 3;

    // Scores: 8 threads per position; loop bounds uniform so the shuffles are full-warp.
    for (int t0 = 0; t0 < n_pos; t0 += n_groups) {
        int t = t0 + g;
        float acc = 0.0f;
        if (t < n_pos) {
            const float* kt = Kr + (size_t)t * kvd;
            for (int i = l; i < hd; i += 8) acc = acc + qh[i] * kt[i];
        }
        acc = tree8(acc);
        if (t < n_pos && l == 0) sc[t] = acc * scale;
    }
    __syncthreads();
    if (tid == 0) {
        float m = __int_as_float(0xff800000);  // -inf
        for (int t = 0; t < n_pos; t++) m = fmaxf(m, sc[t]);
        red[0] = m;
    }
    __syncthreads();
    float m = red[0];
    for (int t = tid; t < n_pos; t += blockDim.x) sc[t] = expf(sc[t] - m);
    __syncthreads();
    if (tid < 32) {
        float acc = 0.0f;
        if (tid < 8) {
            for (int t = tid; t < n_pos; t += 8) acc = acc + sc[t];
        }
        acc = tree8(acc);
        if (tid == 0) red[1] = 1.0f / acc;
    }
    __syncthreads();
    float inv = red[1];
    float* oh = out + (size_t)r * qd + (size_t)h * hd;
    for (int d = tid; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int t = 0; t < n_pos; t++) o = o + (sc[t] * inv) * Vr[(size_t)t * kvd + d];
        oh[d] = o;
    }
}
