// The vectorized FFMA matvec of kernels/mvq.cu (every eager and pipelined decode of a model
// the tensor cores do not take) runs on the CPU (emu.h), checked for what the file's head
// promises: a row's dot is fixed by n_in alone, never by the row tile RT, the rows per warp
// NW, the grid, or whether the tile is staged in shared memory or laid out by stage_rows. For
// every vectorized format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), widths below, at
// and past the 4096 of the one-trip prologue, a single matrix and gate|up, norm or none: each
// (RT, NW, staging, grid) the host may launch must give every output of its rows the bits of
// RT = 1, NW = 1, staged, one warp per group. So must the dense one-row walk (mvq_d8) on rows
// under 1024 wide, where a warp deals 8 rows' units to its lanes densely: widths 32 to 992
// (1 to 31 units a row), groups ragged, staged or laid out, over a full grid or one block,
// and its planted order must give the planted bits of the walk it stands in for. So must
// gemma3's post-norm add folded into a one-row launch's prologue (mvq_pre_add: the row is x +
// post_norm(o)): every one-row kernel, plain and dense, staged, over a full grid and one
// block, gives the outputs of add_residual then the same launch over its sum, and writes that
// sum's bits; an add left out must differ. The planted `--fault row-count-order` must change
// bits (the comparison can fail). So must the mixed one-row launch (mvq_x1 / mvq_x2:
// matrices of two formats side by side, each format's walk on its own share of the grid):
// every output the bits of its matrix's own one-format launch, with a norm, with the folded
// post-norm add (and its res_out) and without, over full, minimal and uneven grids, the
// blocks run forwards and backwards; a split one feature off must differ.
//
// The weights are random bytes (each below 0x3C, so every f16 the formats read is finite):
// the check is the kernel against itself, so the values need no meaning. One check is not:
// the Q8_0 walks against a double-precision dot of GGUF blocks laid out as the host's repack
// writes them (halves), and the same blocks laid out whole must miss it.
//
// Usage: mvq_emu   (exit 0: every check held; 1: a check failed, named on stderr)
#define MVQ_FMT FMT_Q4K  // the module's kernels (mvq_w1/2/4); the harness calls mvq_body
#define MV_RT 1
#define MVQ_PRE  // the folding module's kernels (mvq_pre_add); res_o null: the plain ones
#include "../../src/backend/cuda/kernels/common.cu"
#include "../../src/backend/cuda/kernels/ffn.cu"
#include "../../src/backend/cuda/kernels/matvec.cu"
#include "../../src/backend/cuda/kernels/norm.cu"
#include "../../src/backend/cuda/kernels/mvq.cu"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using emu_harness::failures;
using emu_harness::frand;
using emu_harness::rnd;

using K = void (*)(MvArgs, int, int);
template <int F, int RT, int NW>
void kq(MvArgs a, int features, int stage_x) {
    mvq_body<F, RT, NW>(a, features, stage_x);
}
// The dense one-row walk (mvq_d8).
template <int F>
void kd(MvArgs a, int features, int stage_x) {
    mvd_body<F>(a, features, stage_x);
}

// The mixed one-row launch (mvq_x1 / mvq_x2 of a module with MVQ_FMT2).
using KM = void (*)(MvArgs, int, int, int);
template <int FA, int FB, int NW>
void km(MvArgs a, int features, int fa, int nba) {
    mvq_mix_body<FA, FB, NW>(a, features, fa, nba);
}

// The row tiles checked (rows of a tile the host may launch: 1..8) and, for each, the three
// rows-per-warp kernels.
constexpr int RTS[] = {1, 3, 8};
template <int F, int RT>
constexpr std::array<K, 3> per_rt() {
    return {kq<F, RT, 1>, kq<F, RT, 2>, kq<F, RT, 4>};
}
template <int F>
constexpr std::array<std::array<K, 3>, 3> kernels() {
    return {per_rt<F, 1>(), per_rt<F, 3>(), per_rt<F, 8>()};
}

