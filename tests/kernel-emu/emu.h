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
// Hopper's asynchronous units, for kernels/mma.cu's wgmma GEMM (the section "Hopper's
// asynchronous units" below says how): wgmma.mma_async m64n96k32 u8 x s8 (A from registers,
// B through a no-swizzle K-major shared-memory descriptor) as a collective of the warpgroup's
// 128 threads PERFORMED at wgmma.wait_group, B read and D written only then; mbarriers
// (arrivals and transaction bytes, try_wait.parity) in a side table; bulk copies global ->
// shared whose bytes land when their barrier's phase completes, and a phase completes only
// when a thread looks at it (a poll or a new arrival), so a stage read before its wait shows
// its old bytes; or (emu_bulk_early) at issue, so a refill of a stage still being read
// overwrites it under its readers. Misuse stops the run with a message: a wgmma without a
// wgmma.fence, threads of a warpgroup issuing different wgmma (descriptors, counts) or one
// not taking part, a thread exiting with a wgmma not waited for, a barrier used before its
// init or its init not fenced before a copy completes on it, a phase over-filled with
// bytes, copies off 16 bytes or outside the launch's shared memory, overlapping copies in
// flight; and a block whose threads all wait with nothing left to change (a deadlock: at
// any barrier, a collective or an mbarrier poll) stops it too.
//
// What it does NOT model, and so what it cannot prove: the tensor cores' own summation order
// inside one mma (emu_mma16816 is a fixed, deterministic function of one output's row of A,
// column of B and C input, the property THE ORDER of kernels/mma.cu rests on, not the
// hardware's rounding; the integer mma, emu_imma16832, has no rounding to model: its
// result is the hardware's exactly, as is the integer wgmma's, emu_wgmma_n96_u8s8), timing,
// memory ordering between blocks, caches, and the non-coherent and prefetch paths (plain
// loads here). Of the asynchronous units: no timing (a copy lands at one of the two extremes
// above, never part-way; a wgmma reads its A registers at issue and B at its wait, never in
// between), and not the async proxy's own ordering: fence.proxy.async is a no-op here and
// fence.mbarrier_init only required before a copy completes on the barrier, so a missing
// proxy fence shows only on a GPU; nor swizzled descriptors, clusters, multicast or TMA
// tensor maps. scripts/kernel-emu.sh builds the harnesses with AddressSanitizer and UBSan: a
// kernel's load or store past its buffer (which a GPU performs silently, reading another
// allocation's bytes) or off its alignment (uint4 below is alignas(16), as CUDA's; a GPU
// faults) stops the run with its line; the fiber switches below tell ASan whose stack runs.
// So two kernels that agree bit for bit here feed every output the same mma inputs in the
// same sequence and the same f32 epilogue: their indexing, tiling and THE ORDER agree.
// Whether the hardware agrees is the GPU's to show (scripts/gpu-validate.sh); the emulator
// finds the indexing bugs first.
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
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
    // Where it waits (a deadlock's report), and the mbarrier poll it last failed (emu_mbar_try_wait:
    // a second failed poll of the same phase with nothing done in between is an idle one).
    const char* where = nullptr;
    const void* poll = nullptr;
    unsigned poll_parity = 0;
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
    bool idle = false;  // the running thread's last switch back: a poll that found nothing new
    void* sched_fake = nullptr;  // the scheduler's, while a thread runs
    const void* sched_bottom = nullptr;  // the scheduler's stack (ASan: a switch's target)
    size_t sched_size = 0;
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;
inline EmuBlock* emu_block = nullptr;

inline int emu_lane() { return (int)(threadIdx.x & 31); }
inline EmuWarp& emu_warp() { return *emu_block->warps[threadIdx.x >> 5]; }

