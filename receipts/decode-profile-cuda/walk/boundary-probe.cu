// Probe: what a kernel boundary (graph + PDL) costs against an in-kernel grid barrier,
// for a chain of 150 dependent tiny ops (SmolLM2's walk: 30 layers x 5 launches).
// Run on the GPU machine: nvcc -O3 -arch=sm_90a -o probe boundary-probe.cu && ./probe
// (one H200, 2026-12-02: boundary-probe.txt). Not part of the build; evidence for BENCH.md.
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;"); }

// One op: every block reads the 576-float vector (L2), each warp writes one sum.
__global__ void op_kernel(const float* in, float* out, int n, int pdl) {
    if (pdl) pdl_trigger();
    if (pdl) pdl_wait();
    __shared__ float s[8];
    float a = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) a += in[i];
    for (int d = 16; d; d >>= 1) a += __shfl_xor_sync(~0u, a, d);
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = a;
    __syncthreads();
    int g = blockIdx.x * 8 + (threadIdx.x >> 5);
    if ((threadIdx.x & 31) == 0 && g < n) out[g] = s[threadIdx.x >> 5] * 1e-3f + 1.0f;
}

__device__ __forceinline__ void grid_bar(unsigned* ctr, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(ctr) : "memory");
        unsigned v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory"); } while (v < target);
    }
    __syncthreads();
}

__global__ void persist(float* a, float* b, int n, int ops, unsigned* ctr) {
    __shared__ float s[8];
    for (int k = 0; k < ops; k++) {
        const float* in = (k & 1) ? b : a;
        float* out = (k & 1) ? a : b;
        float acc = 0.f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += __ldcg(in + i);
        for (int d = 16; d; d >>= 1) acc += __shfl_xor_sync(~0u, acc, d);
        if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
        __syncthreads();
        for (int g = blockIdx.x * 8 + (threadIdx.x >> 5); g < n; g += gridDim.x * 8)
            if ((threadIdx.x & 31) == 0) out[g] = s[threadIdx.x >> 5] * 1e-3f + 1.0f;
        grid_bar(ctr, (unsigned)(k + 1) * gridDim.x);
    }
}

int main() {
    const int n = 576, OPS = 150, REPS = 20;
    float *a, *b; unsigned* ctr;
    CK(cudaMalloc(&a, 4096 * 4)); CK(cudaMalloc(&b, 4096 * 4)); CK(cudaMalloc(&ctr, 4));
    CK(cudaMemset(a, 0, 4096 * 4)); CK(cudaMemset(b, 0, 4096 * 4));
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    int grids[] = {32, 72, 132, 264};
    for (int pdl = 0; pdl < 2; pdl++) for (int gi = 0; gi < 4; gi++) {
        int G = grids[gi];
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int k = 0; k < OPS; k++) {
            cudaLaunchConfig_t cfg = {}; cfg.gridDim = G; cfg.blockDim = 256; cfg.stream = st;
            cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
            const float* in = (k & 1) ? b : a; float* out = (k & 1) ? a : b;
            CK(cudaLaunchKernelEx(&cfg, op_kernel, in, out, n, pdl));
        }
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
        cudaEventRecord(e0, st);
        for (int r = 0; r < REPS; r++) CK(cudaGraphLaunch(ge, st));
        cudaEventRecord(e1, st); CK(cudaStreamSynchronize(st));
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        printf("graph pdl=%d grid=%4d: %.2f us per op\n", pdl, G, ms * 1000 / (REPS * OPS));
    }
    int nsm; cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0);
    int occ; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, persist, 256, 0);
    printf("SMs %d, persist occupancy %d blocks/SM\n", nsm, occ);
    for (int gi = 0; gi < 4; gi++) {
        int G = grids[gi];
        if (G > nsm * occ) continue;
        float best = 1e9;
        for (int r = 0; r < 5; r++) {
            CK(cudaMemsetAsync(ctr, 0, 4, st));
            int ops = OPS; float* pa = a; float* pb = b; int nn = n;
            void* args[] = {&pa, &pb, &nn, &ops, &ctr};
            cudaEventRecord(e0, st);
            CK(cudaLaunchCooperativeKernel((void*)persist, G, 256, args, 0, st));
            cudaEventRecord(e1, st); CK(cudaStreamSynchronize(st));
            float ms; cudaEventElapsedTime(&ms, e0, e1);
            if (ms < best) best = ms;
        }
        printf("persist grid=%4d: %.2f us per op (best of 5)\n", G, best * 1000 / OPS);
    }
    return 0;
}