struct Fmt {
    const char* name;
    int block_len, q, s;  // elements a block; bytes of block plane and scale plane a block
    bool offs;            // runs with an offset (repack::has_offsets): run sums in smem
    std::array<std::array<K, 3>, 3> k;
    K d;  // mvq_d8
};
// crate::quant::repack::planes and row_bytes.
const Fmt FMTS[] = {
    {"q4_0", 32, 16, 2, false, kernels<FMT_Q4_0>(), kd<FMT_Q4_0>},  {"q4_1", 32, 16, 4, true, kernels<FMT_Q4_1>(), kd<FMT_Q4_1>},
    {"q5_0", 32, 16, 8, false, kernels<FMT_Q5_0>(), kd<FMT_Q5_0>},  {"q5_1", 32, 16, 8, true, kernels<FMT_Q5_1>(), kd<FMT_Q5_1>},
    {"q8_0", 32, 32, 2, false, kernels<FMT_Q8_0>(), kd<FMT_Q8_0>},  {"q4_k", 256, 144, 4, true, kernels<FMT_Q4K>(), kd<FMT_Q4K>},
    {"q5_k", 256, 176, 4, true, kernels<FMT_Q5K>(), kd<FMT_Q5K>},  {"q6_k", 256, 208, 2, false, kernels<FMT_Q6K>(), kd<FMT_Q6K>},
};

// The format named `name` (a name not in FMTS is a bug of this file: it aborts).
const Fmt* fmt(const char* name) {
    for (const Fmt& f : FMTS)
        if (std::strcmp(f.name, name) == 0) return &f;
    std::fprintf(stderr, "mvq_emu: no format %s\n", name);
    std::abort();
}

size_t row_bytes(const Fmt& f, int n) {
    const size_t blocks = (size_t)n / f.block_len;
    return blocks * f.q + (blocks * f.s + 15) / 16 * 16;
}

struct Case {
    const Fmt* fm;
    int n, n_out, rows, mode;  // mode 0: y = W x; 1: y = y + W x (+residual); 2: act(G x) * (U x)
    bool norm;
    int mats = 1;  // mode 0: matrices of n_out rows each, one launch over all (as q|k|v)
};

std::string name(const Case& c) {
    return std::string(c.fm->name) + " n_in " + std::to_string(c.n) + " n_out " + std::to_string(c.n_out) +
           " rows " + std::to_string(c.rows) + (c.mode == 2 ? " gate|up" : c.mode == 1 ? " +residual" : "") +
           (c.norm ? " norm" : "") +
           (c.mats > 1 ? " x" + std::to_string(c.mats) + " matrices" : "");
}

struct Inputs {
    std::vector<std::vector<uint8_t>> w;  // one per matrix
    std::vector<float> x, g, xn;          // rows x n; norm weights; stage_rows' layout of x
    std::vector<std::vector<float>> res;  // mode 1: each matrix's y before the launch (rows x n_out)
};

// A folded post-norm add (MvArgs res_o, res_w, res_out): the launch's row is x + post_norm(o).
struct Pre {
    const float* o;
    const float* w;
    float* out;
};

Inputs make_inputs(const Case& c) {
    Inputs in;
    const int nm = c.mode == 2 ? 2 : c.mats;
    for (int m = 0; m < nm; ++m) {
        std::vector<uint8_t> w(row_bytes(*c.fm, c.n) * c.n_out);
        for (auto& b : w) b = (uint8_t)(rnd() % 0x3C);
        in.w.push_back(std::move(w));
    }
    in.x.resize((size_t)c.rows * c.n);
    for (auto& v : in.x) v = frand();
    for (int m = 0; m < nm && c.mode == 1; ++m) {
        std::vector<float> r((size_t)c.rows * c.n_out);
        for (auto& v : r) v = frand();
        in.res.push_back(std::move(r));
    }
    in.g.resize(c.n);
    for (auto& v : in.g) v = 0.5f + frand();
    in.xn.resize(in.x.size());
    emu_launch(stage_rows, dim3{(unsigned)c.rows, 1, 1}, dim3{256, 1, 1}, 0, (const float*)in.x.data(),
               (const float*)in.g.data(), in.xn.data(), c.rows, c.n, 1e-5f, (int)c.norm);
    return in;
}

// engine/matvec.rs mvq_smem: the staged tile, the run sums for a format with offsets, the
// tile's norm factors, and with `pre` three rows at the next 16-byte boundary.
size_t mvq_smem(const Fmt& f, int rt, int n, bool staged, bool pre) {
    size_t floats = (staged ? (size_t)rt * n : 0) + (f.offs ? (size_t)rt * n / 16 : 0) + rt;
    if (pre) floats = (floats + 3) / 4 * 4 + 3 * (size_t)n;
    return 4 * floats;
}

