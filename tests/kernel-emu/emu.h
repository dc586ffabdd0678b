// The CUDA execution model on the CPU, for the kernel emulator (scripts/kernel-emu.sh):
// what the engine's kernel sources (src/backend/cuda/kernels/*.cu, compiled with -DPPN_EMU
// and this header forced in first) need to run as plain C++ on a machine without a GPU.
//
// What it models: a block's threads are fibers that run the kernel function by turns, switched at
// every barrier; __syncthreads is a barrier of the block's live threads; a warp's shuffles and mma.sync are
// collectives of its 32 threads through a per-warp exchange area and a barrier; __shared__
// storage is a function-local static (the emulator runs one block at a time, in grid order
// or, with emu_reverse_blocks, backwards, so a static is the block's one copy); dynamic shared
// memory is one global array. f16 is GCC's _Float16 (IEEE binary16, round to nearest even).
//
// What it does NOT model, and so what it cannot prove: the tensor cores' own summation order
// inside one mma (emu_mma16816 is a fixed, deterministic function of one output's row of A,
// column of B and C input, the property THE ORDER of kernels/mma.cu rests on, not the
// hardware's rounding; the integer mma, emu_imma16832, has no rounding to model: its
// result is the hardware's exactly), timing, memory ordering between blocks, caches, and the
// non-coherent and prefetch paths (plain loads here). scripts/kernel-emu.sh builds the
// harnesses with AddressSanitizer and UBSan: a kernel's load or store past its buffer (which
// a GPU performs silently, reading another allocation's bytes) or off its alignment (uint4
// below is alignas(16), as CUDA's; a GPU faults) stops the run with its line;
// the fiber switches below tell ASan whose stack runs. So two kernels that agree bit for bit
// here feed every output the same mma inputs in the same sequence and the same f32
// epilogue: their indexing, tiling and THE ORDER agree. Whether the hardware agrees is the
// GPU's to show (scripts/gpu-validate.sh); the emulator finds the indexing bugs first.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ucontext.h>
#include <vector>

// AddressSanitizer's fiber annotations (no-ops in a build without it): every switch between
// the scheduler's stack and a thread's says which stack comes next, so ASan neither takes a
// thread's stack for an overflow of the scheduler's nor loses its fake frames.
#if !defined(__SANITIZE_ADDRESS__) && defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling
#define __SANITIZE_ADDRESS__ 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif
inline void emu_switch_start(void** fake, const void* bottom, size_t size) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}
// A thread's stack before its first entry: whatever an earlier block's thread left poisoned
// there (its last frames, left by a jump, never returned from) cleared.
inline void emu_stack_fresh(void* p, size_t size) {
#if EMU_ASAN
    __asan_unpoison_memory_region(p, size);
#else
    (void)p, (void)size;
#endif
}
// The dynamic shared memory a launch asked for, and nothing past it: the rest of the array
// poisoned, so that a kernel reading or writing past its launch's bytes stops the run (on a
// GPU: the next block's memory, or a fault).
inline void emu_smem_limit(void* p, size_t asked, size_t size) {
#if EMU_ASAN
    __asan_unpoison_memory_region(p, size);
    __asan_poison_memory_region((char*)p + asked, size - asked);
#else
    (void)p, (void)asked, (void)size;
#endif
}
inline void emu_switch_finish(void* fake, const void** bottom, size_t* size) {
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

template <class To, class From>
inline To emu_bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
    To r;
    std::memcpy(&r, &v, sizeof r);
    return r;
}
inline int __float_as_int(float f) { return emu_bits<int>(f); }
inline unsigned __float_as_uint(float f) { return emu_bits<unsigned>(f); }
inline float __int_as_float(int i) { return emu_bits<float>(i); }
inline float __uint_as_float(unsigned i) { return emu_bits<float>(i); }
// IEEE single operations, each rounded once (the harness is built with -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
// cvt.rni.s32.f32 and cvt.rzi.s32.f32: to nearest even, toward zero; as PTX's cvt, NaN gives 0
// and values past the int range saturate (C++'s own conversion leaves both undefined).
inline int emu_f2i(float f, bool nearest) {
    if (f != f) return 0;
    const double r = nearest ? std::nearbyint((double)f) : std::trunc((double)f);  // default mode: nearest even
    if (r >= 2147483647.0) return 2147483647;
    if (r <= -2147483648.0) return (int)0x80000000u;
    return (int)r;
}
inline int __float2int_rn(float f) { return emu_f2i(f, true); }
inline int __float2int_rz(float f) { return emu_f2i(f, false); }
template <class T>
inline T __ldg(const T* p) {
    return *p;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 255u) << (8 * i);
    return r;
}

