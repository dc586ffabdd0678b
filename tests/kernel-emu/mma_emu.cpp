// The tensor-core kernels of kernels/mma.cu run on the CPU (emu.h), checked against each
// other: every kernel the engine may pick for a launch (mma_prep then the decode kernels of 8
// and 16 warps, the fused decode kernels, the GEMM at every warps-along-n the host may pick,
// Q4_K's wgmma GEMM: mma_prep_xg then mma_gemm_wg) must give each output the bits of the
// one-row decode of that output's column alone, for every format, mode (store, += residual,
// act(gate) * up over interleaved m-tiles), norm or none (one row too), q|k|v launches of
// three matrices, row counts from 1 to past two GEMM n-blocks, widths with a partial last
// super-block (the 32-element formats) and ragged last tiles. The wgmma GEMM (the host
// picks it past 8 rows on sm_90a; it computes the same outputs at any row count) runs on
// every Q4_K case, rows 1 to 37, and on cases of its own: two blocks of 8 m-tiles, the last
// ragged; two blocks of 32 columns, the last ragged; 10 to 12 super-blocks (its 2-stage ring
// of bulk copies refilled over and over); the three modes, both activations, q|k|v across
// its m-tile blocks. Each with its bulk copies landing late (when their mbarrier phase
// completes: a stage read before its wait shows its old bytes) and early (at issue: a
// refill of a stage still being read overwrites it), two schedules a GPU may take (emu.h
// models wgmma, the mbarriers and the copies; --quick: late only, three cases of its own). Then checks that the comparison
// can fail and that the emulated mma means what the kernels assume: the planted `--fault
// mma-row-order` (on launches of 2+ rows: hi and lo swapped in the f16 form, Q8_0 here; x
// rounded toward zero in the integer form, Q4_K and Q6_K) must change the GEMM's bits and
// the wgmma GEMM's; the Q4_K and Q6_K decodes' and GEMM's outputs, and the wgmma GEMM's,
// must equal a double-precision matvec of the dequantized weights (read back from the
// documented repacked layouts) to 1e-5 of sum |w x| (the integer pieces keep 22 bits), with
// inputs of ordinary and hostile (1e30, 1e-30) magnitudes; and a NaN or inf input of a row
// makes every Q4_K and Q6_K output of that row non-finite (the wgmma GEMM's too). The mixed
// decode (Q4_K's matrices then Q6_K's in one launch) gives each output its format's own
// launch's bits.
//
// Usage: mma_emu [--quick]   (exit 0: every check held; 1: a check failed, named on stderr;
// 2: emu.h stopped the run: a kernel misused wgmma, an mbarrier or a copy, or deadlocked)
#define MMA_Q4K
#include "../../src/backend/cuda/kernels/common.cu"
#include "../../src/backend/cuda/kernels/ffn.cu"
#include "../../src/backend/cuda/kernels/matvec.cu"
#include "../../src/backend/cuda/kernels/mma.cu"

#include <string>

#include "harness.h"