// Back to the scheduler; returns when the scheduler resumes this fiber. idle: the thread
// changed nothing since it was last resumed (it polled a barrier that has not moved); a whole
// round of the block's threads switching back idle is a deadlock (emu_launch stops the run).
inline void emu_yield(bool idle = false, const char* where = nullptr) {
    EmuBlock* b = emu_block;
    EmuFiber& f = b->fibers[b->cur];
    b->idle = idle;
    f.where = where;
    if (!idle) f.poll = nullptr;
    if (!__builtin_setjmp(f.env)) {
        emu_switch_start(&f.fake, b->sched_bottom, b->sched_size);
        emu_jump(b->sched);
    }
    emu_switch_finish(f.fake, nullptr, nullptr);  // resumed: this thread's stack again
}
// The last thread to arrive runs last() (the collective's work, if any) before the others go on.
template <class F>
inline void emu_arrive_and_wait(EmuBar& bar, const char* where, F last) {
    const int g = bar.gen;
    emu_block->fibers[emu_block->cur].poll = nullptr;
    if (++bar.count == bar.expected) {
        last();
        bar.count = 0;
        ++bar.gen;
        return;
    }
    for (bool idle = false; bar.gen == g; idle = true) emu_yield(idle, where);  // the first: it arrived
}
inline void emu_arrive_and_wait(EmuBar& bar, const char* where = "a barrier") {
    emu_arrive_and_wait(bar, where, [] {});
}
inline void emu_arrive_and_drop(EmuBar& bar) {  // an exited thread leaves the barrier
    if (--bar.expected > 0 && bar.count == bar.expected) {
        bar.count = 0;
        ++bar.gen;
    }
}

inline void __syncthreads() { emu_arrive_and_wait(emu_block->bar, "__syncthreads"); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu_arrive_and_wait(emu_warp().bar, "__syncwarp"); }

// Every lane of the warp publishes v, then reads lane src's.
template <class T>
inline T emu_shfl(T v, int src) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    EmuWarp& w = emu_warp();
    std::memcpy(&w.slot[emu_lane()][0], &v, 4);
    emu_arrive_and_wait(w.bar, "a warp collective (shuffle, mma.sync)");
    T r;
    std::memcpy(&r, &w.slot[src][0], 4);
    emu_arrive_and_wait(w.bar, "a warp collective (shuffle, mma.sync)");
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
    emu_arrive_and_wait(w.bar, "a warp collective (shuffle, mma.sync)");
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
    emu_arrive_and_wait(w.bar, "a warp collective (shuffle, mma.sync)");
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
    emu_arrive_and_wait(w.bar, "a warp collective (shuffle, mma.sync)");
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// Dynamic shared memory (extern __shared__ in the kernels' PPN_EMU branches): one array, as
// the emulator runs one block at a time; 228 KiB, an H200 SM's most.
alignas(16) inline unsigned char emu_dyn_smem[233472];

// The bytes of it the running launch asked for (emu_launch): a shared address past them is
// no shared memory of the block.
inline size_t emu_smem_bytes = 0;