// ---- f16 (the asm helpers' emulated forms: kernels/*.cu `#if defined(PPN_EMU)` branches)
inline unsigned short emu_f2h(float f) {  // cvt.rn.f16.f32
    _Float16 h = (_Float16)f;
    unsigned short s;
    std::memcpy(&s, &h, 2);
    return s;
}
inline float emu_h2f(unsigned short s) {  // cvt.f32.f16 (exact)
    _Float16 h;
    std::memcpy(&h, &s, 2);
    return (float)h;
}
// fma.rn.f16x2: each half a * b + c rounded once to f16 (the product of two f16s is exact
// in double; the sum is exact for the integer-valued operands the kernels use it on).
inline unsigned emu_hfma2(unsigned a, unsigned b, unsigned c) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) {
        const int sh = 16 * i;
        const double v = (double)emu_h2f((unsigned short)(a >> sh)) * (double)emu_h2f((unsigned short)(b >> sh)) +
                         (double)emu_h2f((unsigned short)(c >> sh));
        r |= (unsigned)emu_f2h((float)v) << sh;  // (float) exact here: |v| integers < 2^24
    }
    return r;
}

// sub.rn.f16x2: each half a - b rounded once to f16 (the difference of two f16s is exact in
// float, so one rounding to f16 is the instruction's; mvq.cu's use is exact besides).
inline unsigned emu_hsub2(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) {
        const int sh = 16 * i;
        const float v = emu_h2f((unsigned short)(a >> sh)) - emu_h2f((unsigned short)(b >> sh));
        r |= (unsigned)emu_f2h(v) << sh;
    }
    return r;
}