namespace {

using emu_harness::frand;
using emu_harness::rnd;
using emu_harness::failures;


using KDec = void (*)(MvArgs, const uint4*, const float*, const float*, int, int, int);
using KFus = void (*)(MvArgs, int, int, int, int);

struct Fmt {
    const char* name;
    int f, blk, unit;
    KDec k8, k16, gemm, gemm_n;
    KFus f8, f16;
};
const Fmt FMTS[] = {
    {"q4_k", MF_Q4K, MMA_BLK, 256, mma_decode_k8, mma_decode_k16, mma_gemm, mma_gemm_n, mma_decode_f8, mma_decode_f16},
    {"q8_0", MF_Q8_0, 4352, 32, mma_decode_k8_q8_0, mma_decode_k16_q8_0, mma_gemm_q8_0, mma_gemm_n_q8_0, mma_decode_f8_q8_0,
     mma_decode_f16_q8_0},
    {"q4_0", MF_Q4_0, 2304, 32, mma_decode_k8_q4_0, mma_decode_k16_q4_0, mma_gemm_q4_0, mma_gemm_n_q4_0, mma_decode_f8_q4_0,
     mma_decode_f16_q4_0},
    {"q4_1", MF_Q4_1, 2560, 32, mma_decode_k8_q4_1, mma_decode_k16_q4_1, mma_gemm_q4_1, mma_gemm_n_q4_1, mma_decode_f8_q4_1,
     mma_decode_f16_q4_1},
    {"q5_0", MF_Q5_0, 2816, 32, mma_decode_k8_q5_0, mma_decode_k16_q5_0, mma_gemm_q5_0, mma_gemm_n_q5_0, mma_decode_f8_q5_0,
     mma_decode_f16_q5_0},
    {"q6_k", MF_Q6_K, MMA6_BLK, 256, mma_decode_k8_q6_k, mma_decode_k16_q6_k, mma_gemm_q6_k, mma_gemm_n_q6_k, mma_decode_f8_q6_k,
     mma_decode_f16_q6_k},
};

// A finite f16 of magnitude 2^-12 .. 2^-5 (a weight scale), either sign.
unsigned short rand_scale() {
    const float m = std::ldexp(1.0f + 0.5f * (frand() + 1.0f), -12 + (int)(rnd() % 8));
    return emu_f2h(rnd() & 1 ? -m : m);
}
void put16(std::vector<u8>& b, size_t at, unsigned short v) { std::memcpy(&b[at], &v, 2); }

// One matrix in format fm's repacked layout (kernels/mma.cu head): random quants, scale
// bytes in their ranges, every f16 field a finite scale.
std::vector<u8> make_weights(const Fmt& fm, int n_out, int n_sb) {
    const size_t nblk = (size_t)(n_out / 16) * n_sb;
    std::vector<u8> w(nblk * fm.blk);
    for (auto& b : w) b = (u8)rnd();
    for (size_t i = 0; i < nblk; ++i) {
        const size_t o = i * fm.blk;
        if (fm.f == MF_Q4K) {
            for (int j = 0; j < 256; ++j) w[o + MMA_SC_OFF + j] &= 63;  // 6-bit scales and mins
            for (int j = 0; j < 32; ++j) put16(w, o + MMA_DD_OFF + 2 * j, rand_scale());
        } else if (fm.f == MF_Q6_K) {  // every quant and int8 scale byte is valid as drawn
            for (int j = 0; j < 16; ++j) put16(w, o + MMA6_DD_OFF + 2 * j, rand_scale());
        } else {
            const int nd = fm.f == MF_Q4_1 ? 4 : 2, doff = fm.blk - 8 * 16 * nd;
            for (int j = 0; j < 8 * 8 * nd; ++j) put16(w, o + doff + 2 * j, rand_scale());
        }
    }
    return w;
}

struct Case {
    const Fmt* fm;
    int mode;          // 0 store, 1 += residual, 2 act(gate) * up
    int act;           // mode 2: 0 silu, 1 gelu
    bool norm;
    int n_in;
    std::vector<int> n_out;  // per matrix (mode 2: gate and up, equal)
    int rows;
};

struct Launch {
    const Case& c;
    std::vector<std::vector<u8>> w;
    std::vector<float> x, g, y0;  // inputs [rows][n_in], norm weights, initial y (mode 1)
    int n_sb, n_mt;
};

// y = the launch over rows [r0, r0 + rows) of x, by `kind`: 0 decode k8, 1 decode k16,
// 2 fused f8, 3 fused f16, 4 + wn GEMM with wn warps along n (1, 2, 4), 9 the narrow GEMM
// (engine/mma.rs mma_gemm_narrow: 4 warps of 2 x 1 tiles, a block an n-tile), KIND_WG the
// Q4_K GEMM on wgmma (mma_prep_xg then mma_gemm_wg; emu.h models wgmma, the mbarriers and
// the bulk copies).
constexpr int KIND_WG = 10;
// Bulk copies that land at issue in the wgmma GEMM (emu.h emu_bulk_early), not at their
// phase's completion: set for a second run of some cases (both are schedules a GPU may take).
bool wg_early = false;
std::vector<float> run(const Launch& L, int kind, int r0, int rows, int plant) {
    const Case& c = L.c;
    const int nm = (int)c.n_out.size();
    std::vector<std::vector<float>> ys(nm);
    MvArgs a{};
    for (int m = 0; m < nm; ++m) {
        ys[m].assign((size_t)rows * c.n_out[m], 0.0f);
        if (c.mode == 1 && m == 0)
            std::memcpy(ys[0].data(), L.y0.data() + (size_t)r0 * c.n_out[0], ys[0].size() * 4);
        a.m[m].w = L.w[m].data();
        a.m[m].row_bytes = 0;
        a.m[m].y = ys[m].data();
        a.m[m].n_out = c.n_out[m];
        a.m[m].fmt = 0;
    }
    a.x = L.x.data() + (size_t)r0 * c.n_in;
    a.norm = c.norm ? L.g.data() : nullptr;
    a.n_mat = nm;
    a.n_in = c.n_in;
    a.rows = rows;
    a.mode = c.mode;
    a.act = c.act;
    a.eps = 1e-5f;
    a.plant = 0;
    const int n_sb = L.n_sb, n_mt = L.n_mt;
    if (kind == KIND_WG) {
        // XG: per 32 columns and super-block one WG_TILE, garbage first (a byte the prep
        // misses shows); not the harness's generator, so the drawn data stay as they were.
        const int cols = (rows + WG_BN - 1) / WG_BN * WG_BN;
        std::vector<uint4> XG((size_t)cols / WG_BN * n_sb * WG_TILE / 16);
        uint64_t z = 0x243F6A8885A308D3ull;
        for (auto& v : XG) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            v = make_uint4((unsigned)(z >> 32), (unsigned)z, (unsigned)(z >> 17), (unsigned)(z >> 41));
        }
        emu_launch(mma_prep_xg, dim3{(unsigned)cols, (unsigned)((n_sb + 7) / 8), 1}, dim3{256, 1, 1}, 0, a,
                   (u8*)XG.data(), plant);
        emu_bulk_early = wg_early;
        emu_launch(mma_gemm_wg, dim3{(unsigned)(cols / WG_BN), (unsigned)((n_mt + WG_MT - 1) / WG_MT), 1},
                   dim3{WG_NWG * 128, 1, 1}, WG_SMEM, a, (const u8*)XG.data(), n_mt, n_sb, rows);
        emu_bulk_early = false;
        std::string first;
        if (const int n = emu_take_faults(&first))
            emu_harness::fail("mma_emu", "wgmma GEMM: " + std::to_string(n) + " emulator fault(s), the first: " + first);
    } else if (kind == 2 || kind == 3) {
        const int warps = kind == 2 ? 8 : 16;
        const size_t smem = (size_t)rows * n_sb * 4 * (256 + 8 + 1);  // engine/mma.rs MMA_FUSE_UNIT
        emu_launch(kind == 2 ? L.c.fm->f8 : L.c.fm->f16, dim3{(unsigned)((n_mt + 1) / 2), 1, 1},
                   dim3{(unsigned)(32 * warps), 1, 1}, smem, a, n_mt, n_sb, rows, plant);
    } else {
        const bool gemm = kind >= 4;
        const int cols = gemm ? (rows + 7) / 8 * 8 : rows;
        std::vector<u32> XF((size_t)cols * n_sb * 256);
        std::vector<float> XE((size_t)cols * n_sb), XS((size_t)cols * n_sb * 8);
        emu_launch(mma_prep, dim3{(unsigned)cols, (unsigned)((n_sb + 7) / 8), 1}, dim3{256, 1, 1}, 0, a,
                   XF.data(), XE.data(), XS.data(), plant, (int)(c.fm->f == MF_Q4K || c.fm->f == MF_Q6_K));
        const uint4* xf = (const uint4*)XF.data();
        if (!gemm) {
            emu_launch(kind == 0 ? c.fm->k8 : c.fm->k16, dim3{(unsigned)((n_mt + 1) / 2), 1, 1},
                       dim3{(unsigned)(kind == 0 ? 256 : 512), 1, 1}, 0, a, xf, (const float*)XE.data(),
                       (const float*)XS.data(), n_mt, n_sb, rows);
        } else if (kind == 9) {
            emu_launch(c.fm->gemm_n, dim3{(unsigned)((n_mt + 7) / 8), (unsigned)((rows + 7) / 8), 1},
                       dim3{128, 1, 1}, 0, a, xf, (const float*)XE.data(), (const float*)XS.data(), n_mt, n_sb,
                       rows);
        } else {
            const int wn = kind - 4;
            emu_launch(c.fm->gemm, dim3{(unsigned)((n_mt + 7) / 8), (unsigned)((rows + 16 * wn - 1) / (16 * wn)), 1},
                       dim3{(unsigned)(128 * wn), 1, 1}, 0, a, xf, (const float*)XE.data(),
                       (const float*)XS.data(), n_mt, n_sb, rows);
        }
    }
    std::vector<float> out;
    for (int m = 0; m < (c.mode == 2 ? 1 : nm); ++m) out.insert(out.end(), ys[m].begin(), ys[m].end());
    return out;
}

