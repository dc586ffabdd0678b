// The residual add with gemma3's post-norm (llama adds in the matvec epilogue), one block of
// ADD_THREADS per row. (The pre-norms are fused into the matvec prologue, the q/k head norms
// into attention.)
//
// Order: ss = sumsq32's (common.cu: lane l of one warp adds o[i] * o[i] for i = l, l + 32, ...
// in increasing i, from 0, then tree32); then the expression of crate::math::rms_norm:
// inv = 1 / sqrt(ss / n + eps), x[i] + (o[i] * inv) * w[i]. Fixed by n alone.
//
// Why a block: one warp per row (the kernel before, the same bits) walked a row in n / 256
// dependent rounds of loads for the sum and n / 32 for the add (x may alias nothing, but the
// compiler could not know): about 8 us a launch on Gemma-3's 640-wide rows, twice a layer,
// near half of a decode token (ncu, one H200, 2026-12-02). Here all threads load the row into
// shared memory at once, warp 0 adds the squares from there in sumsq32's order, and all
// threads do the add: two rounds of loads.
#define ADD_THREADS 256
#define ADD_CHUNK 4096  // floats of o a round stages (a multiple of 32: lanes keep their i)

// y[r] = x[r] + post_norm(o[r]) (gemma3, w != 0) or x[r] + o[r] (w == 0). y, x, o and w are
// distinct buffers (engine scratch x and x2 in turn, o, a norm weight): the residual moves
// between x and x2 as the one-row launches that fold this add into their prologue move it
// (mvq_pre_add in kernels/mvq.cu), so the two paths leave it in the same buffer.
// One block of ADD_THREADS per row.
extern "C" __global__ void __launch_bounds__(ADD_THREADS) add_residual(
    float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ o,
    const float* __restrict__ w, int rows, int n, float eps, int has_norm) {
    __shared__ float so[ADD_CHUNK];
    __shared__ float s_inv;
    pdl_trigger();
    pdl_wait();
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform over the block
    const int t = threadIdx.x;
    float* yr = y + (size_t)r * n;
    const float* xr = x + (size_t)r * n;
    const float* orow = o + (size_t)r * n;
    float inv = 0.0f;
    if (has_norm) {
        float acc = 0.0f;  // lane t's running sum in warp 0 (sumsq32's acc)
        for (int c0 = 0; c0 < n; c0 += ADD_CHUNK) {
            const int m = min(ADD_CHUNK, n - c0);
            for (int i = t; i < m; i += ADD_THREADS) so[i] = orow[c0 + i];
            __syncthreads();
            if (t < 32) {
#pragma unroll 8
                for (int i = t; i < m; i += 32) {
                    const float v = so[i];
                    acc = acc + v * v;
                }
            }
            __syncthreads();  // so is rewritten by the next round
        }
        if (t < 32) {
            acc = tree32(acc);
            if (t == 0) s_inv = 1.0f / sqrtf(acc / (float)n + eps);
        }
        __syncthreads();
        inv = s_inv;
        for (int i = t; i < n; i += ADD_THREADS) yr[i] = xr[i] + (orow[i] * inv) * w[i];
    } else {
        for (int i = t; i < n; i += ADD_THREADS) yr[i] = xr[i] + orow[i];
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
