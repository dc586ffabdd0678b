// gemma3's post-norm residual add of kernels/norm.cu (add_residual, twice a layer) runs on the
// CPU (emu.h), checked for what the file's head promises: its bits are those of the warp-per-row
// kernel it replaced (kept below as `add_residual_warp`, verbatim but for its name), which
// summed the squares with sumsq32 straight from global memory. Widths below, at and past one
// staging round (ADD_CHUNK 4096: 4128 and 9000 take two and three rounds), odd widths, 1 to 9
// rows, with and without the norm, values spanning many binades; it now writes its sum to
// another buffer than its input (y = x + post_norm(o)), which it leaves as it was. The
// negative control: the
// same rows with each lane's squares summed in reverse order must differ in some case (the
// comparison can fail).
//
// Usage: norm_emu   (exit 0: every check held; 1: a check failed, named on stderr)
#include "../../src/backend/cuda/kernels/common.cu"
#include "../../src/backend/cuda/kernels/norm.cu"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using emu_harness::failures;
using emu_harness::frand;

// The kernel before (commit 27750d6), one warp per row, blocks of 128.
__global__ void add_residual_warp(float* x, const float* o, const float* w, int rows, int n,
                                  float eps, int has_norm) {
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

// The negative control's order: the same sum, lane l's elements added from the last.
__global__ void add_residual_reversed(float* x, const float* o, const float* w, int rows, int n,
                                      float eps, int) {
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    float* xr = x + (size_t)r * n;
    const float* orow = o + (size_t)r * n;
    const int lane = threadIdx.x & 31;
    float acc = 0.0f;
    int last = lane;
    while (last + 32 < n) last += 32;
    for (int i = last; i >= 0 && lane < n; i -= 32) acc = acc + orow[i] * orow[i];
    float inv = 1.0f / sqrtf(tree32(acc) / (float)n + eps);
    for (int i = lane; i < n; i += 32) xr[i] = xr[i] + (orow[i] * inv) * w[i];
}

// A value of magnitude about 2^[-8, 8): sums of squares round at many exponents.
float wide() { return std::ldexp(frand(), (int)(emu_harness::rnd() % 16) - 8); }

}  // namespace

int main() {
    const int widths[] = {32, 40, 576, 640, 1000, 1152, 2304, 4096, 4128, 5376, 9000};
    const int row_counts[] = {1, 3, 9};
    int cases = 0, controls_differed = 0, controls = 0;
    for (int n : widths) {
        for (int rows : row_counts) {
            for (int has_norm : {1, 0}) {
                std::vector<float> x0((size_t)rows * n), o((size_t)rows * n), w(n);
                for (auto& v : x0) v = wide();
                for (auto& v : o) v = wide();
                for (auto& v : w) v = 1.0f + frand();
                const float eps = 1e-6f;
                // got starts as NaNs: an element the kernel does not write differs.
                std::vector<float> want = x0, got(x0.size(), std::nanf(""));
                emu_launch(add_residual_warp, dim3{(unsigned)((rows + 3) / 4), 1, 1},
                           dim3{128, 1, 1}, 0, want.data(), (const float*)o.data(),
                           (const float*)w.data(), rows, n, eps, has_norm);
                // y = x + post_norm(o) out of place (the engine's x -> x2 -> x): x stays.
                std::vector<float> xin = x0;
                emu_launch(add_residual, dim3{(unsigned)rows, 1, 1}, dim3{ADD_THREADS, 1, 1}, 0,
                           got.data(), (const float*)xin.data(), (const float*)o.data(),
                           (const float*)w.data(), rows, n, eps, has_norm);
                if (xin != x0)
                    emu_harness::fail("norm_emu", "n " + std::to_string(n) + ": the input row changed");
                ++cases;
                if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0) {
                    size_t i = 0;
                    while (std::memcmp(&want[i], &got[i], sizeof(float)) == 0) ++i;
                    emu_harness::fail("norm_emu", "n " + std::to_string(n) + " rows " +
                                                      std::to_string(rows) + " norm " +
                                                      std::to_string(has_norm) + ": element " +
                                                      std::to_string(i) + " differs");
                }
                if (has_norm && n > 64) {
                    std::vector<float> rev = x0;
                    emu_launch(add_residual_reversed, dim3{(unsigned)((rows + 3) / 4), 1, 1},
                               dim3{128, 1, 1}, 0, rev.data(), (const float*)o.data(),
                               (const float*)w.data(), rows, n, eps, 1);
                    ++controls;
                    if (std::memcmp(rev.data(), want.data(), rev.size() * sizeof(float)) != 0)
                        ++controls_differed;
                }
            }
        }
    }
    // The comparison can fail: a reversed sum changes the bits wherever its rounding reaches
    // inv (about a third of the cases: inv's own rounding absorbs the rest).
    if (controls_differed == 0)
        emu_harness::fail("norm_emu", "the reversed-order control never differed (" +
                                          std::to_string(controls) + " cases)");
    std::printf("norm_emu: add_residual gives the warp-per-row kernel's bits in %d cases "
                "(widths 32..9000, 1..9 rows, norm or none); the reversed-sum control differed "
                "in %d of %d\n",
                cases, controls_differed, controls);
    return failures ? 1 : 0;
}