Launch make_launch(const Case& c) {
    Launch L{c, {}, {}, {}, {}, (c.n_in + 255) / 256, 0};
    for (int n : c.n_out) L.w.push_back(make_weights(*c.fm, n, L.n_sb));
    L.n_mt = 0;
    for (int n : c.n_out) L.n_mt += n / 16;
    L.x.resize((size_t)c.rows * c.n_in);
    for (int r = 0; r < c.rows; ++r)
        for (int i = 0; i < c.n_in; ++i) {
            // Magnitudes that vary per super-block (each takes its own 2^E), some zeros, a
            // row of zeros (E clamped) when there are several rows.
            const int sb = i / 256;
            float v = std::ldexp(frand(), ((r * 7 + sb * 3) % 9) - 4);
            if (rnd() % 17 == 0) v = 0.0f;
            if (c.rows > 2 && r == 1) v = 0.0f;
            L.x[(size_t)r * c.n_in + i] = v;
        }
    L.g.resize(c.n_in);
    for (auto& v : L.g) v = 1.0f + 0.5f * frand();
    L.y0.resize((size_t)c.rows * c.n_out[0]);
    for (auto& v : L.y0) v = frand();
    return L;
}

void fail(const std::string& what) { emu_harness::fail("mma_emu", what); }

std::string name(const Case& c) {
    std::string s = std::string(c.fm->name) + " mode " + std::to_string(c.mode) + (c.norm ? " norm" : "") +
                    " n_in " + std::to_string(c.n_in) + " n_out";
    for (int n : c.n_out) s += " " + std::to_string(n);
    return s + " rows " + std::to_string(c.rows);
}