// Every row's outputs (gate|up: the act(gate) * up products) from launches of tile `rt`
// (index ri into RTS), rows-per-warp kernel nwi (3: the dense walk, groups of 8 rows, RT = 1
// only), staged or laid out, with `blocks` blocks per tile (0: one warp per group), over the
// first rows / rt * rt rows.
std::vector<float> run(const Case& c, const Inputs& in, int ri, int nwi, bool staged, int blocks, int plant,
                       const Pre* pre = nullptr) {
    const bool dense = nwi == 3;
    const int rt = RTS[ri], nw = dense ? 8 : 1 << nwi, tiles = c.rows / rt;
    const int nm = c.mode == 2 ? 2 : c.mats;
    std::vector<std::vector<float>> ys(nm, std::vector<float>((size_t)c.rows * c.n_out, 0.0f));
    if (c.mode == 1) ys = in.res;  // the residual the launch adds to
    MvArgs a{};
    for (int m = 0; m < nm; ++m) {
        a.m[m].w = in.w[m].data();
        a.m[m].row_bytes = row_bytes(*c.fm, c.n);
        a.m[m].y = ys[m].data();
        a.m[m].n_out = c.n_out;
    }
    a.n_mat = nm;
    a.n_in = c.n;
    a.rows = tiles * rt;
    a.mode = c.mode;
    a.act = 0;
    a.eps = 1e-5f;
    a.plant = plant;
    // Staged: x and the norm weights (the kernel normalizes); laid out: stage_rows' rows.
    a.x = staged ? in.x.data() : in.xn.data();
    a.norm = staged && c.norm ? in.g.data() : nullptr;
    const int features = c.mode == 2 ? c.n_out : c.n_out * c.mats;
    const int per_group = c.mode == 2 ? nw / 2 : nw;
    if (per_group == 0) return {};
    // engine/matvec.rs mvq_launch's grid (uncapped) and mvq_smem.
    const int all = ((features + per_group - 1) / per_group + MV_WARPS - 1) / MV_WARPS;
    const int nb = blocks ? blocks : all;
    if (pre) {
        a.res_o = pre->o;
        a.res_w = pre->w;
        a.res_out = pre->out;
    }
    const size_t smem = mvq_smem(*c.fm, rt, c.n, staged, pre != nullptr);
    emu_launch(dense ? c.fm->d : c.fm->k[ri][nwi], dim3{(unsigned)nb, (unsigned)tiles, 1}, dim3{32 * MV_WARPS, 1, 1}, smem, a,
               features, (int)staged);
    // Mode 0: every matrix's outputs, matrix after matrix (gate|up writes the first's).
    std::vector<float> out;
    for (int m = 0; m < (c.mode == 2 ? 1 : nm); ++m)
        out.insert(out.end(), ys[m].begin(), ys[m].begin() + (size_t)tiles * rt * c.n_out);
    return out;
}

// got against the first got.size() outputs of ref, bit for bit.
bool same(const std::vector<float>& ref, const std::vector<float>& got, std::string* where) {
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&ref[i], &got[i], 4) != 0) {
            *where = "output " + std::to_string(i) + ": " + std::to_string(got[i]) + ", reference " +
                     std::to_string(ref[i]);
            return false;
        }
    return true;
}

// Q8_0 rows of GGUF blocks (d, 32 signed quants) laid out as crate::quant::repack writes
// them: the quant plane by halves (repack::q8_half_at: rounds of 32 blocks, a round's first
// 16-byte halves, then its second halves; the last round holds nb % 32 blocks), then the d
// plane. `whole`: each block's 32 quants together instead (the layout before the halves),
// the negative control: the kernel must then read other values. Returns the rows' bytes and
// each row's double-precision dot with x and its sum of |w x|.
struct Q8Rows {
    std::vector<uint8_t> w;
    std::vector<double> dot, mag;
};
Q8Rows q8_rows(int n, int n_out, const std::vector<float>& x, bool whole) {
    const Fmt& f = *fmt("q8_0");
    const int nb = n / 32;
    const size_t rb = row_bytes(f, n);
    Q8Rows r{std::vector<uint8_t>(rb * n_out, 0), std::vector<double>(n_out, 0.0), std::vector<double>(n_out, 0.0)};
    for (int o = 0; o < n_out; ++o) {
        uint8_t* row = r.w.data() + rb * o;
        for (int b = 0; b < nb; ++b) {
            // d: a finite normal f16 of either sign, 2^-7 .. 2^-1 and a random mantissa.
            const unsigned short dh = (unsigned short)(((rnd() & 1) << 15) | ((8 + rnd() % 7) << 10) | (rnd() & 0x3FF));
            row[32 * nb + 2 * b] = (uint8_t)(dh & 0xFF);
            row[32 * nb + 2 * b + 1] = (uint8_t)(dh >> 8);
            const double d = emu_h2f(dh);
            const int round = b / 32, j = b % 32, in_round = std::min(32, nb - 32 * round);
            for (int e = 0; e < 32; ++e) {
                const int q = (int)(rnd() % 255) - 127;
                const int h = e / 16;
                const size_t at = whole ? 32 * (size_t)b + e : 1024 * (size_t)round + 16 * (h * in_round + j) + e % 16;
                row[at] = (uint8_t)(int8_t)q;
                r.dot[o] += d * q * x[32 * b + e];
                r.mag[o] += std::fabs(d * q * x[32 * b + e]);
            }
        }
    }
    return r;
}

