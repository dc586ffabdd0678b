// Gated FFN activations with the CPU's exact expressions (crate::math::silu,
// crate::math::gelu_tanh); exp/tanh are CUDA's libdevice (a few ulp from the host libm,
// identical run to run and for any batch size). Used by the gate/up matvec's epilogue.
__device__ __forceinline__ float act_fn(float x, int kind) {
    if (kind == 0) return x / (1.0f + expf(-x));
    return 0.5f * x * (1.0f + tanhf(0.7978846f * (x + 0.044715f * x * x * x)));
}
