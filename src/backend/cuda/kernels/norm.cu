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

// out[r] = rms_norm(x[r]) * w, one warp per row, with the matvec prologue's expressions
// (sumsq32 over the row, inv = 1 / sqrt(ss / n + eps), (x * inv) * w): for a vectorized
// matvec whose input tile is too large to stage, the host normalizes the rows here first,
// so a row's normalized values are the same bits whichever path its launch takes.
extern "C" __global__ void norm_rows(const float* x, const float* w, float* out, int rows,
                                     int n, float eps) {
    pdl_trigger();
    pdl_wait();
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float* xr = x + (size_t)r * n;
    float* orow = out + (size_t)r * n;
    float inv = 1.0f / sqrtf(sumsq32(xr, n) / (float)n + eps);
    for (int i = threadIdx.x & 31; i < n; i += 32) orow[i] = (xr[i] * inv) * w[i];
}
