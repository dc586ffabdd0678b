// Gated FFN activations, element-wise: g = act(g) * u, with the CPU's exact expressions
// (crate::math::silu, crate::math::gelu_tanh); exp/tanh are CUDA's libdevice (a few ulp from
// the host libm, identical run to run and for any batch size).
extern "C" __global__ void act_mul(float* g, const float* u, int n, int kind) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = g[i];
    float a;
    if (kind == 0) {
        a = x / (1.0f + expf(-x));
    } else {
        a = 0.5f * x * (1.0f + tanhf(0.7978846f * (x + 0.044715f * x * x * x)));
    }
    g[i] = a * u[i];
}