[[noreturn]] inline void emu_stop(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void emu_stop(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "emu: block (%u, %u, %u) thread %u: ", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::exit(2);
}

// A fault the run goes on past (a block that ended with bulk copies still to land): counted,
// the first one's text kept, for the harness to report as a failed check (emu_take_faults).
inline int emu_faults = 0;
inline std::string emu_fault_first;
inline void emu_soft_fault(const std::string& what) {
    if (!emu_faults++) emu_fault_first = what;
}
// The faults since the last call (0: none), the first one's text into *first.
inline int emu_take_faults(std::string* first) {
    const int n = emu_faults;
    if (first) *first = n ? emu_fault_first : std::string();
    emu_faults = 0;
    emu_fault_first.clear();
    return n;
}

// cvta.to.shared: a pointer's shared address, its byte offset in the block's dynamic shared
// memory (the only shared memory the wgmma kernels hand to the async units). Anything else
// stops the run.
inline unsigned emu_smem_addr(const void* p) {
    const unsigned char* c = (const unsigned char*)p;
    if (c < emu_dyn_smem || c >= emu_dyn_smem + emu_smem_bytes)
        emu_stop("a shared address of %p, not in the launch's %zu bytes of dynamic shared memory", p, emu_smem_bytes);
    return (unsigned)(c - emu_dyn_smem);
}

// ---- Hopper's asynchronous units (kernels/mma.cu's wgmma GEMM): wgmma.mma_async of a
// warpgroup, mbarriers with transaction counts, and the copy engine's bulk copies
// (cp.async.bulk global -> shared). The model (emu.h's head says what it does not show):
//  - wgmma: a thread's wgmma.mma_async records its A registers (their values at issue), its
//    descriptor and where its D registers are, and fills them with garbage (D is undefined
//    until the wait); commit_group closes the thread's group; wait_group n is a collective of
//    the warpgroup's 128 threads (4 consecutive warps, threadIdx.x / 128) whose last arrival
//    PERFORMS every group past the newest n: only then is B read from shared memory (through
//    the descriptor) and D written into each thread's registers. Every thread must have
//    issued the same wgmma sequence (the same descriptors, each after a wgmma.fence since the
//    thread's last wait) and no thread may exit with a wgmma not waited for; a warpgroup one of
//    whose threads never reaches the wait is a deadlock. Either stops the run.
//  - mbarriers: a side table by the barrier's address (the u64 itself is never read: dynamic
//    shared memory is garbage at launch), reset each block; a barrier used before its init
//    stops the run. A phase needs `count` arrivals and exactly the bytes its expect_tx
//    announced, and completes LAZILY: when a thread polls it (try_wait) or arrives on it
//    again once its conditions are met, never earlier. A bulk copy reads its source at issue
//    and writes shared memory only when its phase completes (emu_bulk_early: at issue), so a
//    kernel that reads a stage before waiting for its phase reads the stage's OLD bytes, and
//    one that refills a stage still being read (early) overwrites it under its readers.
//    try_wait.parity P is true once the phase of parity P has completed (the current phase's
//    parity is not P); false, it yields the thread, and a block all of whose threads poll
//    without anything changing is a deadlock (emu_launch stops the run). A block that ends
//    with copies not landed (their phase never waited for) is a soft fault (emu_take_faults).
typedef unsigned long long emu_u64;
struct EmuWgOp {
    int* d;
    unsigned a[4];
    emu_u64 desc;
};
struct EmuWgThread {
    bool fenced = false;
    int wait_n = 0;
    std::vector<EmuWgOp> open;                 // issued, not yet committed
    std::vector<std::vector<EmuWgOp>> groups;  // committed, not yet performed, oldest first
};
struct EmuCopy {
    unsigned char* dst;
    std::vector<unsigned char> bytes;
};
struct EmuMbar {
    const void* at = nullptr;
    unsigned count = 0, pending = 0;  // arrivals of a phase, those still due
    long long tx_expect = 0, tx_issued = 0;  // the phase's announced bytes, its copies' bytes
    unsigned phase = 0;                      // completed phases
    bool fenced = false;                     // fence.mbarrier_init since its init
    std::vector<EmuCopy> copies;             // issued on the current phase, not landed
};
struct EmuAsync {
    std::vector<EmuWgThread> th;  // per thread of the block (on the first wgmma)
    std::vector<EmuBar> wgbar;    // per warpgroup
    std::vector<EmuMbar> bars;
    void reset() {
        th.clear();
        wgbar.clear();
        bars.clear();
    }
};
inline EmuAsync emu_async;
// Bulk copies land at issue instead of at their phase's completion (the other legal extreme).
inline bool emu_bulk_early = false;

inline EmuWgThread& emu_wg_thread() {
    const int n = (int)(blockDim.x * blockDim.y * blockDim.z), tid = (int)threadIdx.x, wg = tid / 128;
    if (n % 128 || 128 * (wg + 1) > n)
        emu_stop("wgmma in a block of %d threads: warpgroup %d is not 4 whole warps", n, wg);
    EmuAsync& as = emu_async;
    if (as.th.empty()) {
        as.th.resize(n);
        as.wgbar.resize(n / 128);
        for (auto& b : as.wgbar) b.expected = 128;
    }
    emu_block->fibers[emu_block->cur].poll = nullptr;
    return as.th[tid];
}
inline void emu_wg_fence() { emu_wg_thread().fenced = true; }
inline void emu_wg_commit() {
    EmuWgThread& me = emu_wg_thread();
    me.groups.push_back(std::move(me.open));
    me.open.clear();
}
// wgmma.mma_async.sync.aligned.m64n96k32.s32.u8.s8 with scale-d 0 (D = A B), A from registers
// (the warp's 16 rows, mma.sync m16n8k32's u8 A layout: lane 4g + t, a0 = A[g][4t..4t+3],
// a1 = A[g+8][4t..], a2 = A[g][16+4t..], a3 = A[g+8][16+4t..], byte i the element k + i; warp
// w of the warpgroup rows 16w..16w+15), B (s8, 32 x 96) from shared memory through a
// no-swizzle K-major descriptor: element (k, n) at start + (n / 8) SBO + (k / 16) LBO +
// (n % 8) 16 + k % 16 (start, LBO, SBO: bits 0-13, 16-29, 32-45, each >> 4). D (s32 64 x 96):
// thread (w, 4g + t) d[4 ct + c] = D[16w + g + 8 (c >> 1)][8 ct + 2t + (c & 1)], ct 0..11.
// Recorded here, performed at the wait (emu_wg_wait).
inline void emu_wgmma_n96_u8s8(int (&d)[48], const unsigned (&a)[4], emu_u64 desc) {
    EmuWgThread& me = emu_wg_thread();
    if (!me.fenced) emu_stop("wgmma.mma_async without a wgmma.fence since the thread's last wait_group");
    // Bits 14-15, 30-31 reserved; 46-63: base offset, swizzle mode (none modelled).
    if (desc & 0xFFFFC000C000C000ull)
        emu_stop("wgmma descriptor %#llx: reserved, base-offset or swizzle bits set (only no-swizzle is modelled)", desc);
    EmuWgOp op{d, {a[0], a[1], a[2], a[3]}, desc};
    me.open.push_back(op);
    for (int& v : d) v = (int)0xA5A5A5A5u;  // undefined until the wait
}
// The last arrival of the warpgroup's wait: every thread's groups past the newest n, in order.
inline void emu_wg_perform(int wg) {
    EmuAsync& as = emu_async;
    EmuWgThread* T = &as.th[128 * wg];
    const int n = T[0].wait_n;
    const size_t ng = T[0].groups.size();
    for (int i = 0; i < 128; ++i) {
        if (T[i].wait_n != n || T[i].groups.size() != ng)
            emu_stop("wgmma.wait_group of warpgroup %d: thread %d waits with %zu groups committed (allowing %d), "
                     "thread %d with %zu (allowing %d): the warpgroup's threads issued different sequences",
                     wg, 128 * wg, ng, n, 128 * wg + i, T[i].groups.size(), T[i].wait_n);
    }
    if (n < 0 || n > 7) emu_stop("wgmma.wait_group %d (0..7)", n);
    const size_t done = ng > (size_t)n ? ng - n : 0;
    for (size_t gi = 0; gi < done; ++gi) {
        const size_t nop = T[0].groups[gi].size();
        for (int i = 1; i < 128; ++i)
            if (T[i].groups[gi].size() != nop)
                emu_stop("wgmma group %zu of warpgroup %d: thread %d issued %zu wgmma, thread %d %zu", gi, wg,
                         128 * wg, nop, 128 * wg + i, T[i].groups[gi].size());
        for (size_t j = 0; j < nop; ++j) {
            const emu_u64 desc = T[0].groups[gi][j].desc;
            for (int i = 1; i < 128; ++i)
                if (T[i].groups[gi][j].desc != desc)
                    emu_stop("wgmma %zu of group %zu, warpgroup %d: thread %d's descriptor %#llx, thread %d's %#llx "
                             "(a warpgroup's wgmma is one instruction: one B)",
                             j, gi, wg, 128 * wg, desc, 128 * wg + i, T[i].groups[gi][j].desc);
            const size_t start = (size_t)(desc & 0x3FFF) << 4, lbo = (size_t)((desc >> 16) & 0x3FFF) << 4,
                         sbo = (size_t)((desc >> 32) & 0x3FFF) << 4;
            if (start + 11 * sbo + lbo + 7 * 16 + 16 > emu_smem_bytes)
                emu_stop("wgmma B (start %zu, LBO %zu, SBO %zu) past the launch's %zu bytes of shared memory", start,
                         lbo, sbo, emu_smem_bytes);
            int B[32][96];  // B[k][n], s8
            for (int k = 0; k < 32; ++k)
                for (int c = 0; c < 96; ++c)
                    B[k][c] = (signed char)emu_dyn_smem[start + (c / 8) * sbo + (k / 16) * lbo + (c % 8) * 16 + k % 16];
            int A[64][32];  // A[r][k], u8
            for (int r = 0; r < 64; ++r)
                for (int k = 0; k < 32; ++k) {
                    const int w = r / 16, g = r % 8, t = (k % 16) / 4, reg = (k >= 16 ? 2 : 0) + ((r % 16) >= 8);
                    A[r][k] = (int)((T[32 * w + 4 * g + t].groups[gi][j].a[reg] >> (8 * (k % 4))) & 255u);
                }
            for (int i = 0; i < 128; ++i) {
                const int w = i / 32, g = (i % 32) / 4, t = i % 4;
                int* d = T[i].groups[gi][j].d;
                for (int ct = 0; ct < 12; ++ct)
                    for (int c = 0; c < 4; ++c) {
                        const int r = 16 * w + g + 8 * (c >> 1), col = 8 * ct + 2 * t + (c & 1);
                        long long acc = 0;  // exact; s32 wraps as the hardware's
                        for (int k = 0; k < 32; ++k) acc += (long long)A[r][k] * B[k][col];
                        d[4 * ct + c] = (int)(unsigned)(unsigned long long)acc;
                    }
            }
        }
    }
    for (int i = 0; i < 128; ++i) T[i].groups.erase(T[i].groups.begin(), T[i].groups.begin() + (long)done);
}
inline void emu_wg_wait(int n) {
    EmuWgThread& me = emu_wg_thread();
    me.wait_n = n;
    const int wg = (int)threadIdx.x / 128;
    emu_arrive_and_wait(emu_async.wgbar[wg], "wgmma.wait_group", [wg] { emu_wg_perform(wg); });
    me.fenced = false;  // the thread reads D and writes A next: a fence before its next wgmma
}
// The block's thread i at its exit: no wgmma of it left to perform.
inline void emu_wg_exit_check(int i) {
    if (emu_async.th.empty()) return;
    const EmuWgThread& me = emu_async.th[i];
    if (!me.open.empty() || !me.groups.empty())
        emu_stop("thread exits with %zu wgmma uncommitted and %zu groups not waited for", me.open.size(), me.groups.size());
}

inline EmuMbar& emu_mbar(const void* b, const char* what) {
    const unsigned at = emu_smem_addr(b);
    for (EmuMbar& m : emu_async.bars)
        if (m.at == b) return m;
    emu_stop("%s on an mbarrier (shared %u) before its mbarrier.init", what, at);
}
// The phase's conditions met: its copies land, the next phase begins. Returns whether it did.
inline bool emu_mbar_settle(EmuMbar& m) {
    if (m.pending != 0) return false;
    if (m.tx_issued > m.tx_expect)
        emu_stop("mbarrier (shared %u) phase %u: bulk copies of %lld bytes, %lld expected", emu_smem_addr(m.at), m.phase,
                 m.tx_issued, m.tx_expect);
    if (m.tx_issued < m.tx_expect) return false;
    if (!emu_bulk_early)
        for (const EmuCopy& c : m.copies) std::memcpy(c.dst, c.bytes.data(), c.bytes.size());
    m.copies.clear();
    ++m.phase;
    m.pending = m.count;
    m.tx_expect = m.tx_issued = 0;
    return true;
}
inline void emu_mbar_init(emu_u64* b, unsigned count) {
    const unsigned at = emu_smem_addr(b);
    if (at % 8) emu_stop("mbarrier.init at shared %u: not 8-byte aligned", at);
    if (count < 1) emu_stop("mbarrier.init at shared %u with count 0", at);
    emu_block->fibers[emu_block->cur].poll = nullptr;
    EmuMbar* m = nullptr;
    for (EmuMbar& x : emu_async.bars)
        if (x.at == b) m = &x;
    if (!m) {
        emu_async.bars.emplace_back();
        m = &emu_async.bars.back();
    } else if (!m->copies.empty()) {
        emu_stop("mbarrier.init at shared %u with %zu bulk copies in flight on it", at, m->copies.size());
    }
    *m = EmuMbar{};
    m->at = b;
    m->count = m->pending = count;
}
inline void emu_fence_mbar_init() {
    for (EmuMbar& m : emu_async.bars) m.fenced = true;
}
// mbarrier.arrive.expect_tx: the current phase expects `bytes` more, then this thread arrives.
inline void emu_mbar_expect_tx(emu_u64* b, unsigned bytes) {
    EmuMbar& m = emu_mbar(b, "mbarrier.arrive.expect_tx");
    emu_block->fibers[emu_block->cur].poll = nullptr;
    emu_mbar_settle(m);
    if (m.pending == 0)
        emu_stop("mbarrier.arrive.expect_tx at shared %u: phase %u has had its %u arrivals (awaiting %lld of %lld bytes)",
                 emu_smem_addr(b), m.phase, m.count, m.tx_expect - m.tx_issued, m.tx_expect);
    m.tx_expect += bytes;
    --m.pending;
}
// mbarrier.try_wait.parity: whether the phase of parity `parity` has completed.
inline bool emu_mbar_try_wait(emu_u64* b, unsigned parity) {
    EmuMbar& m = emu_mbar(b, "mbarrier.try_wait");
    EmuFiber& f = emu_block->fibers[emu_block->cur];
    const bool moved = emu_mbar_settle(m);
    if ((m.phase & 1u) != (parity & 1u)) {
        f.poll = nullptr;
        return true;
    }
    // Not yet: an idle poll if the thread failed this same poll last and nothing moved since.
    const bool idle = !moved && f.poll == b && f.poll_parity == parity;
    emu_yield(idle, "mbarrier.try_wait");
    f.poll = b;
    f.poll_parity = parity;
    return false;
}
// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: dst in the launch's
// shared memory, both ends and the size multiples of 16; the source read now, shared memory
// written when the barrier's phase completes (emu_bulk_early: now).
inline void emu_bulk_g2s(void* dst, const void* src, unsigned bytes, emu_u64* b) {
    const unsigned at = emu_smem_addr(dst);
    if (bytes == 0 || bytes % 16 || at % 16 || (uintptr_t)src % 16 || at + (size_t)bytes > emu_smem_bytes)
        emu_stop("bulk copy of %u bytes from %p to shared %u: sizes and ends multiples of 16, inside the launch's "
                 "%zu bytes",
                 bytes, src, at, emu_smem_bytes);
    EmuMbar& m = emu_mbar(b, "a bulk copy's complete_tx");
    if (!m.fenced) emu_stop("bulk copy completing on the mbarrier at shared %u before a fence.mbarrier_init", emu_smem_addr(b));
    emu_block->fibers[emu_block->cur].poll = nullptr;
    emu_mbar_settle(m);
    for (const EmuMbar& o : emu_async.bars)
        for (const EmuCopy& c : o.copies)
            if ((unsigned char*)dst < c.dst + c.bytes.size() && c.dst < (unsigned char*)dst + bytes)
                emu_stop("bulk copy to shared [%u, %u) overlaps one still in flight to [%u, %u)", at, at + bytes,
                         (unsigned)(c.dst - emu_dyn_smem), (unsigned)(c.dst - emu_dyn_smem + c.bytes.size()));
    EmuCopy c{(unsigned char*)dst, std::vector<unsigned char>((const unsigned char*)src, (const unsigned char*)src + bytes)};
    if (emu_bulk_early) std::memcpy(dst, c.bytes.data(), bytes);
    m.copies.push_back(std::move(c));
    m.tx_issued += bytes;
}
// fence.proxy.async: orders the generic proxy's shared-memory accesses before the async
// proxy's. Not modelled (nothing here reorders them); see emu_bulk_early for a refill that
// races its stage's readers.
inline void emu_fence_proxy_async() {}

// The block's end: copies still to land are a soft fault; its async state goes.
inline void emu_async_block_end() {
    for (const EmuMbar& m : emu_async.bars)
        if (!m.copies.empty()) {
            size_t bytes = 0;
            for (const EmuCopy& c : m.copies) bytes += c.bytes.size();
            char buf[256];
            std::snprintf(buf, sizeof buf,
                          "block (%u, %u, %u) ended with %zu bulk copies (%zu bytes) on the mbarrier at shared %u whose "
                          "phase %u no thread waited for",
                          blockIdx.x, blockIdx.y, blockIdx.z, m.copies.size(), bytes, emu_smem_addr(m.at), m.phase);
            emu_soft_fault(buf);
        }
    emu_async.reset();
}

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
    emu_wg_exit_check(i);
    emu_arrive_and_drop(b->warps[i >> 5]->bar);
    emu_arrive_and_drop(b->bar);
    b->fibers[i].done = true;
    b->idle = false;
    emu_switch_start(nullptr, b->sched_bottom, b->sched_size);  // this stack ends for good
    emu_jump(b->sched);
}