// The output rows of run() for rows [r0, r0 + rows): per matrix [rows][n_out].
float out_at(const Case& c, const std::vector<float>& y, int rows, int r, int j) {
    size_t base = 0;
    int m = 0;
    while (c.mode != 2 && j >= c.n_out[m]) {
        base += (size_t)rows * c.n_out[m];
        j -= c.n_out[m];
        ++m;
    }
    return y[base + (size_t)r * c.n_out[m] + j];
}

// The wgmma GEMM's launches checked, and their outputs (the summary line).
int wg_launches = 0;
size_t wg_outputs = 0;

// The wgmma GEMM (Q4_K) of case c against the one-row decode (compare), at every row count:
// the host picks it past 8 rows, but it computes the same outputs at any. Its bulk copies
// landing late (at their phase's completion, the default) and, but in --quick, early (at
// issue): a correct kernel gives the same bits under both schedules.
template <class Cmp>
void check_wg(const Case& c, const Launch& L, const std::vector<std::vector<float>>& ref, Cmp& compare, bool quick) {
    for (bool early : {false, true}) {
        if (early && quick) continue;
        wg_early = early;
        compare(run(L, KIND_WG, 0, c.rows, 0), KIND_WG, early ? "wgmma gemm (copies land at issue)" : "wgmma gemm");
        wg_early = false;
        ++wg_launches;
        wg_outputs += (size_t)c.rows * ref[0].size();
    }
}

// Every kernel the host may pick for this launch against the one-row decode, bit for bit.
// wg_own: a case of the wgmma GEMM's own (main): it and the GEMM of one warp along n only.
void check_case(const Case& c, bool quick, bool wg_own = false) {
    const int failed = failures;
    const Launch L = make_launch(c);
    const int outs = c.mode == 2 ? c.n_out[0] : [&] { int s = 0; for (int n : c.n_out) s += n; return s; }();
    std::vector<std::vector<float>> ref(c.rows);
    for (int r = 0; r < c.rows; ++r) ref[r] = run(L, 0, r, 1, 0);
    auto compare = [&](const std::vector<float>& y, int kind, const char* what) {
        for (int r = 0; r < c.rows; ++r)
            for (int j = 0; j < outs; ++j) {
                const float a = out_at(c, y, c.rows, r, j), b = out_at(c, ref[r], 1, 0, j);
                if (__float_as_uint(a) != __float_as_uint(b)) {
                    char buf[160];
                    std::snprintf(buf, sizeof buf, ": %s (kind %d) row %d out %d: %.9g, one-row decode %.9g", what,
                                  kind, r, j, a, b);
                    fail(name(c) + buf);
                    return;
                }
            }
    };
    if (wg_own) {
        compare(run(L, 5, 0, c.rows, 0), 5, "gemm");
        check_wg(c, L, ref, compare, quick);
        if (failures == failed)
            std::printf("mma_emu: ok  %s: wgmma GEMM (%s) and GEMM\n", name(c).c_str(),
                        quick ? "copies landing late" : "copies landing late, then early");
        return;
    }
    if (c.rows <= 8) {
        compare(run(L, 0, 0, c.rows, 0), 0, "decode k8");
        compare(run(L, 1, 0, c.rows, 0), 1, "decode k16");
        if (c.rows == 1) {
            compare(run(L, 2, 0, 1, 0), 2, "fused f8");
            compare(run(L, 3, 0, 1, 0), 3, "fused f16");
        }
    }
    for (int wn : {1, 2, 4}) {
        if (quick && wn == 2) continue;
        compare(run(L, 4 + wn, 0, c.rows, 0), 4 + wn, "gemm");
    }
    compare(run(L, 9, 0, c.rows, 0), 9, "narrow gemm");
    if (c.fm->f == MF_Q4K) check_wg(c, L, ref, compare, quick);
    if (failures == failed)
        std::printf("mma_emu: ok  %s%s\n", name(c).c_str(), c.fm->f == MF_Q4K ? " (and the wgmma GEMM)" : "");
}

