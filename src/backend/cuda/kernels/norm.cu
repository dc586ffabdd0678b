// The residual add with gemma3's post-norm (llama adds in the matvec epilogue), one warp per
// row. (The pre-norms are fused into the matvec prologue, the q/k head norms into attention.)
//
// Order: ss = sumsq32 (common.cu: 32 lanes in element order, then tree32); then the
// expression of crate::math::rms_norm: inv = 1 / sqrt(ss / n + eps), (o[i] * inv) * w[i].

// x[r] += post_norm(o[r]) (gemma3, w != 0) or x[r] += o[r] (w == 0). One warp per row.
extern "C" __global__ void add_residual(float* x, const float* o, const float* w, int rows,
                                        int n, float eps, int has_norm) {
    pdl_trigger();
    pdl_wait();
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    float* xr = x + (size_t)r * n;
    const float* orow = o + (size_t)r * n;
    if (has_norm) {
        float inv = 1.0f / sqrtf(sumsq32(orow, n) / (float)n + eps);
        for (int i = threadIdx.x & 31; i < n; i += 32) xr[i] = xr[i] + (orow[i] * inv) * w[i];
    } else {
        for (int i = threadIdx.x & 31; i < n; i += 32) xr[i] = xr[i] + orow[i];
    }
}

// out[r] = x[r], normalized (has_norm: rms_norm(x[r]) * w with the vectorized matvec
// prologue's expressions: sumsq256 over the row, inv = 1 / sqrt(ss / n + eps), (x * inv) * w),
// in the vectorized matvec's swizzled layout (swz: float4 v of the row at slot swz(v)). One
// block of 256 threads per row. For a vectorized matvec whose input tile is too large to stage
// in shared memory: the values are the bits the staged path computes, so a row never depends
// on the staging.
extern "C" __global__ void stage_rows(const float* x, const float* w, float* out, int rows,
                                      int n, float eps, int has_norm) {
    __shared__ float red[8];
    pdl_trigger();
    pdl_wait();
    int r = blockIdx.x;
    if (r >= rows) return;  // uniform over the block
    const float4* xr = (const float4*)(x + (size_t)r * n);
    float4* orow = (float4*)(out + (size_t)r * n);
    float inv = has_norm ? 1.0f / sqrtf(sumsq256(x + (size_t)r * n, n, red) / (float)n + eps) : 0.0f;
    for (int v = threadIdx.x; v < (n >> 2); v += blockDim.x) {
        float4 t = xr[v];
        if (has_norm) {
            float4 g = ((const float4*)w)[v];
            t.x = (t.x * inv) * g.x;
            t.y = (t.y * inv) * g.y;
            t.z = (t.z * inv) * g.z;
            t.w = (t.w * inv) * g.w;
        }
        orow[swz(v)] = t;
    }
}