// The order the emulator runs a grid's blocks in: CUDA promises none, so a kernel that
// needs another block of its own launch to have run first is a race; emu_reverse_blocks runs
// the grid backwards to show one (the harnesses' negative controls set it).
inline bool emu_reverse_blocks = false;

// No thread of the block can go on (a round of them all switched back idle): where each waits.
[[noreturn]] inline void emu_deadlock(const EmuBlock& blk) {
    std::fprintf(stderr, "emu: deadlock in block (%u, %u, %u): no thread can go on;", blockIdx.x, blockIdx.y, blockIdx.z);
    int exited = 0;
    std::vector<std::pair<const char*, int>> at;
    for (const EmuFiber& f : blk.fibers) {
        if (f.done) {
            ++exited;
            continue;
        }
        bool found = false;
        for (auto& p : at)
            if (p.first == f.where) ++p.second, found = true;
        if (!found) at.emplace_back(f.where, 1);
    }
    for (auto& p : at) std::fprintf(stderr, " %d thread(s) waiting at %s,", p.second, p.first ? p.first : "?");
    std::fprintf(stderr, " %d exited\n", exited);
    for (const EmuMbar& m : emu_async.bars)
        std::fprintf(stderr, "emu:   mbarrier at shared %u: phase %u, %u of %u arrivals due, %lld of %lld bytes issued\n",
                     (unsigned)((const unsigned char*)m.at - emu_dyn_smem), m.phase, m.pending, m.count, m.tx_issued,
                     m.tx_expect);
    std::exit(2);
}

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
    emu_smem_bytes = smem;
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
        emu_async.reset();
        for (int left = n; left > 0;) {
            bool moved = false;  // a thread of this round changed something
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
                if (!blk.idle) moved = true;
            }
            if (!moved && left > 0) emu_deadlock(blk);
        }
        emu_async_block_end();
    }
    emu_block = nullptr;
}
