// RMS norm and the residual add (with gemma3's optional post-norm), one warp per vector.
//
// Order (crate::math::rms_norm): ss = dot_f32(x, x) in 8 lanes (lane l sums x[i]*x[i] for
// i % 8 == l in element order) closed by tree8; inv = 1 / sqrt(ss / n + eps);
// out[i] = (x[i] * inv) * w[i]. Lanes 8..31 only help with the element-wise part.

__device__ __forceinline__ float warp_inv_rms(const float* x, int n, float eps) {
    int lane = threadIdx.x & 31;
    float acc = 0.0f;
    if (lane < 8) {
        for (int i = lane; i < n; i += 8) acc = acc + x[i] * x[i];
    }
    float ss = tree8(acc);
    ss = __shfl_sync(0xffffffffu, ss, 0);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

// out[v] = rms_norm(x[v]) * w for v < n_vec vectors of n elements (w has n elements: a
// residual row, or one q/k head). In place is allowed (out == x): every read of the vector
// happens before the warp's shuffle, every write after it. Block: 4 warps = 4 vectors.
extern "C" __global__ void rms_norm(const float* x, const float* w, float* out, int n_vec, int n,
                                    float eps) {
    int v = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (v >= n_vec) return;  // whole warps leave together: no partial-warp shuffle
    const float* xv = x + (size_t)v * n;
    float* ov = out + (size_t)v * n;
    float inv = warp_inv_rms(xv, n, eps);
    for (int i = threadIdx.x & 31; i < n; i += 32) ov[i] = (xv[i] * inv) * w[i];
}

// x[r] += post_norm(o[r]) (gemma3, w != 0) or x[r] += o[r] (w == 0). One warp per row.
extern "C" __global__ void add_residual(float* x, const float* o, const float* w, int rows,
                                        int n, float eps, int has_norm) {
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    float* xr = x + (size_t)r * n;
    const float* orow = o + (size_t)r * n;
    if (has_norm) {
        float inv = warp_inv_rms(orow, n, eps);
        for (int i = threadIdx.x & 31; i < n; i += 32) xr[i] = xr[i] + (orow[i] * inv) * w[i];
    } else {
        for (int i = threadIdx.x & 31; i < n; i += 32) xr[i] = xr[i] + orow[i];
    }
}