// The planted row-order fault must change the GEMM's bits (the comparison can fail), in both
// forms of the prepared activations (fm: Q4_K's and Q6_K's integer pieces, Q8_0's f16 hi
// and lo).
void check_plant(const Fmt& fm) {
    Case c{&fm, 0, 0, true, 512, {32}, 12};
    const Launch L = make_launch(c);
    // The GEMM (4 warps along n), and Q4_K's wgmma GEMM (mma_prep_xg plants it as mma_prep).
    for (int kind : {8, KIND_WG}) {
        if (kind == KIND_WG && fm.f != MF_Q4K) continue;
        const char* what = kind == KIND_WG ? "wgmma GEMM" : "GEMM";
        const std::vector<float> clean = run(L, kind, 0, c.rows, 0), planted = run(L, kind, 0, c.rows, 1);
        size_t diff = 0;
        for (size_t i = 0; i < clean.size(); ++i) diff += __float_as_uint(clean[i]) != __float_as_uint(planted[i]);
        // At least a quarter: the f16 swap reorders two roundings of a chain, which leaves some
        // outputs' bits alone (the emulated mma's rounding: about 40 % change on Q8_0 here).
        if (diff * 4 < clean.size())
            fail(std::string(fm.name) + ": the planted mma-row-order fault changed " + std::to_string(diff) + " of " +
                 std::to_string(clean.size()) + " " + what + " outputs (at least a quarter expected)");
        else
            std::printf("mma_emu: ok  %s plant mma-row-order changes %zu of %zu %s outputs\n", fm.name, diff,
                        clean.size(), what);
    }
}

// Weight (o, k) of an integer format's matrix w (n_sb super-blocks), read back from the
// repacked layout of the head of kernels/mma.cu: Q4_K d * sc * q - dmin * m; Q6_K d * sc *
// (q - 32) (q: the nibble word as Q4_K's, the high pair from the lane's high-bit word).
double int_weight(const Fmt& fm, const std::vector<u8>& w, int n_sb, int o, int k) {
    const int mt = o / 16, row = o % 16, g = row % 8, h = row / 8, sb = k / 256;
    const u8* b = &w[((size_t)mt * n_sb + sb) * fm.blk];
    k %= 256;
    // Sub-block chunk s (32 k), half j (b0 or b1's k), lane t, byte i.
    const int s = k / 32, j = (k % 32) / 16, t = (k % 16) / 4, i = k % 4, lane = 4 * g + t;
    u32 word;
    std::memcpy(&word, b + 4 * ((s / 2) * 128 + lane * 4 + 2 * (s % 2) + j), 4);
    const int lo = (word >> (8 * i + 4 * h)) & 15;
    auto h16 = [&](int at) { return (double)emu_h2f((unsigned short)(b[at] | (b[at + 1] << 8))); };
    if (fm.f == MF_Q4K) {
        const int sc = b[MMA_SC_OFF + g * 32 + h * 8 + s], mn = b[MMA_SC_OFF + g * 32 + 16 + h * 8 + s];
        return h16(MMA_DD_OFF + g * 8 + h * 4) * sc * lo - h16(MMA_DD_OFF + g * 8 + h * 4 + 2) * mn;
    }
    u32 hw;
    std::memcpy(&hw, b + MMA6_HI_OFF + 16 * ((s / 4) * 32 + lane) + 4 * (s % 4), 4);
    const int q = lo | (((hw >> (8 * i + 2 * (h + 2 * j))) & 3) << 4);
    const int sub = 2 * s + j;
    const int sc = (signed char)b[MMA6_SC_OFF + g * 32 + h * 16 + 8 * (sub % 2) + sub / 2];
    return h16(MMA6_DD_OFF + g * 4 + h * 2) * sc * (q - 32);
}

