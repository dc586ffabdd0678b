// Probe: (1) cluster barrier latency (8 / 16 blocks) with a global publish between;
// (2) read bandwidth of few SMs (8, 16, 32, 132 blocks) with plain loads and TMA bulk copies.
// Run on the GPU machine: nvcc -O3 -arch=sm_90a -std=c++17 -o probe cluster-probe.cu && ./probe
// (one H200, 2026-12-02: cluster-probe.txt). Not part of the build; evidence for BENCH.md.
#include <cstdio>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void clbar(float* pub, int iters, float* sink) {
    cg::cluster_group cl = cg::this_cluster();
    unsigned r = cl.block_rank(), n = cl.num_blocks();
    float acc = 0.f;
    for (int i = 0; i < iters; i++) {
        if (threadIdx.x == 0) pub[r] = acc + 1.0f;
        asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
        acc += pub[(r + 1) % n];
    }
    if (threadIdx.x == 0) sink[r] = acc;
}

__global__ void rd_plain(const uint4* p, size_t per_block, unsigned* sink) {
    const uint4* b = p + blockIdx.x * per_block;
    unsigned x = 0;
    for (size_t i = threadIdx.x; i < per_block; i += 8 * blockDim.x) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            size_t j = i + u * blockDim.x;
            if (j < per_block) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(b + j));
            else v[u] = make_uint4(0,0,0,0);
        }
#pragma unroll
        for (int u = 0; u < 8; u++) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (x == 0x12345678) sink[0] = x;
}

__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// TMA bulk: NB buffers of CH bytes each in flight per block.
template <int NB, int CH>
__global__ void rd_bulk(const char* p, size_t per_block, unsigned* sink) {
    extern __shared__ __align__(128) char sm[];
    __shared__ __align__(8) unsigned long long bar[NB];
    const char* b = p + blockIdx.x * per_block;
    int nch = per_block / CH;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NB; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&bar[i])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    auto issue = [&](int c) {
        int s = c % NB;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(&bar[s])), "r"(CH) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(sa(sm + s * CH)), "l"(b + (size_t)c * CH), "r"(CH), "r"(sa(&bar[s])) : "memory");
    };
    if (threadIdx.x == 0) for (int c = 0; c < NB && c < nch; c++) issue(c);
    unsigned x = 0;
    for (int c = 0; c < nch; c++) {
        int s = c % NB; unsigned ph = (c / NB) & 1;
        asm volatile("{ .reg .pred P1; LAB_WAIT: mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1; @!P1 bra LAB_WAIT; }" :: "r"(sa(&bar[s])), "r"(ph) : "memory");
        const unsigned* w = (const unsigned*)(sm + s * CH);
        for (int i = threadIdx.x; i < CH / 4; i += blockDim.x) x ^= w[i];
        __syncthreads();
        if (threadIdx.x == 0 && c + NB < nch) issue(c + NB);
    }
    if (x == 0x12345678) sink[0] = x;
}

int main() {
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    float *pub, *sink; CK(cudaMalloc(&pub, 4096)); CK(cudaMalloc(&sink, 4096));
    for (int C : {2, 8, 16}) {
        if (C == 16) CK(cudaFuncSetAttribute(clbar, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = C; cfg.blockDim = 256;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = C; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cfg.attrs = at; cfg.numAttrs = 1;
        int iters = 10000;
        CK(cudaLaunchKernelEx(&cfg, clbar, pub, iters, sink)); CK(cudaDeviceSynchronize());
        cudaEventRecord(e0); CK(cudaLaunchKernelEx(&cfg, clbar, pub, iters, sink)); cudaEventRecord(e1);
        CK(cudaDeviceSynchronize()); float ms; cudaEventElapsedTime(&ms, e0, e1);
        printf("cluster %2d barrier + global publish: %.3f us per iteration\n", C, ms * 1000 / iters);
    }
    size_t total = 512ull << 20; char* buf; CK(cudaMalloc(&buf, total)); CK(cudaMemset(buf, 1, total));
    unsigned* us; CK(cudaMalloc(&us, 64));
    for (int G : {1, 8, 16, 32, 132, 264}) {
        size_t per = (64ull << 20) / 16;  // 4 MB per block
        if ((size_t)G * per > total) per = total / G;
        for (int th : {256, 1024}) {
            rd_plain<<<G, th>>>((const uint4*)buf, per / 16, us); CK(cudaDeviceSynchronize());
            cudaEventRecord(e0); rd_plain<<<G, th>>>((const uint4*)buf, per / 16, us); cudaEventRecord(e1);
            CK(cudaDeviceSynchronize()); float ms; cudaEventElapsedTime(&ms, e0, e1);
            printf("plain  blocks %3d x %4d thr: %7.1f GB/s (%.1f GB/s per block)\n", G, th, G * per / ms / 1e6, per / ms / 1e6);
        }
        {
            const int NB = 6, CH = 32768; auto k = rd_bulk<NB, CH>;
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, NB * CH));
            k<<<G, 256, NB * CH>>>(buf, per, us); CK(cudaDeviceSynchronize());
            cudaEventRecord(e0); k<<<G, 256, NB * CH>>>(buf, per, us); cudaEventRecord(e1);
            CK(cudaDeviceSynchronize()); float ms; cudaEventElapsedTime(&ms, e0, e1);
            printf("bulk6x32K blocks %3d: %7.1f GB/s (%.1f GB/s per block)\n", G, G * per / ms / 1e6, per / ms / 1e6);
        }
    }
    return 0;
}
