// The layer walk: a stage's whole one-row decode (every layer of its range) in ONE launch of
// one thread-block cluster, for models whose layers are all one vectorized format (the FFMA
// kernels of mvq.cu) and pre-norm (llama, qwen2, qwen3: no post-norms). Compiled only into
// the walk modules (`#define PPN_WALK`, with MVQ_FMT, ATT_HD and MVQ_W_GENERIC; nvrtc.rs
// walk_module); every other module sees an empty file.
//
// Why: a narrow model's decode is ~5 launches a layer of a few microseconds each, and each
// boundary between two launches (the previous grid's completion and memory flush, the next
// one's release from griddepcontrol.wait) costs ~1.2-1.4 us on an H200 whatever the work
// (measured: a graph of 150 dependent tiny PDL launches, 1.17-1.45 us each; a grid-wide
// barrier of 132 blocks through global atomics, 1.6-1.7 us). A cluster barrier of 16 blocks
// (barrier.cluster, hardware) with a global publish between costs ~0.4-0.5 us. So the ops of
// every layer run here as phases of one cluster, a cluster barrier between phases.
//
// THE ORDER is every op's own, unchanged: a matvec phase is mvq_run_on (mvq.cu) with this
// block as block vb of vg = the cluster's blocks (which block and warp computes a row never
// changes how: a row's dot is one warp's, dealt by n_in alone), the attention phase is
// att_fused (attention.cu) for head h = vb, vb + vg, ... with row 0, and the staging and
// norm of a phase's input are mvq_run_on's. So every output has the bits of the launches
// it replaces (engine/mod.rs layer_ops), and the gate compares it with the batched arm's
// launches on every step.
//
// Weights: each block copies the rows its warps will multiply into shared memory with
// cp.async, two weight phases ahead (two buffers, phase i in buffer i % 2: the copy of phase
// i + 2 starts as soon as phase i is done), because 16 SMs reading on demand keep too few
// bytes in flight (8 warps a block; the copies of a phase are all in flight at once). The
// rows are read-only for the engine's life, so the copies of the first two phases leave
// before pdl_wait. A phase's rows are read from the copy by plain generic loads
// (MVQ_W_GENERIC): the same bytes, so the same values.
//
// Ordering (each line that serves a law says which):
//  - read after write between phases (q/k/v -> attention -> o-proj -> x -> gate|up -> h ->
//    down -> x -> the next layer's q|k|v): one cluster barrier after each phase, release by
//    every thread of every block, acquire by every thread (barrier.cluster.arrive.release /
//    wait.acquire), so every global write of phase i is visible to every read of phase i+1;
//  - write after read (phase i + 1 writes what phase i read, e.g. the next layer's q|k|v
//    over the scratch attention read): the same barriers, since phase i's reads finished
//    before any block passed the barrier after it;
//  - a weight buffer is refilled only after the barrier that ends the phase reading it (no
//    thread of the block still reads it), and read only after cp.async.wait_group and a
//    block barrier (every thread's copies landed and are visible to the whole block);
//  - the step's inputs (x, the RowPos written by rowpos_set, the K/V of earlier steps) are
//    read only after pdl_wait; the walk's K/V store is att_fused's (the group's first head
//    block stores, every block reads its own slot from its shared copy).

#if defined(PPN_WALK)

#if !defined(MVQ_FMT) || !defined(ATT_HD)
#error "a walk module needs MVQ_FMT and ATT_HD"
#endif

// One layer's attention arguments (mirrors WalkAtt in engine/walk.rs, #[repr(C)]).
struct WalkAtt {
    const float* bq;
    const float* bk;
    const float* bv;
    const float* qn;
    const float* kn;
    const float* table;
    float* K;
    float* V;
    int window;
    int pad_;
};

// One layer (mirrors WalkLayer): its four matvec phases as the launches they replace
// (q|k|v with attn_norm in mode 0, o in mode 1 into x, gate|up with ffn_norm in mode 2, down
// in mode 1 into x; rows 1), each phase's features, and its attention.
struct WalkLayer {
    MvArgs op[4];
    WalkAtt att;
    int features[4];
};