// The pairs the mixed launch is checked on: gemma3's Q5_0|Q8_0, a Q4_K_M layer's Q4_K|Q6_K,
// and two whose offsets (the run sums of x in shared memory) sit in one half only.
struct MixPair {
    const char *a, *b;  // FMTS names, a of the lower format id
    KM k[2];            // NW 1, 2
};
const MixPair PAIRS[] = {
    {"q5_0", "q8_0", {km<FMT_Q5_0, FMT_Q8_0, 1>, km<FMT_Q5_0, FMT_Q8_0, 2>}},
    {"q4_k", "q6_k", {km<FMT_Q4K, FMT_Q6K, 1>, km<FMT_Q4K, FMT_Q6K, 2>}},
    {"q4_1", "q8_0", {km<FMT_Q4_1, FMT_Q8_0, 1>, km<FMT_Q4_1, FMT_Q8_0, 2>}},
    {"q4_0", "q5_1", {km<FMT_Q4_0, FMT_Q5_1, 1>, km<FMT_Q4_0, FMT_Q5_1, 2>}},
};

struct MixMat {
    const Fmt* fm;
    int n_out;
    std::vector<uint8_t> w;
};

// One one-row launch over `mats` (mode 0, staged, norm g, the folded add when pre): kernel
// `k` is a one-format kernel (k1, every matrix of one format) or the mixed one (km with fa
// features first and nba blocks of `blocks`). Returns every matrix's outputs, in order.
std::vector<float> mix_launch(const std::vector<const MixMat*>& mats, int n, const std::vector<float>& x,
                              const std::vector<float>& g, const Pre* pre, K k1, KM k, int fa, int nba, int blocks,
                              size_t smem) {
    std::vector<std::vector<float>> ys;
    for (const MixMat* m : mats) ys.emplace_back((size_t)m->n_out, std::nanf(""));
    MvArgs a{};
    int features = 0;
    for (size_t i = 0; i < mats.size(); ++i) {
        a.m[i].w = mats[i]->w.data();
        a.m[i].row_bytes = row_bytes(*mats[i]->fm, n);
        a.m[i].y = ys[i].data();
        a.m[i].n_out = mats[i]->n_out;
        features += mats[i]->n_out;
    }
    a.n_mat = (int)mats.size();
    a.n_in = n;
    a.rows = 1;
    a.mode = 0;
    a.eps = 1e-5f;
    a.x = x.data();
    a.norm = g.data();
    if (pre) {
        a.res_o = pre->o;
        a.res_w = pre->w;
        a.res_out = pre->out;
    }
    if (k1)
        emu_launch(k1, dim3{(unsigned)((features + MV_WARPS - 1) / MV_WARPS), 1, 1}, dim3{32 * MV_WARPS, 1, 1}, smem, a,
                   features, 1);
    else
        emu_launch(k, dim3{(unsigned)blocks, 1, 1}, dim3{32 * MV_WARPS, 1, 1}, smem, a, features, fa, nba);
    std::vector<float> out;
    for (const auto& y : ys) out.insert(out.end(), y.begin(), y.end());
    return out;
}