// ---- threads, warps, blocks: a block's threads are fibers of one OS thread, each on its own
// stack, switched cooperatively at every barrier (emu_jump after a first entry by makecontext:
// no system call per switch). A barrier's waiters poll: a fiber that
// arrives early yields until the barrier's generation moves.
struct EmuBar {
    int expected = 0, count = 0, gen = 0;
};
struct EmuWarp {
    EmuBar bar;
    alignas(16) unsigned slot[32][12];
};
// A context switch: GCC's __builtin_setjmp / __builtin_longjmp (the frame and stack pointers
// and a resume address; the compiler spills every call-saved register around the setjmp),
// not the C library's: those are intercepted under AddressSanitizer, whose no-return hook
// makes a sigaltstack system call at every switch (scripts/kernel-emu.sh took 2 minutes on
// two cores so, 71 seconds with these).
// __builtin_longjmp may not sit in the function of its __builtin_setjmp: emu_jump is its own.
typedef void* EmuJmp[5];
// The compiler also puts ASan's no-return hook before any call it knows does not return:
// emu_jump is not instrumented, and the volatile test keeps its callers from knowing.
inline volatile bool emu_jumps = true;
[[gnu::noinline, gnu::no_sanitize_address]] inline void emu_jump(EmuJmp& to) {
    if (emu_jumps) __builtin_longjmp(to, 1);
}
struct EmuFiber {
    EmuJmp env;
    ucontext_t start;
    bool started = false, done = false;
    void* fake = nullptr;  // ASan's fake stack of this thread while it is switched out
};
struct EmuBlock {
    explicit EmuBlock(int threads) : fibers(threads) {
        bar.expected = threads;
        for (int w = 0; w < (threads + 31) / 32; ++w) {
            warps.emplace_back(std::make_unique<EmuWarp>());
            warps.back()->bar.expected = threads - 32 * w < 32 ? threads - 32 * w : 32;
        }
    }
    EmuBar bar;
    std::vector<std::unique_ptr<EmuWarp>> warps;
    std::vector<EmuFiber> fibers;
    EmuJmp sched;
    int cur = 0;
    void* sched_fake = nullptr;  // the scheduler's, while a thread runs
    const void* sched_bottom = nullptr;  // the scheduler's stack (ASan: a switch's target)
    size_t sched_size = 0;
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;
inline EmuBlock* emu_block = nullptr;

inline int emu_lane() { return (int)(threadIdx.x & 31); }
inline EmuWarp& emu_warp() { return *emu_block->warps[threadIdx.x >> 5]; }

// Back to the scheduler; returns when the scheduler resumes this fiber.
inline void emu_yield() {
    EmuBlock* b = emu_block;
    EmuFiber& f = b->fibers[b->cur];
    if (!__builtin_setjmp(f.env)) {
        emu_switch_start(&f.fake, b->sched_bottom, b->sched_size);
        emu_jump(b->sched);
    }
    emu_switch_finish(f.fake, nullptr, nullptr);  // resumed: this thread's stack again
}
inline void emu_arrive_and_wait(EmuBar& bar) {
    const int g = bar.gen;
    if (++bar.count == bar.expected) {
        bar.count = 0;
        ++bar.gen;
        return;
    }
    while (bar.gen == g) emu_yield();
}
inline void emu_arrive_and_drop(EmuBar& bar) {  // an exited thread leaves the barrier
    if (--bar.expected > 0 && bar.count == bar.expected) {
        bar.count = 0;
        ++bar.gen;
    }
}

inline void __syncthreads() { emu_arrive_and_wait(emu_block->bar); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu_arrive_and_wait(emu_warp().bar); }

// Every lane of the warp publishes v, then reads lane src's.
template <class T>
inline T emu_shfl(T v, int src) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    EmuWarp& w = emu_warp();
    std::memcpy(&w.slot[emu_lane()][0], &v, 4);
    emu_arrive_and_wait(w.bar);
    T r;
    std::memcpy(&r, &w.slot[src][0], 4);
    emu_arrive_and_wait(w.bar);
    return r;
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int m) {
    return emu_shfl(v, emu_lane() ^ m);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {  // lane src % 32's value, as the hardware's
    return emu_shfl(v, src & 31);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, int d) {  // a lane past 31 keeps its own value
    return emu_shfl(v, emu_lane() + d < 32 ? emu_lane() + d : emu_lane());
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, D = A B + C, with PTX's fragment
// layout (lane = 4 g + t): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
// a3 = A[g+8][2t+8, 2t+9] (low half the smaller k); b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g];
// c0..c3 = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]. Each output is a fixed function of
// its own A row, B column and C: the 16 exact products summed in k order in double, then C,
// rounded once to f32. Not the hardware's rounding (see the head), but, as the hardware's,
// independent of every other row, column and lane.
// Both mma forms' exchange: the lane's A registers, B registers and C bits into its slot
// (0..3, 4..5, 6..9), then the warp's barrier, after which every lane reads every slot.
inline EmuWarp& emu_mma_post(const unsigned (&a)[4], unsigned b0, unsigned b1, const unsigned (&c)[4]) {
    EmuWarp& w = emu_warp();
    unsigned* s = w.slot[emu_lane()];
    for (int i = 0; i < 4; ++i) s[i] = a[i];
    s[4] = b0;
    s[5] = b1;
    for (int i = 0; i < 4; ++i) s[6 + i] = c[i];
    emu_arrive_and_wait(w.bar);
    return w;
}
inline void emu_mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    unsigned cb[4];
    std::memcpy(cb, d, sizeof cb);
    EmuWarp& w = emu_mma_post(a, b0, b1, cb);
    const int l = emu_lane();
    auto A = [&](int r, int k) {  // A[r][k]
        const int g = r & 7, hi = r >> 3, t = (k & 7) >> 1, reg = (k >= 8 ? 2 : 0) + hi;
        return emu_h2f((unsigned short)(w.slot[4 * g + t][reg] >> (16 * (k & 1))));
    };
    auto B = [&](int k, int c) {  // B[k][c]
        const int t = (k & 7) >> 1, reg = k >= 8 ? 5 : 4;
        return emu_h2f((unsigned short)(w.slot[4 * c + t][reg] >> (16 * (k & 1))));
    };
    auto C = [&](int r, int c) {  // C[r][c]
        const int g = r & 7, t = c >> 1, reg = 6 + 2 * (r >> 3) + (c & 1);
        float f;
        std::memcpy(&f, &w.slot[4 * g + t][reg], 4);
        return f;
    };
    float out[4];
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; ++i) {
        const int r = g + (i >= 2 ? 8 : 0), c = 2 * t + (i & 1);
        double acc = 0.0;
        for (int k = 0; k < 16; ++k) acc += (double)A(r, k) * (double)B(k, c);
        out[i] = (float)(acc + (double)C(r, c));
    }
    emu_arrive_and_wait(w.bar);
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 (a_s8: .s8.s8), D = A B + C, with PTX's
// fragment layout (lane = 4 g + t): a0 = A[g][4t..4t+3], a1 = A[g+8][4t..], a2 =
// A[g][16+4t..], a3 = A[g+8][16+4t..] (byte i the element k + i, u8, or s8 with a_s8); b0 =
// B[4t..4t+3][g], b1 = B[16+4t..][g] (s8); c as emu_mma16816's. Integer products and sums:
// the hardware's result exactly (wrapping at 2^32, as s32 accumulation does; the kernels
// stay far inside it), so this one models the rounding too (there is none). m16n8k16 (s8)
// is its first half: a2 = a3 = b1 = 0 (kernels/mma.cu imma16816s).
inline void emu_imma16832(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, bool a_s8 = false) {
    const unsigned cb[4] = {(unsigned)d[0], (unsigned)d[1], (unsigned)d[2], (unsigned)d[3]};
    EmuWarp& w = emu_mma_post(a, b0, b1, cb);
    const int l = emu_lane();
    auto A = [&](int r, int k) {  // A[r][k], u8 (or s8)
        const int g = r & 7, t = (k & 15) >> 2, reg = (k >= 16 ? 2 : 0) + (r >> 3);
        const unsigned byte = (w.slot[4 * g + t][reg] >> (8 * (k & 3))) & 255u;
        return a_s8 ? (long long)(signed char)byte : (long long)byte;
    };
    auto B = [&](int k, int c) {  // B[k][c]
        const int t = (k & 15) >> 2, reg = k >= 16 ? 5 : 4;
        const unsigned byte = (w.slot[4 * c + t][reg] >> (8 * (k & 3))) & 255u;
        return (long long)(signed char)byte;
    };
    int out[4];
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; ++i) {
        const int r = g + (i >= 2 ? 8 : 0), c = 2 * t + (i & 1);
        long long acc = (int)w.slot[4 * g + t][6 + i];
        for (int k = 0; k < 32; ++k) acc += A(r, k) * B(k, c);
        out[i] = (int)(unsigned)(unsigned long long)acc;
    }
    emu_arrive_and_wait(w.bar);
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// Dynamic shared memory (extern __shared__ in the kernels' PPN_EMU branches): one array, as
// the emulator runs one block at a time; 228 KiB, an H200 SM's most.
alignas(16) inline unsigned char emu_dyn_smem[233472];

// One stack per thread of a block, kept from launch to launch.
inline std::vector<std::unique_ptr<char[]>> emu_stacks;

// The fiber's entry (makecontext): runs the kernel, leaves its barriers, returns to the
// scheduler for good.
inline std::function<void()>* emu_entry = nullptr;
inline void emu_fiber_main() {
    EmuBlock* b = emu_block;
    const int i = b->cur;
    // First entry from the scheduler: its stack's bounds, the target of every switch back.
    emu_switch_finish(nullptr, &b->sched_bottom, &b->sched_size);
    (*emu_entry)();
    emu_arrive_and_drop(b->warps[i >> 5]->bar);
    emu_arrive_and_drop(b->bar);
    b->fibers[i].done = true;
    emu_switch_start(nullptr, b->sched_bottom, b->sched_size);  // this stack ends for good
    emu_jump(b->sched);
}

// The order the emulator runs a grid's blocks in: CUDA promises none, so a kernel that
// needs another block of its own launch to have run first is a race; emu_reverse_blocks runs
// the grid backwards to show one (the harnesses' negative controls set it).
inline bool emu_reverse_blocks = false;

// Runs kernel k over grid x block, one block at a time, each block's threads as fibers.
template <class... P, class... A>
void emu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, A... args) {
    if (smem > sizeof(emu_dyn_smem)) {
        std::fprintf(stderr, "emu: %zu bytes of dynamic shared memory\n", smem);
        std::exit(2);
    }
    constexpr size_t STACK = 256 * 1024;
    gridDim = grid;
    blockDim = block;
    const int n = (int)(block.x * block.y * block.z);
    while ((int)emu_stacks.size() < n) emu_stacks.emplace_back(new char[STACK]);
    std::function<void()> entry = [&] { k(args...); };
    emu_entry = &entry;
    const unsigned nblocks = grid.x * grid.y * grid.z;
    for (unsigned ib = 0; ib < nblocks; ++ib) {
        const unsigned b = emu_reverse_blocks ? nblocks - 1 - ib : ib;
        emu_smem_limit(emu_dyn_smem, smem, sizeof(emu_dyn_smem));
        std::memset(emu_dyn_smem, 0xA5, smem);  // garbage, as a GPU's
        EmuBlock blk(n);
        emu_block = &blk;
        blockIdx = dim3{b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
        for (int left = n; left > 0;) {
            for (int i = 0; i < n; ++i) {
                EmuFiber& f = blk.fibers[i];
                if (f.done) continue;
                blk.cur = i;
                threadIdx = dim3{(unsigned)i, 0, 0};
                if (!__builtin_setjmp(blk.sched)) {
                    emu_switch_start(&blk.sched_fake, emu_stacks[i].get(), STACK);
                    if (!f.started) {
                        f.started = true;
                        emu_stack_fresh(emu_stacks[i].get(), STACK);
                        getcontext(&f.start);
                        f.start.uc_stack.ss_sp = emu_stacks[i].get();
                        f.start.uc_stack.ss_size = STACK;
                        f.start.uc_link = nullptr;
                        makecontext(&f.start, emu_fiber_main, 0);
                        setcontext(&f.start);
                    }
                    emu_jump(f.env);
                }
                emu_switch_finish(blk.sched_fake, nullptr, nullptr);  // back on the scheduler's stack
                if (f.done) --left;
            }
        }
    }
    emu_block = nullptr;
}