// The launch's arguments (mirrors WalkArgs).
struct WalkArgs {
    const WalkLayer* layers;
    const float* q;
    const float* k;
    const float* v;
    float* out;
    const RowPos* rp;
    int n_layers;
    int style;
    int n_heads;
    int n_kv_heads;
    int hd;
    int ctx;
    float eps;
    float scale;
    int buf_bytes;    // each of the two weight buffers (a multiple of 16)
    int tile_floats;  // mvq_run_on's tile, run sums and norm factors (a multiple of 4)
    int sc_floats;    // attention's scores: the largest window of the cache
    int pad_;
    u64* trace;       // PROBE: 18 globaltimer stamps per layer of block 0, or null
};

// Rows per warp of a phase: gate|up 2 (a gate row and its up row), the others 1. Free to
// choose: it changes which warp computes a row, never how (mvq.cu's header).
#define WALK_NW(k) ((k) == 2 ? 2 : 1)

__device__ __forceinline__ void walk_sync() {
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n\t"
        "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ int walk_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return (int)r;
}
__device__ __forceinline__ int walk_ranks() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return (int)r;
}
__device__ __forceinline__ void walk_cp16(u8* dst, const u8* src) {
    const u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void walk_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Every copy group but the newest one has landed (this thread's copies).
__device__ __forceinline__ void walk_wait_prev() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// Where group grp's rows sit in this block's copy: its groups are vb * MV_WARPS + w + j *
// vg * MV_WARPS (mvq_run_on's walk), kept in order j * MV_WARPS + w, NW rows each.
__device__ __forceinline__ int walk_local(int grp, int vg) {
    return (grp / (MV_WARPS * vg)) * MV_WARPS + grp % MV_WARPS;
}

// The copy of phase (a, features)'s rows that block vb of vg multiplies into buf (every
// matrix of a walk phase has one width and format, so one row size: the host checks).
template <int NW>
__device__ __forceinline__ void walk_fetch(const MvArgs& a, int features, u8* buf, int vb,
                                           int vg) {
    const bool gu = a.mode == 2;
    const int nf = gu ? NW / 2 : NW;
    const int groups = (features + nf - 1) / nf;
    const int rb = (int)a.m[0].row_bytes, c16 = rb >> 4;
    const int rounds = (groups + MV_WARPS * vg - 1) / (MV_WARPS * vg);
    const int total = rounds * MV_WARPS * NW * c16;
    for (int c = threadIdx.x; c < total; c += blockDim.x) {
        const int li = c / c16, off = 16 * (c - li * c16);
        const int i = li % NW, lg = li / NW;
        const int grp = ((lg / MV_WARPS) * vg + vb) * MV_WARPS + lg % MV_WARPS;
        if (grp >= groups) continue;
        int o;
        const int m = mv_locate(a, features, grp * nf + (gu ? i % nf : i), &o);
        if (m < 0) continue;
        const u8* src = gu && i >= nf ? a.m[1].w + (size_t)o * a.m[1].row_bytes
                                      : MV_FIELD(a, m, w) + (size_t)o * MV_FIELD(a, m, row_bytes);
        walk_cp16(buf + (size_t)li * rb + off, src + off);
    }
}

__device__ __forceinline__ void walk_fetch_phase(const WalkArgs& w, int i, u8* buf, int vb,
                                                 int vg) {
    const WalkLayer& L = w.layers[i >> 2];
    const int k = i & 3;
    if (k == 2) walk_fetch<WALK_NW(2)>(L.op[k], L.features[k], buf, vb, vg);
    else walk_fetch<WALK_NW(0)>(L.op[k], L.features[k], buf, vb, vg);
}

// One matvec phase: mvq_run_on over this block's groups, rows from the copy in buf.
template <int NW>
__device__ __forceinline__ void walk_mv(const MvArgs& a, int features, const u8* buf,
                                        float* tile, float* red, int vb, int vg) {
    const size_t rb = a.m[0].row_bytes;
    auto row_of = [&](int grp, int i) -> const u8* {
        return buf + (size_t)(walk_local(grp, vg) * NW + i) * rb;
    };
    mvq_run_on<MVQ_FMT, 1, NW, true>(a, features, tile, red, vb, vg, row_of);
}

extern "C" __global__ void __launch_bounds__(256, 1) walk_layers(WalkArgs w) {
    DYN_SHARED(float4, walk_smem4);
    u8* const smem = (u8*)walk_smem4;
    u8* const buf0 = smem;
    u8* const buf1 = smem + w.buf_bytes;
    float* const tile = (float*)(smem + 2 * (size_t)w.buf_bytes);
    float* const sc = tile + w.tile_floats;
    __shared__ float red[8];  // mvq_run_on's norm (8 warp sums of one row)
    __shared__ float qs[ATT_MAX_HD], ks[ATT_MAX_HD], vs[ATT_MAX_HD];
    __shared__ float ared[12];
    __shared__ float part[256];
    const int vb = walk_rank(), vg = walk_ranks();
    const int phases = 4 * w.n_layers;
    pdl_trigger();
    // The first two weight phases' copies: read-only rows, before the wait.
    walk_fetch_phase(w, 0, buf0, vb, vg);
    walk_commit();
    if (phases > 1) walk_fetch_phase(w, 1, buf1, vb, vg);
    walk_commit();
    // Read after write: x, the RowPos and the earlier steps' K/V are the stream's earlier
    // work.
    pdl_wait();
    const bool live = 0u < w.rp->n;
    const int p = (int)w.rp->pos[0];
    const int slot = (int)w.rp->slot[0];
    const size_t seq = (size_t)w.rp->seq[0];
    u64 tnow;
#define WALK_STAMP(j) do { if (w.trace && vb == 0 && threadIdx.x == 0) { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(tnow)); w.trace[(i >> 2) * 18 + (j)] = tnow; } } while (0)
    for (int i = 0; i < phases; i++) {
        const WalkLayer& L = w.layers[i >> 2];
        const int k = i & 3;
        u8* const buf = (i & 1) ? buf1 : buf0;
        // Phase i's copy has landed (only phase i + 1's may be in flight), for every thread.
        walk_wait_prev();
        __syncthreads();
        WALK_STAMP(4 * k + 0);
        if (k == 2) walk_mv<WALK_NW(2)>(L.op[k], L.features[k], buf, tile, red, vb, vg);
        else walk_mv<WALK_NW(0)>(L.op[k], L.features[k], buf, tile, red, vb, vg);
        WALK_STAMP(4 * k + 1);
        // Phase i's writes before phase i + 1's reads, cluster-wide (read after write).
        walk_sync();
        WALK_STAMP(4 * k + 2);
        // buf is free (no thread reads phase i any more): phase i + 2's rows into it. One
        // group per phase even when empty, so that wait_group 1 always means "all but the
        // next phase".
        if (i + 2 < phases) walk_fetch_phase(w, i + 2, buf, vb, vg);
        walk_commit();
        WALK_STAMP(4 * k + 3);
        if (k == 0) {
            const WalkAtt& A = L.att;
            for (int h = vb; h < w.n_heads; h += vg) {
#if ATT_HD == 64
                att_fused<8, 8, true>(
#elif ATT_HD == 128
                att_fused<16, 4, true>(
#elif ATT_HD == 256
                att_fused<32, 2, true>(
#else
                att_fused<0, 0, true>(
#endif
                    w.q, w.k, w.v, A.bq, A.bk, A.bv, A.qn, A.kn, w.eps, A.table, w.style, A.K,
                    A.V, w.out, w.n_heads, w.n_kv_heads, w.hd, w.ctx, w.scale, 0, A.window, live,
                    p, slot, seq, sc, qs, ks, vs, ared, part, h, 0);
                // The next head of this block reuses the shared arrays (write after read).
                __syncthreads();
            }
            WALK_STAMP(16);
            // The heads' outputs before the o-proj reads them (read after write).
            walk_sync();
            WALK_STAMP(17);
        }
    }
}

#endif