// Checks the mixed launch of one pair at width n; returns the launches checked.
int mix_check(const MixPair& p, int n) {
    const Fmt &fa = *fmt(p.a), &fb = *fmt(p.b);
    auto mat = [&](const Fmt& f, int n_out) {
        MixMat m{&f, n_out, std::vector<uint8_t>(row_bytes(f, n) * n_out)};
        for (auto& b : m.w) b = (uint8_t)(rnd() % 0x3C);
        return m;
    };
    // gemma3's q|k|v shape (q, k of a, v of b: ragged groups at every matrix's end), a pair,
    // and one a-matrix with two b-matrices.
    const MixMat q = mat(fa, 37), kk = mat(fa, 11), v = mat(fb, 13), v2 = mat(fb, 7);
    const std::vector<std::vector<const MixMat*>> shapes = {{&q, &kk, &v}, {&q, &v}, {&kk, &v, &v2}};
    std::vector<float> x(n), g(n), o(n), pw(n);
    for (auto& t : x) t = frand();
    for (auto& t : g) t = 0.5f + frand();
    for (auto& t : o) t = frand();
    for (auto& t : pw) t = 0.5f + frand();
    const size_t sm[2] = {std::max(mvq_smem(fa, 1, n, true, false), mvq_smem(fb, 1, n, true, false)),
                          std::max(mvq_smem(fa, 1, n, true, true), mvq_smem(fb, 1, n, true, true))};
    int checked = 0;
    for (const auto& mats : shapes) {
        int feat_a = 0, features = 0;
        for (const MixMat* m : mats) {
            features += m->n_out;
            if (m->fm == &fa) feat_a += m->n_out;
        }
        for (int withpre = 0; withpre < 2; ++withpre) {
            // The reference: each matrix alone in its format's one-row launch (RT 1, NW 1).
            std::vector<float> ref, ref_out(n, std::nanf(""));
            for (const MixMat* m : mats) {
                std::vector<float> out(n, std::nanf(""));
                const Pre pr{o.data(), pw.data(), out.data()};
                const std::vector<float> r = mix_launch({m}, n, x, g, withpre ? &pr : nullptr, m->fm->k[0][0], nullptr, 0,
                                                        0, 0, mvq_smem(*m->fm, 1, n, true, withpre));
                ref.insert(ref.end(), r.begin(), r.end());
                if (withpre) ref_out = out;
            }
            for (int nwi = 0; nwi < 2; ++nwi) {
                const int nw = 1 << nwi;
                const int need_a = (feat_a + nw - 1) / nw, need_b = (features - feat_a + nw - 1) / nw;
                const int ba = (need_a + MV_WARPS - 1) / MV_WARPS, bb = (need_b + MV_WARPS - 1) / MV_WARPS;
                // Full (each format all the blocks it can use), minimal, uneven.
                // Each also with the grid's blocks run backwards (emu.h): a feature written by
                // blocks of both halves would end with whichever ran last.
                const int grids[3][2] = {{ba, bb}, {1, 1}, {2, 1}};
                for (int rev = 0; rev < 2; ++rev)
                for (const auto& gr : grids) {
                    std::vector<float> out(n, std::nanf(""));
                    const Pre pr{o.data(), pw.data(), out.data()};
                    emu_reverse_blocks = rev;
                    const std::vector<float> got = mix_launch(mats, n, x, g, withpre ? &pr : nullptr, nullptr, p.k[nwi],
                                                              feat_a, gr[0], gr[0] + gr[1], sm[withpre]);
                    emu_reverse_blocks = false;
                    std::string where;
                    ++checked;
                    const std::string what = std::string("mixed ") + p.a + "|" + p.b + " n_in " + std::to_string(n) +
                                             " x" + std::to_string(mats.size()) + " matrices NW " +
                                             std::to_string(nw) + " grid " + std::to_string(gr[0]) + "+" +
                                             std::to_string(gr[1]) + (withpre ? " folded add" : "") +
                                             (rev ? " blocks backwards" : "");
                    if (!same(ref, got, &where)) {
                        emu_harness::fail("mvq_emu", what + ", " + where);
                        return checked;
                    }
                    if (withpre && !same(ref_out, out, &where)) {
                        emu_harness::fail("mvq_emu", what + ", res_out " + where);
                        return checked;
                    }
                }
            }
            // The split one feature off: fb's first row walked as fa's (whose rows are the
            // shorter in every pair, so the walk stays inside the matrix) must differ.
            if (withpre) continue;
            const std::vector<float> off =
                mix_launch(mats, n, x, g, nullptr, nullptr, p.k[0], feat_a + 1, 1, 2, sm[0]);
            std::string where;
            ++checked;
            if (same(ref, off, &where)) {
                emu_harness::fail("mvq_emu", std::string("mixed ") + p.a + "|" + p.b +
                                                 ": a split one feature off gave the reference (the check could not fail)");
                return checked;
            }
        }
    }
    std::printf("mvq_emu: ok  mixed %s|%s n_in %d: every output its format's own launch's bits (%d launches)\n", p.a,
                p.b, n, checked);
    return checked;
}

}  // namespace