// An integer format's decode (Q4_K, Q6_K) against a double-precision matvec of the weights
// read back from the repacked layout (int_weight): the emulated mma's fragments mean what
// the kernels assume, and THE ORDER computes the matvec. Its integer activations keep 22
// bits of each super-block's largest, so the bound is 1e-5 of sum |w x|, at ordinary
// magnitudes and at hostile ones (rows scaled by `scale`: 1e30 and 1e-30 keep every product
// normal in f32). The one-row path and the several-row path alike (kinds: rows decoded one
// at a time, then all three in one launch; the k16 decode and the GEMM).
void check_semantics(const Fmt& fm, float scale) {
    Case c{&fm, 0, 0, false, 768, {48}, 3};
    Launch L = make_launch(c);
    for (auto& v : L.x) v *= scale;
    const int n_sb = L.n_sb;
    double worst = 0.0;
    const std::vector<float> all = run(L, 1, 0, c.rows, 0), gemm = run(L, 5, 0, c.rows, 0);
    // Q4_K's wgmma GEMM too (its wgmma's A, B and D layouts mean what the kernel assumes).
    const std::vector<float> wg = fm.f == MF_Q4K ? run(L, KIND_WG, 0, c.rows, 0) : gemm;
    for (int r = 0; r < c.rows; ++r) {
        const std::vector<float> y = run(L, 1, r, 1, 0);
        for (int o = 0; o < c.n_out[0]; ++o) {
            double acc = 0.0, mag = 0.0;
            for (int k = 0; k < c.n_in; ++k) {
                const double wv = int_weight(fm, L.w[0], n_sb, o, k), xv = L.x[(size_t)r * c.n_in + k];
                acc += wv * xv;
                mag += std::fabs(wv * xv);
            }
            for (float got : {y[o], all[(size_t)r * c.n_out[0] + o], gemm[(size_t)r * c.n_out[0] + o],
                              wg[(size_t)r * c.n_out[0] + o]}) {
                const double err = std::fabs((double)got - acc) / (mag > 0 ? mag : 1.0);
                if (!(err <= worst)) worst = err;  // NaN too
            }
        }
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, " (x scaled by %g)", (double)scale);
    if (!(worst <= 1e-5))
        fail(std::string(fm.name) + " decode against the dequantized matvec" + buf + ": relative error " + std::to_string(worst));
    else
        std::printf("mma_emu: ok  %s decode and GEMM%s = dequantized matvec%s (worst relative error %.2e)\n", fm.name,
                    fm.f == MF_Q4K ? " and wgmma GEMM" : "", buf, worst);
}

// A non-finite input (NaN, +inf) of a row makes every output of that row non-finite, for an
// integer format (Q4_K, Q6_K), in the decode (of several rows, and of the row alone) and the
// GEMM: its integer pieces hide it (cvt to an integer saturates, or gives 0 for NaN; then
// clamped), its super-block's 2^E does not (NaN: kernels/mma.cu mma_prep_sb; Q4_K's
// sub-block sums would too). The other rows keep their one-row decode's bits. The check can
// fail: the control below, the same rows with the bad inputs zeroed, comes out finite.
void check_nonfinite(const Fmt& fm) {
    Case c{&fm, 0, 0, false, 512, {32}, 3};
    Launch L = make_launch(c);
    L.x[(size_t)1 * c.n_in + 37] = std::nanf("");
    L.x[(size_t)2 * c.n_in + 300] = INFINITY;
    const std::vector<float> one = run(L, 0, 0, 1, 0);
    for (int kind : {0, 5, KIND_WG}) {
        if (kind == KIND_WG && fm.f != MF_Q4K) continue;
        const std::vector<float> y = run(L, kind, 0, c.rows, 0);
        int finite_bad = 0, row0_bad = 0;
        for (int r = 1; r < 3; ++r)
            for (int o = 0; o < c.n_out[0]; ++o) finite_bad += std::isfinite(y[(size_t)r * c.n_out[0] + o]);
        for (int o = 0; o < c.n_out[0]; ++o) row0_bad += __float_as_uint(y[o]) != __float_as_uint(one[o]);
        if (finite_bad || row0_bad) {
            fail(std::string(fm.name) + ": non-finite inputs (kind " + std::to_string(kind) + "): " + std::to_string(finite_bad) +
                 " finite outputs of the NaN and inf rows, " + std::to_string(row0_bad) + " of the clean row off its one-row bits");
            return;
        }
    }
    // The one-row decode (its own path: one mma a sub-block, the digits as B columns) of the
    // NaN row and of the inf row alone.
    for (int r = 1; r < 3; ++r) {
        const std::vector<float> y = run(L, 0, r, 1, 0);
        int finite = 0;
        for (int o = 0; o < c.n_out[0]; ++o) finite += std::isfinite(y[o]);
        if (finite) {
            fail(std::string(fm.name) + ": non-finite input, row " + std::to_string(r) + " decoded alone: " +
                 std::to_string(finite) + " finite outputs");
            return;
        }
    }
    // The control: the same rows with the bad values' sums zeroed out, i.e. what the integer
    // pieces alone would give: finite outputs, so the check above sees the difference.
    Launch H = L;
    H.x[(size_t)1 * c.n_in + 37] = 0.0f;
    H.x[(size_t)2 * c.n_in + 300] = 0.0f;
    const std::vector<float> y = run(H, 0, 0, c.rows, 0);
    int finite = 0;
    for (size_t i = 0; i < y.size(); ++i) finite += std::isfinite(y[i]);
    if (finite != (int)y.size()) fail(std::string(fm.name) + ": non-finite control: zeroed inputs gave non-finite outputs");
    else
        std::printf("mma_emu: ok  %s NaN and inf inputs give non-finite rows (decode of 3 rows and of each "
                    "alone, GEMM%s), the clean row its bits\n", fm.name, fm.f == MF_Q4K ? ", wgmma GEMM" : "");
}