int main() {
    // Per format: 512 wide (the one-trip prologue, a partial round of 32 units), one matrix
    // with a norm and gate|up without; 4608 wide (past 4096: the general prologue, 144 units
    // in rounds of 32 with a ragged last one), gate|up with a norm; the wide cases cost the
    // most. K-quants need multiples of 256. n_out 14: groups of 1, 2, 4 rows (gate|up: 1, 2
    // features), the last group of 4 rows ragged.
    std::vector<Case> cases;
    for (const Fmt& f : FMTS) {
        cases.push_back({&f, 512, 14, 8, 0, true});
        cases.push_back({&f, 512, 14, 8, 2, false});
        cases.push_back({&f, 4608, 14, 8, 2, true});
    }
    // The one-trip prologue at its widest tile, 4096 (each thread holding four float4s of
    // the row), for the formats with offsets (Q4_1, Q5_1: the run sums of x beside it).
    cases.push_back({fmt("q4_1"), 4096, 14, 8, 0, true});
    cases.push_back({fmt("q5_1"), 4096, 14, 8, 0, true});
    // +residual (o and down): each lane reads its output's addend as the group's last round
    // starts (mvq_item, mv_res_load). 512 wide: one round, so the addend of a warp's next
    // group is read while the current one's units compute; 4608: the last of five rounds.
    for (const Fmt& f : FMTS) {
        cases.push_back({&f, 512, 14, 8, 1, false});
        cases.push_back({&f, 4608, 14, 8, 1, false});
    }
    int checked = 0;
    for (const Case& c : cases) {
        const Inputs in = make_inputs(c);
        const std::vector<float> ref = run(c, in, 0, c.mode == 2 ? 1 : 0, true, 0, 0);
        bool ok = true;
        // Per (RT, NW): staged over a full grid, laid out over a full grid, staged in one block
        // (every warp walking several groups).
        const int variants[3][2] = {{1, 0}, {0, 0}, {1, 1}};
        for (int ri = 0; ri < 3 && ok; ++ri)
            for (int nwi = 0; nwi < 3 && ok; ++nwi)
                for (const auto& v : variants) {
                    const int staged = v[0], blocks = v[1];
                    const std::vector<float> got = run(c, in, ri, nwi, staged, blocks, 0);
                    if (got.empty()) continue;  // gate|up needs two rows a warp
                    std::string where;
                    ++checked;
                    if (!same(ref, got, &where)) {
                        emu_harness::fail("mvq_emu", name(c) + ": RT " + std::to_string(RTS[ri]) + " NW " +
                                                         std::to_string(1 << nwi) +
                                                         (staged ? " staged" : " laid out") +
                                                         (blocks ? " one block" : "") + ", " + where);
                        ok = false;
                        break;
                    }
                }
        // +residual is residual + the dot: each output's addend is its own (mode 0's dot of
        // the same inputs, added to the residual in f32, must give the reference's bits).
        if (ok && c.mode == 1) {
            Case c0 = c;
            c0.mode = 0;
            const std::vector<float> dot = run(c0, in, 0, 0, true, 0, 0);
            std::vector<float> sum(dot.size());
            for (size_t i = 0; i < dot.size(); ++i) sum[i] = in.res[0][i] + dot[i];
            std::string where;
            ++checked;
            if (!same(sum, ref, &where)) {
                emu_harness::fail("mvq_emu", name(c) + ": not the residual plus the dot, " + where);
                ok = false;
            }
        }
        if (ok) std::printf("mvq_emu: ok  %s\n", name(c).c_str());
    }
    // The dense one-row walk against RT = 1, NW = 1 (its reference above), on rows under 1024
    // wide: 32-element formats at 640 (gemma3: 20 units, 8 rows = 5 whole rounds), 576
    // (SmolLM2: 18 units, a ragged last round), 32 (1 unit) and 992 (31); K-quants at 256 and
    // 768. n_out 37: groups of 8 rows (gate|up: 4 features), the last one ragged. And three
    // matrices of 37 rows in one launch (q|k|v's shape): groups inside one matrix take the
    // kernel's consecutive-rows path (matrices 0 to 2), groups across two matrices and the
    // ragged last one its per-row lookup. Each clean and planted: the planted dense walk
    // must give the planted bits of the walk it replaces.
    std::vector<Case> narrow;
    for (const Fmt& f : FMTS) {
        const bool kq = f.block_len == 256;
        narrow.push_back({&f, kq ? 768 : 640, 37, 1, 0, true});
        narrow.push_back({&f, kq ? 256 : 576, 37, 1, 2, false});
        if (!kq) narrow.push_back({&f, 32, 37, 1, 0, false});
        if (!kq) narrow.push_back({&f, 992, 37, 1, 2, true});
        narrow.push_back({&f, kq ? 768 : 640, 37, 1, 0, false, 3});
    }
    for (const Case& c : narrow) {
        const Inputs in = make_inputs(c);
        bool ok = true;
        for (int plant = 0; plant < 2 && ok; ++plant) {
            const std::vector<float> ref = run(c, in, 0, c.mode == 2 ? 1 : 0, true, 0, plant);
            const int variants[3][2] = {{1, 0}, {0, 0}, {1, 1}};
            for (const auto& v : variants) {
                const int staged = v[0], blocks = v[1];
                const std::vector<float> got = run(c, in, 0, 3, staged, blocks, plant);
                std::string where;
                ++checked;
                if (got.size() != ref.size() || !same(ref, got, &where)) {
                    emu_harness::fail("mvq_emu", name(c) + ": dense" + (staged ? " staged" : " laid out") +
                                                     (blocks ? " one block" : "") + (plant ? " planted" : "") +
                                                     ", " + where);
                    ok = false;
                    break;
                }
            }
        }
        if (ok) std::printf("mvq_emu: ok  %s, dense (clean and planted)\n", name(c).c_str());
    }
    // gemma3's post-norm add folded into one-row launches (mvq_pre_add) against add_residual
    // then the same launch over its sum: 32-element formats at 640 (gemma3 270M) and 1152
    // (gemma3 1B: past one float4 a thread), K-quants at 768 and 2560 (gemma3 4B), and 4096
    // (MVQ_PRE_MAX); a lone matrix with the pre-norm and gate|up. Plain walks NW 1 and 2 (4:
    // gate|up needs 2), and the dense walk under 1024 wide; staged, a full grid and one block.
    // The sum must also come back in res_out with add_residual's bits.
    {
        std::vector<Case> pre_cases;
        for (const Fmt& f : FMTS) {
            const bool kq = f.block_len == 256;
            pre_cases.push_back({&f, kq ? 768 : 640, 37, 1, 0, true});
            pre_cases.push_back({&f, kq ? 2560 : 1152, 37, 1, 2, true});
        }
        pre_cases.push_back({fmt("q8_0"), 4096, 14, 1, 0, true});
        pre_cases.push_back({fmt("q6_k"), 4096, 14, 1, 2, true});
        for (const Case& c : pre_cases) {
            Inputs in = make_inputs(c);
            std::vector<float> o(c.n), pw(c.n), sum(c.n, std::nanf(""));
            for (auto& v : o) v = frand();
            for (auto& v : pw) v = 0.5f + frand();
            // The reference: add_residual (kernels/norm.cu) into sum, then x := sum.
            emu_launch(add_residual, dim3{1, 1, 1}, dim3{ADD_THREADS, 1, 1}, 0, sum.data(),
                       (const float*)in.x.data(), (const float*)o.data(), (const float*)pw.data(), 1, c.n,
                       1e-5f, 1);
            Inputs added = in;
            added.x = sum;
            const int nw0 = c.mode == 2 ? 1 : 0;
            const std::vector<float> ref = run(c, added, 0, nw0, true, 0, 0);
            const std::vector<float> plain = run(c, in, 0, nw0, true, 0, 0);
            bool ok = true;
            int differ = 0;
            for (size_t i = 0; i < ref.size(); ++i) differ += std::memcmp(&ref[i], &plain[i], 4) != 0;
            if (differ == 0) {
                emu_harness::fail("mvq_emu", name(c) + ": the post-norm add changed no output (the check could not fail)");
                ok = false;
            }
            const bool dense_ok = c.n < 1024;
            for (int nwi = nw0; nwi < 4 && ok; ++nwi) {
                if (nwi == 3 && !dense_ok) continue;
                for (int blocks : {0, 1}) {
                    std::vector<float> out(c.n, std::nanf(""));
                    const Pre pre{o.data(), pw.data(), out.data()};
                    const std::vector<float> got = run(c, in, 0, nwi, true, blocks, 0, &pre);
                    std::string where;
                    ++checked;
                    const std::string what = name(c) + ": folded add, " +
                                             (nwi == 3 ? std::string("dense") : "NW " + std::to_string(1 << nwi)) +
                                             (blocks ? " one block" : "");
                    if (got.size() != ref.size() || !same(ref, got, &where)) {
                        emu_harness::fail("mvq_emu", what + ", " + where);
                        ok = false;
                        break;
                    }
                    if (!same(sum, out, &where)) {
                        emu_harness::fail("mvq_emu", what + ", res_out " + where);
                        ok = false;
                        break;
                    }
                }
            }
            if (ok)
                std::printf("mvq_emu: ok  %s, post-norm add folded in (the add itself changes %d of %zu outputs)\n",
                            name(c).c_str(), differ, ref.size());
        }
    }
    // The Q8_0 kernels read the layout the host writes (repack::q8_half_at), checked against
    // a double-precision dot of the GGUF blocks' values: the plain walk at 640 (a partial
    // round of 20 blocks), 1088 (a whole round and a partial one of 2) and 4096 (four whole
    // rounds), the dense walk at 640; within 1e-5 of sum |w x|. The same blocks laid out
    // whole must fail it (the check can fail). The checks above hold each kernel against
    // another; only this one holds them against the host's layout.
    for (int n : {640, 1088, 4096}) {
        const Case c{fmt("q8_0"), n, 37, 1, 0, false};
        Inputs in = make_inputs(c);
        bool ok = true;
        for (int whole = 0; whole < 2 && ok; ++whole) {
            const Q8Rows q = q8_rows(n, c.n_out, in.x, whole);
            in.w[0] = q.w;
            for (int nwi : {0, 1, 3}) {
                if (nwi == 3 && n >= 1024) continue;
                const std::vector<float> got = run(c, in, 0, nwi, true, 0, 0);
                int off = 0;
                for (int o = 0; o < c.n_out; ++o) off += std::fabs(got[o] - q.dot[o]) > 1e-5 * q.mag[o] + 1e-30;
                ++checked;
                const std::string what = name(c) + (nwi == 3 ? ", dense" : ", NW " + std::to_string(1 << nwi));
                if (!whole && off) {
                    emu_harness::fail("mvq_emu", what + ": " + std::to_string(off) + " rows off the host layout's dot");
                    ok = false;
                } else if (whole && off == 0) {
                    emu_harness::fail("mvq_emu", what + ": blocks laid out whole read as the halves layout (the check could not fail)");
                    ok = false;
                }
                if (!ok) break;
            }
        }
        if (ok) std::printf("mvq_emu: ok  q8_0 n_in %d: the kernels read repack's halves layout (laid out whole: every walk off)\n", n);
    }
    // The mixed one-row launch: 32-element pairs at 640 (gemma3 270M), 1152 and 4096 (the
    // widest staged one-row tile), K-quant pairs at 768, 2560 and 4096.
    for (const MixPair& p : PAIRS) {
        const bool kq = fmt(p.a)->block_len == 256;
        for (int n : kq ? std::vector<int>{768, 2560, 4096} : std::vector<int>{640, 1152, 4096}) checked += mix_check(p, n);
    }
    // The negative control: --fault row-count-order's planted order must change bits.
    {
        const Case c{fmt("q4_k"), 512, 14, 8, 0, false};
        const Inputs in = make_inputs(c);
        const std::vector<float> ref = run(c, in, 0, 0, true, 0, 0), got = run(c, in, 2, 1, true, 0, 1);
        int differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&ref[i], &got[i], 4) != 0;
        if (differ == 0) emu_harness::fail("mvq_emu", "the planted row-count-order changed no output");
        else std::printf("mvq_emu: ok  the planted row-count-order changes %d of %zu outputs\n", differ, got.size());
    }
    if (failures) {
        std::fprintf(stderr, "mvq_emu: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("mvq_emu: every check held (%d launches against their reference)\n", checked);
    return 0;
}