// The mixed decode (kernels/mma.cu mma_decode_mix, engine/mma.rs mma_mix_split): one launch
// over two Q4_K matrices (q, k: 4 m-tiles) then a Q6_K one (v) gives every output the bits of
// its format's own decode launch over the same rows, at one row and at five, on 8 and 16 warps.
// The check can fail: the same launch with a wrong split (2: k's tiles read as Q6_K) differs.
void check_mix(int rows) {
    const Fmt& q4 = FMTS[0];
    const Fmt& q6 = FMTS[5];
    const Case c4{&q4, 0, 0, true, 512, {32, 32}, rows}, c6{&q6, 0, 0, true, 512, {16}, rows};
    const Launch L4 = make_launch(c4);
    Launch L6 = make_launch(c6);
    L6.x = L4.x;
    L6.g = L4.g;
    std::vector<float> ref = run(L4, 0, 0, rows, 0);
    const std::vector<float> r6 = run(L6, 0, 0, rows, 0);
    ref.insert(ref.end(), r6.begin(), r6.end());
    const int n_sb = L4.n_sb, n_mt = L4.n_mt + L6.n_mt;
    // q and k with zero bytes past their end: the wrong split below reads k's tiles at Q6_K's
    // larger block stride (a launch the host never makes), which must stay in bounds.
    std::vector<u8> q = L4.w[0], k = L4.w[1];
    k.resize(k.size() + (size_t)2 * n_sb * MMA6_BLK, 0);
    auto mixed = [&](int warps, int split) {
        const std::vector<const std::vector<u8>*> w = {&q, &k, &L6.w[0]};
        const int n_out[3] = {32, 32, 16};
        std::vector<std::vector<float>> ys(3);
        MvArgs a{};
        for (int m = 0; m < 3; ++m) {
            ys[m].assign((size_t)rows * n_out[m], 0.0f);
            a.m[m].w = w[m]->data();
            a.m[m].y = ys[m].data();
            a.m[m].n_out = n_out[m];
        }
        a.x = L4.x.data();
        a.norm = L4.g.data();
        a.n_mat = 3;
        a.n_in = 512;
        a.rows = rows;
        a.eps = 1e-5f;
        std::vector<u32> XF((size_t)rows * n_sb * 256);
        std::vector<float> XE((size_t)rows * n_sb), XS((size_t)rows * n_sb * 8);
        emu_launch(mma_prep, dim3{(unsigned)rows, (unsigned)((n_sb + 7) / 8), 1}, dim3{256, 1, 1}, 0, a, XF.data(),
                   XE.data(), XS.data(), 0, 1);
        emu_launch(warps == 8 ? mma_decode_k8_mix : mma_decode_k16_mix, dim3{(unsigned)((n_mt + 1) / 2), 1, 1},
                   dim3{(unsigned)(32 * warps), 1, 1}, 0, a, (const uint4*)XF.data(), (const float*)XE.data(),
                   (const float*)XS.data(), n_mt, n_sb, rows, split);
        std::vector<float> out;
        for (auto& y : ys) out.insert(out.end(), y.begin(), y.end());
        return out;
    };
    auto differs = [&](const std::vector<float>& y) {
        size_t d = 0;
        for (size_t i = 0; i < y.size(); ++i) d += __float_as_uint(y[i]) != __float_as_uint(ref[i]);
        return d;
    };
    for (int warps : {8, 16}) {
        const size_t d = differs(mixed(warps, L4.n_mt));
        if (d) {
            fail("mixed q4_k|q6_k decode, " + std::to_string(warps) + " warps, rows " + std::to_string(rows) + ": " +
                 std::to_string(d) + " outputs off their format's own launch");
            return;
        }
    }
    const size_t d = differs(mixed(16, 2));
    if (d * 4 < ref.size())
        fail("mixed q4_k|q6_k decode: a wrong split changed only " + std::to_string(d) + " outputs");
    else
        std::printf("mma_emu: ok  mixed q4_k|q6_k decode (q, k Q4_K, v Q6_K) rows %d = each format's own launch, "
                    "8 and 16 warps; a wrong split changes %zu of %zu\n", rows, d, ref.size());
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    check_semantics(FMTS[0], 1.0f);
    check_semantics(FMTS[0], 1e30f);
    check_semantics(FMTS[0], 1e-30f);
    check_nonfinite(FMTS[0]);
    check_plant(FMTS[0]);
    check_plant(FMTS[1]);
    for (const Fmt& fm : FMTS) {
        const int wide = fm.unit == 32 ? 544 : 512;  // the 32-element formats: a partial super-block
        check_case({&fm, 0, 0, true, wide, {32, 16, 16}, 1}, quick);       // q|k|v, eager
        check_case({&fm, 1, 0, false, wide, {48}, 5}, quick);              // += residual, B = 5
        check_case({&fm, 2, fm.f == MF_Q8_0, true, wide, {32, 32}, 8}, quick);  // gate|up, B = 8
        check_case({&fm, 0, 0, true, wide, {80}, 21}, quick);              // GEMM, ragged tiles
        if (!quick || fm.f == MF_Q4K) check_case({&fm, 2, 0, false, 256, {48, 48}, 37}, quick);
        // One row without a norm (o, down: the fused kernels' prep without its sum of
        // squares; 10 super-blocks, two rounds of the 8-warp kernel), and a store of two.
        check_case({&fm, 1, 0, false, fm.unit == 32 ? 2592 : 2560, {32}, 1}, quick);
        check_case({&fm, 0, 0, false, wide, {16, 32}, 1}, quick);
    }
    // Q6_K's integer route (after the cases: their drawn data as before it was added).
    const Fmt& q6 = FMTS[5];
    check_semantics(q6, 1.0f);
    check_semantics(q6, 1e30f);
    check_semantics(q6, 1e-30f);
    check_nonfinite(q6);
    check_plant(q6);
    check_mix(1);
    check_mix(5);
    // The wgmma GEMM's own cases (Q4_K; after the others: their drawn data as before): blocks
    // of WG_MT m-tiles (4 at WG_NWG 1: n_mt 12, 9, 10 are 3 blocks each, the last of 9 and of
    // 10 ragged; at 2 warpgroups, 2 blocks), two blocks of 32 columns, the
    // last ragged (rows 40, 33; 64 whole), 10 and 11 super-blocks (the ring's 2 stages
    // refilled over and over; 3 and 1 besides), every mode and both activations, q|k|v
    // across the m-tile blocks, and rows 2..8 over 12 super-blocks.
    const Fmt& q4 = FMTS[0];
    check_case({&q4, 0, 0, true, 2560, {96, 48, 48}, 40}, quick, true);
    check_case({&q4, 1, 0, false, 2816, {144}, 33}, quick, true);
    check_case({&q4, 2, 0, true, 768, {80, 80}, 64}, quick, true);
    if (!quick) {
        check_case({&q4, 2, 1, false, 2560, {48, 48}, 9}, quick, true);
        check_case({&q4, 0, 0, false, 256, {128, 16}, 32}, quick, true);
        for (int rows = 2; rows <= 8; rows += 3) check_case({&q4, 0, 0, true, 3072, {16, 16, 16}, rows}, quick, true);
    }
    if (failures == 0)
        std::printf("mma_emu: ok  the wgmma GEMM: %d launches, %zu outputs, each the one-row decode's bits\n",
                    wg_launches, wg_outputs);
    if (failures) {
        std::fprintf(stderr, "mma_emu: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("mma_emu: every check held\n");
    return 0;
}
