// fused_check: the fused Swin block kernel (kernels/cuda/swin_block_fused.cu) and the tensor-core
// head (kernels/cuda/head_tc.cu) on a GPU; with --merge the fused patch merge / expand
// (kernels/cuda/patch_tc.cu). Built with the CUDA engine; run by tools/fused_check.sh and
// tests/run_tests.sh (--quick). Not GoogleTest: one line per check, the last line "N passed, N
// failed". Their timings are denoise-cuda-bench's (--swin, --head, --patch: tools/cuda_bench/).
// The device side (buffers, transfers, the block's weights, the op sequence, guarded maps) is
// tests/gpu/swin_block_dev.h.
//
// Checks (every kernel built, SWIN_FUSED_KERNELS: tile plan and build; fp32 and bf16 residual
// stream, shift 0 and 4):
//  1. against the CPU reference block (kernels/cpu ops as kernels/cpu/unet.cpp runs them) on fresh
//     random inputs x ~ N(0, 1) and random weights scaled like trained ones (tests/common/swin_ref.h), on
//     maps where the masked (wrapped) windows matter (one window; 3 windows wide; odd window counts
//     for 2-window tiles) and, in full mode, 1080p token grids (model v1's three widths at their
//     stages' grids, the other widths at the grid of a level a wider model would give them, C 64
//     also at level 0 as wide64 runs it).
//     The map sits between two guard bands poisoned with 0xFF bytes (NaN) that must stay
//     untouched; no token may come back bit-identical to its input (every token written); pass:
//     relative L2 of the output < 1e-2 and of the block's change < 3e-2, all finite (output and
//     reference); on a failure the line says where the first non-finite or worst value is;
//     The last block's form (fp32 in, the output rounded to bf16 into a separate map, bf16_out):
//     bit for bit the in-place output rounded to nearest even, the input map untouched;
//  2. the instrumented kernel's mma count == the descriptor's mma_per_cta x CTAs, and its output
//     equals the plain kernel's; every kernel of a width gives the engine's kernel's output bit for
//     bit (the plans and builds differ in which warp computes what, where q passes, when loads
//     are issued and how many registers ptxas may use, never in an operation or its order);
//  3. bad calls refused with DENOISE_EINVAL and a message;
//  4. (full mode) the correct-first op sequence (kernels/cuda/ops.h) that the timings compare
//     against, against the same CPU reference: as one chunk, and in chunks of a few windows /
//     tokens with the chunk buffers holding only the chunk (Net::block's contract).
//  5. the head: head_conv3d_tc vs the two-pass head (cuBLASLt GEMMs + head_stencil in bands of
//     rows, Net::head's loop) vs the CPU engine's fp32 head (kernels/cpu/head.cpp) on fresh random
//     bf16-exact inputs (F ~ U(-1, 1), weights and bias ~ U(-0.1, 0.1), residual ~ U(-1.3, 1.3)),
//     1x1 to a 1080p frame's 960x544 tokens, odd widths / heights, Cin 32 and 64, Cout 1..16 (12, 7, 16, 4),
//     bands of 1 row to the backend's, output and change forms; outputs poisoned (NaN) between
//     guard bands; pass: all finite, rel L2 < 1e-5 and max abs < 1e-4 pairwise (fp32 summation
//     order only), guards intact, some outputs clamped; then its refusals.
// With --merge: instead of all that, the fused patch merge / patch expand (kernels/cuda/patch_tc.cu)
// against a host reference and the op sequence, and refusals (section "patch merge / patch expand"
// below). With --head: instead of all that, the head's checks (5.) only. Both flags together run
// both sets.
// Usage: fused_check [--quick] [--merge] [--head]   (--quick: checks on small maps only, the
//   builds of a tile plan other than its plain one in the fp32 form only, one mma count per
//   instrumented kernel: for compute-sanitizer memcheck / racecheck)
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/ops.h"
#include "cuda/ops.h"
#include "cuda/patch_tc.h"
#include "cuda/swin_block_desc.h"
#include "cuda/swin_block_fused.h"
#include "cuda/swin_weight_image.h"
#include "denoise.h"
#include "check_tally.h"
#include "swin_block_dev.h"
#include "swin_ref.h"

using namespace denoise;
using namespace denoise::cuda;
using check_tally::result;

namespace {

using namespace swin_dev;

// Where element i of an (H, W, C) map is, for failure lines: "token (y, x) window (wy, wx) ch c".
std::string where(int64_t i, int W, int C) {
    if (i < 0) return "-";
    const int64_t t = i / C;
    const int y = (int)(t / W), x = (int)(t % W);
    char b[96];
    std::snprintf(b, sizeof b, "token (%d, %d) window (%d, %d) ch %d", y, x, y / 8, x / 8, (int)(i % C));
    return b;
}

// Windows of an (H, W, C) map with at least one non-finite element.
int64_t windows_with_nonfinite(const std::vector<float> &v, int H, int W, int C) {
    std::vector<char> bad((size_t)(H / 8) * (W / 8), 0);
    for (size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i])) {
            const int64_t t = (int64_t)i / C;
            bad[(size_t)((t / W) / 8 * (W / 8) + (t % W) / 8)] = 1;
        }
    return std::count(bad.begin(), bad.end(), 1);
}

// tokens whose C outputs are all bit-identical to the input (not written)
int64_t unchanged_tokens(const std::vector<float> &out, const std::vector<float> &in, int C) {
    int64_t u = 0;
    for (size_t t = 0; t < in.size() / C; ++t)
        if (std::memcmp(&out[t * C], &in[t * C], 4 * C) == 0) ++u;
    return u;
}

void check_vs_cpu(const Kernel &k, int H, int W, int shift, bool bf16, uint32_t seed) {
    const int C = k.t.C, heads = C / k.t.HD;
    const size_t n = (size_t)H * W * C;
    swin_ref::RandomBlock rb(C, heads, shift, seed);
    DevBlock B(rb);
    std::vector<float> x0 = swin_ref::random_map(n, seed + 1);
    if (bf16)
        for (float &v : x0) v = bf16_host::round(v);
    std::vector<float> ref = x0;
    swin_ref::reference_block(rb.w, C, heads, ref.data(), H, W, kEps);
    std::vector<float> out;
    bool guards = false;
    run_fused(B, x0, H, W, shift, bf16, k, &out, &guards, nullptr);
    const swin_ref::Error e = swin_ref::compare(out.data(), ref.data(), x0.data(), (int64_t)n);
    const int64_t same = unchanged_tokens(out, x0, C);
    const bool ok = swin_ref::passes(e) && guards && same == 0;
    std::string detail;
    if (!ok) {
        detail = "; reference non-finite " + std::to_string(e.ref_nonfinite) + ", first non-finite output at " +
                 where(e.first_nonfinite, W, C) + " (" + std::to_string(windows_with_nonfinite(out, H, W, C)) + " of " +
                 std::to_string((H / 8) * (W / 8)) + " windows), worst finite at " + where(e.worst, W, C);
    }
    result(ok,
           "fused %s %4dx%-4d shift %d %s vs CPU: rel L2 %.2e (< %.0e), change rel L2 %.2e (< %.0e), "
           "max abs %.2e, non-finite %lld, unwritten tokens %lld, guards %s%s",
           kernel_name(k).c_str(), W, H, shift, bf16 ? "bf16" : "fp32", e.rel_l2,
           swin_ref::kRelL2, e.delta_rel_l2, swin_ref::kDeltaRelL2, e.max_abs, (long long)e.nonfinite, (long long)same,
           guards ? "intact" : "WRITTEN", detail.c_str());
}

// The U-Net's last block (SwinFusedParams::bf16_out): fp32 x in, the output rounded to bf16 into a
// separate map. Pass: that map is bit for bit the in-place fp32 run's output rounded to nearest
// even, the input map is untouched, both maps' guard bands intact.
void check_bf16_out(const Kernel &k, int H, int W, int shift, uint32_t seed) {
    const int C = k.t.C, heads = C / k.t.HD;
    const size_t n = (size_t)H * W * C;
    swin_ref::RandomBlock rb(C, heads, shift, seed);
    DevBlock B(rb);
    const std::vector<float> x0 = swin_ref::random_map(n, seed + 1);
    std::vector<float> inplace;
    bool g_in = false;
    run_fused(B, x0, H, W, shift, false, k, &inplace, &g_in, nullptr);
    GuardedMap x(4 * n), o(2 * n);
    h2d(x.map(), x0.data(), 4 * n);
    SwinFusedParams p = params_of(k);
    p.bf16_out = static_cast<uint16_t *>(o.map());
    ok_or_die(swin_block_fused(g_ctx, B.image, C, heads, kEps, x.map(), false, H, W, shift, &p), "swin_block_fused (bf16_out)");
    ck(cudaStreamSynchronize(g_ctx.stream), "fused Swin block kernel (bf16_out)");
    std::vector<uint16_t> ob(n);
    std::vector<float> xa(n);
    d2h(ob.data(), o.map(), 2 * n);
    d2h(xa.data(), x.map(), 4 * n);
    int64_t differ = 0, first = -1;
    for (size_t i = 0; i < n; ++i)
        if (ob[i] != bf16_host::from_float(inplace[i]) && differ++ == 0) first = (int64_t)i;
    const bool untouched = std::memcmp(xa.data(), x0.data(), 4 * n) == 0;
    const bool guards = g_in && x.guards_intact() && o.guards_intact();
    result(differ == 0 && untouched && guards,
           "fused %s %4dx%-4d shift %d fp32 -> bf16 out: %lld of %zu values differ from the in-place "
           "output rounded (first at %s), input map %s, guards %s",
           kernel_name(k).c_str(), W, H, shift, (long long)differ, n, where(first, W, C).c_str(), untouched ? "untouched" : "WRITTEN",
           guards ? "intact" : "WRITTEN");
}

void check_mma_count(const Kernel &k, int H, int W) {
    const Tile &t = k.t;
    const int C = t.C, heads = C / t.HD;
    swin_ref::RandomBlock rb(C, heads, 4, 900 + C);
    DevBlock B(rb);
    const std::vector<float> x0 = swin_ref::random_map((size_t)H * W * C, 901 + C);
    std::vector<float> plain, counted;
    bool g1 = false, g2 = false;
    unsigned long long mma = 0;
    run_fused(B, x0, H, W, 4, false, k, &plain, &g1, nullptr);
    run_fused(B, x0, H, W, 4, false, k, &counted, &g2, &mma);
    const SwinBlockDesc d = swin_block_desc(C, heads, t.TW, t.NW, t.QA, t.MA);
    const int64_t ctas = ((int64_t)(H / 8) * (W / 8) + t.TW - 1) / t.TW;
    const unsigned long long want = (unsigned long long)(d.mma_per_cta * ctas);
    const swin_ref::Error e = swin_ref::compare(counted.data(), plain.data(), x0.data(), (int64_t)x0.size());
    result(mma == want && e.nonfinite == 0 && e.rel_l2 < 1e-6,
           "mma count %s %dx%d: kernel issued %llu, descriptor %lld x %lld CTAs = %llu; instrumented vs "
           "plain output rel L2 %.1e",
           kernel_name(k).c_str(), W, H, mma, (long long)d.mma_per_cta, (long long)ctas, want, e.rel_l2);
}

// Every kernel built for (C, head dim) gives the engine's kernel's output bit for bit on an H x W
// map (fp32 stream, shifted: the masked windows and tile tails included).
void check_kernels_agree(int C, int HD, int H, int W, uint32_t seed) {
    const int heads = C / HD;
    swin_ref::RandomBlock rb(C, heads, 4, seed);
    DevBlock B(rb);
    const std::vector<float> x0 = swin_ref::random_map((size_t)H * W * C, seed + 1);
    const Kernel e = engine_kernel(C, heads);
    std::vector<float> ref;
    bool g = false;
    run_fused(B, x0, H, W, 4, false, e, &ref, &g, nullptr);
    for (const SwinFusedKernel &sk : swin_fused_kernels(C, heads)) {
        const Kernel k = kernel_of(sk);
        std::vector<float> out;
        bool gk = false;
        run_fused(B, x0, H, W, 4, false, k, &out, &gk, nullptr);
        int64_t differ = 0, first = -1;
        for (size_t i = 0; i < out.size(); ++i)
            if (std::memcmp(&out[i], &ref[i], 4) != 0 && differ++ == 0) first = (int64_t)i;
        result(differ == 0 && g && gk, "kernel %s vs the engine's (%s) %dx%d shift 4 fp32: %lld of %zu values differ (first at %s), guards %s",
               kernel_name(k).c_str(), kernel_name(e).c_str(), W, H, (long long)differ, out.size(), where(first, W, C).c_str(),
               g && gk ? "intact" : "WRITTEN");
    }
}

void check_refusals() {
    swin_ref::RandomBlock rb(64, 2, 0, 77);
    DevBlock B(rb);
    Dev x(4 * 16 * 16 * 64 + 16);
    fill(x.p, 0, x.bytes);
    struct Bad {
        const char *what;
        const uint8_t *img;
        int C, heads;
        void *x;
        int H, W, shift;
    } bad[] = {
        {"C 80 (no kernel built)", B.image, 80, 2, x.p, 16, 16, 0},
        {"64 channels / 3 heads", B.image, 64, 3, x.p, 16, 16, 0},
        {"64 channels / 4 heads (head dim 16 not built)", B.image, 64, 4, x.p, 16, 16, 0},
        {"H 12 (not a multiple of 8)", B.image, 64, 2, x.p, 12, 16, 0},
        {"shift 8", B.image, 64, 2, x.p, 16, 16, 8},
        {"null x", B.image, 64, 2, nullptr, 16, 16, 0},
        {"null image", nullptr, 64, 2, x.p, 16, 16, 0},
        {"x not 16-byte aligned", B.image, 64, 2, x.as<uint8_t>() + 4, 16, 16, 0},
    };
    Dev o(2 * 16 * 16 * 64 + 16);
    const struct {
        const char *what;
        void *out;
        bool bf16;
    } bad_out[] = {
        {"bf16_out with a bf16 residual stream", o.p, true},
        {"bf16_out not 16-byte aligned", o.as<uint8_t>() + 2, false},
    };
    for (const auto &b : bad_out) {
        SwinFusedParams q;
        q.bf16_out = static_cast<uint16_t *>(b.out);
        g_ctx.err.clear();
        const int rc = swin_block_fused(g_ctx, B.image, 64, 2, kEps, x.p, b.bf16, 16, 16, 0, &q);
        result(rc == DENOISE_EINVAL && !g_ctx.err.empty(), "refuses %s: rc %d, \"%s\"", b.what, rc, g_ctx.err.c_str());
    }
    for (const Bad &b : bad) {
        g_ctx.err.clear();
        const int rc = swin_block_fused(g_ctx, b.img, b.C, b.heads, kEps, b.x, false, b.H, b.W, b.shift);
        result(rc == DENOISE_EINVAL && !g_ctx.err.empty(), "refuses %s: rc %d, \"%s\"", b.what, rc, g_ctx.err.c_str());
    }
    SwinFusedParams p;
    p.tw = 2;
    p.nw = 8;
    g_ctx.err.clear();
    const int rc = swin_block_fused(g_ctx, B.image, 64, 2, kEps, x.p, false, 16, 16, 0, &p);
    result(rc == 0, "C 64 tile 2/8 (built) accepted: rc %d %s", rc, g_ctx.err.c_str());
    ck(cudaStreamSynchronize(g_ctx.stream), "fused kernel");
    SwinFusedParams q;
    q.tw = 1;
    q.nw = 4;
    q.ctas = 7;
    g_ctx.err.clear();
    int rq = swin_block_fused(g_ctx, B.image, 64, 2, kEps, x.p, false, 16, 16, 0, &q);
    result(rq == DENOISE_EINVAL && !g_ctx.err.empty(), "refuses C 64 tile 1/4 built for 7 CTAs (not built): rc %d, \"%s\"", rq,
           g_ctx.err.c_str());
    SwinFusedParams c;
    Dev cnt(8);
    c.mma_count = cnt.as<unsigned long long>();
    g_ctx.err.clear();
    rq = swin_block_fused(g_ctx, B.image, 64, 2, kEps, x.p, true, 16, 16, 0, &c);
    result(rq == DENOISE_EINVAL && !g_ctx.err.empty(), "refuses the instrumented kernel on a bf16 stream: rc %d, \"%s\"", rq,
           g_ctx.err.c_str());
}

// wper / tper: windows / tokens per chunk (0: the whole map in one chunk).
void check_unfused(int C, int H, int W, int shift, int wper, int64_t tper) {
    const int heads = C / 32, nwin = (H / 8) * (W / 8);
    const size_t n = (size_t)H * W * C;
    swin_ref::RandomBlock rb(C, heads, shift, 555 + C + wper);
    DevBlock B(rb);
    std::vector<float> x0 = swin_ref::random_map(n, 556 + C + wper), ref = x0, out(n);
    swin_ref::reference_block(rb.w, C, heads, ref.data(), H, W, kEps);
    Dev x(4 * n);
    upload(x, x0.data(), 4 * n);
    SeqWs ws(wper ? wper : nwin, tper ? tper : (int64_t)H * W, C);
    ok_or_die(unfused_block(B, x.as<float>(), H, W, shift, ws, nullptr), "correct-first sequence");
    d2h(out.data(), x.p, 4 * n);
    const swin_ref::Error e = swin_ref::compare(out.data(), ref.data(), x0.data(), (int64_t)n);
    char chunks[64];
    if (wper)
        std::snprintf(chunks, sizeof chunks, "chunks of %d windows / %lld tokens", wper, (long long)tper);
    else
        std::snprintf(chunks, sizeof chunks, "one chunk");
    result(swin_ref::passes(e),
           "correct-first op sequence C %d %dx%d shift %d %s vs CPU: rel L2 %.2e, change rel L2 %.2e, max abs %.2e, "
           "non-finite %lld, worst at %s",
           C, W, H, shift, chunks, e.rel_l2, e.delta_rel_l2, e.max_abs, (long long)e.nonfinite, where(e.worst, W, C).c_str());
}

// ---- patch merge / patch expand (kernels/cuda/patch_tc.cu), `fused_check --merge`: the fused
// kernels against a host double reference and against the op sequence they replace (Net::merge /
// Net::expand's correct-first path, here in chunks of `rows` rows like the engine's), then both
// timed side by side. Weights U(-1, 1) / sqrt(K), gamma U(0.5, 1.5), beta and biases U(-0.2, 0.2),
// maps U(-2, 2) + a per-token offset U(-1, 1), fresh per case. The host reference rounds where the
// kernel rounds (bf16 weights, the LN output / lo / the expand's result / the skip map) and sums
// in double; it is computed on every token of small maps and on every 7th token (all positions in
// a tile) of large ones. Pass: fused vs reference rel L2 < 2e-4 and max abs < 8e-3, fused vs the
// sequence rel L2 < 1e-3 and max abs < 1.5e-2 (the sequence adds the expand bias in bf16 and
// sums in another order: a few bf16 rounding flips), every output finite (the output starts
// poisoned with 0xFF bytes, NaN), the guard bands either side untouched, and (not in place) the
// inputs unchanged. --quick (the sanitizer runs): the small maps, fused vs reference only (the
// "vs sequence" figures then read 0).
namespace patchchk {

#define PC_TRY(x)            \
    do {                     \
        const int rc_ = (x); \
        if (rc_) return rc_; \
    } while (0)

constexpr double kRelRef = 2e-4, kAbsRef = 8e-3, kRelSeq = 1e-3, kAbsSeq = 1.5e-2;
bool g_seq = true;  // run and compare the op sequence too (not with --quick: the sanitizer runs)

double rb(double v) { return bf16_host::round((float)v); }

std::vector<float> uni(size_t n, float lo, float hi, std::mt19937 &rng) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}
std::vector<float> token_map(size_t tokens, int c, std::mt19937 &rng) {
    std::vector<float> v = uni(tokens * c, -2.f, 2.f, rng);
    std::uniform_real_distribution<float> off(-1.f, 1.f);
    for (size_t t = 0; t < tokens; ++t) {
        const float o = off(rng);
        for (int k = 0; k < c; ++k) v[t * c + k] += o;
    }
    return v;
}

Dev *put16(std::vector<Dev *> &keep, const std::vector<float> &v) {
    const std::vector<uint16_t> h = bf16_of(v.data(), v.size());
    Dev *d = new Dev(2 * h.size());
    upload(*d, h.data(), 2 * h.size());
    keep.push_back(d);
    return d;
}
Dev *put_bits(std::vector<Dev *> &keep, const std::vector<uint16_t> &h) {
    Dev *d = new Dev(2 * h.size());
    upload(*d, h.data(), 2 * h.size());
    keep.push_back(d);
    return d;
}
Dev *put32(std::vector<Dev *> &keep, const std::vector<float> &v) {
    Dev *d = new Dev(4 * v.size());
    upload(*d, v.data(), 4 * v.size());
    keep.push_back(d);
    return d;
}

struct MergeW {
    int C, Co;
    std::vector<float> W, g, b;
    std::vector<Dev *> keep;
    bf16 *w16;       // (Co, 4C) for linear
    float *g32, *b32;  // model order, for merge_s2d_layernorm
    bf16 *wp;          // packed
    float *gp, *bp;
    MergeW(int C_, int Co_, std::mt19937 &rng) : C(C_), Co(Co_) {
        const int K = 4 * C;
        W = uni((size_t)Co * K, -1.f / std::sqrt((float)K), 1.f / std::sqrt((float)K), rng);
        g = uni(K, 0.5f, 1.5f, rng);
        b = uni(K, -0.2f, 0.2f, rng);
        w16 = put16(keep, W)->as<bf16>();
        g32 = put32(keep, g)->as<float>();
        b32 = put32(keep, b)->as<float>();
        std::vector<uint16_t> p;
        std::vector<float> pg, pb;
        patch_tc::pack_merge(W.data(), C, Co, g.data(), b.data(), &p, &pg, &pb);
        wp = put_bits(keep, p)->as<bf16>();
        gp = put32(keep, pg)->as<float>();
        bp = put32(keep, pb)->as<float>();
    }
    ~MergeW() {
        for (Dev *d : keep) delete d;
    }
};

struct ExpandW {
    int C, C2, Cs, Co, Ck, Kz;  // Ck: the skip linear's K (the model's); Kz = Ck + Cs: the kernels' operand
    std::vector<float> We, be, Ws, bs;
    std::vector<Dev *> keep;
    bf16 *we16, *be16, *ws16;  // the sequence's: plain (C2, C), bf16 bias, (Co, Kz) = [Wu | Ws | Ws] as Net's
    float *bs32;
    bf16 *wep, *wsp;  // packed
    float *bep;
    // model.py's PatchExpand(C, Cs) (C -> 4 Cs, d2s to Cs) and skip linear 2 Cs -> Cs
    ExpandW(int C_, int Cs_, std::mt19937 &rng) : C(C_), C2(4 * Cs_), Cs(Cs_), Co(Cs_), Ck(2 * Cs_), Kz(Ck + Cs_) {
        We = uni((size_t)C2 * C, -1.f / std::sqrt((float)C), 1.f / std::sqrt((float)C), rng);
        be = uni(C2, -0.2f, 0.2f, rng);
        Ws = uni((size_t)Co * Ck, -1.f / std::sqrt((float)Ck), 1.f / std::sqrt((float)Ck), rng);
        bs = uni(Co, -0.2f, 0.2f, rng);
        we16 = put16(keep, We)->as<bf16>();
        be16 = put16(keep, be)->as<bf16>();
        std::vector<float> wz((size_t)Co * Kz);  // put_linear with dup = Cs
        for (int n = 0; n < Co; ++n)
            for (int k = 0; k < Kz; ++k) wz[(size_t)n * Kz + k] = Ws[(size_t)n * Ck + (k < Ck ? k : k - Cs)];
        ws16 = put16(keep, wz)->as<bf16>();
        bs32 = put32(keep, bs)->as<float>();
        std::vector<uint16_t> pe, ps;
        std::vector<float> pb;
        patch_tc::pack_expand(We.data(), be.data(), C, C2, Ws.data(), Ck, Co, &pe, &pb, &ps);
        wep = put_bits(keep, pe)->as<bf16>();
        bep = put32(keep, pb)->as<float>();
        wsp = put_bits(keep, ps)->as<bf16>();
    }
    ~ExpandW() {
        for (Dev *d : keep) delete d;
    }
};

// Net::merge's op sequence in chunks of `rows` output rows (a: (rows wo, 4C) bf16); ev (3
// events, may be null) brackets its two ops (one chunk only).
int seq_merge(const MergeW &m, const float *x, int H, int W, float *out, bf16 *a, int rows, cudaEvent_t *ev) {
    const int ho = H / 2, wo = W / 2, C4 = 4 * m.C;
    for (int r0 = 0; r0 < ho; r0 += rows) {
        const int r1 = std::min(ho, r0 + rows);
        if (ev) cudaEventRecord(ev[0], g_ctx.stream);
        PC_TRY(merge_s2d_layernorm(g_ctx, x + (size_t)2 * r0 * W * m.C, 2 * (r1 - r0), W, m.C, m.g32, m.b32, kEps, a));
        if (ev) cudaEventRecord(ev[1], g_ctx.stream);
        PC_TRY(linear(g_ctx, a, (int64_t)(r1 - r0) * wo, C4, C4, m.w16, nullptr, m.Co, out + (size_t)r0 * wo * m.Co, true,
                   m.Co, 0.f));
        if (ev) cudaEventRecord(ev[2], g_ctx.stream);
    }
    return 0;
}

// Net::expand's op sequence in chunks of `rows` low-res rows (a: max(rows w C, 4 rows w Kz) bf16,
// q: rows w C2 bf16); ev (5 events, may be null): cast, expand linear, d2s + concat, skip linear.
int seq_expand(const ExpandW &e, const float *lo, int h, int w, const float *skip, float *out, bf16 *a, bf16 *q, int rows,
               cudaEvent_t *ev) {
    const int W2 = 2 * w;
    for (int r0 = 0; r0 < h; r0 += rows) {
        const int r1 = std::min(h, r0 + rows);
        const int64_t nt = (int64_t)(r1 - r0) * w;
        if (ev) cudaEventRecord(ev[0], g_ctx.stream);
        PC_TRY(cast_to_bf16(g_ctx, lo + (size_t)r0 * w * e.C, nt * e.C, a));
        if (ev) cudaEventRecord(ev[1], g_ctx.stream);
        PC_TRY(linear(g_ctx, a, nt, e.C, e.C, e.we16, e.be16, e.C2, q, false, e.C2, 0.f));
        if (ev) cudaEventRecord(ev[2], g_ctx.stream);
        PC_TRY(d2s_concat(g_ctx, q, r1 - r0, w, e.C2, skip + (size_t)2 * r0 * W2 * e.Cs, e.Cs, a));
        if (ev) cudaEventRecord(ev[3], g_ctx.stream);
        PC_TRY(linear(g_ctx, a, 4 * nt, e.Kz, e.Kz, e.ws16, e.bs32, e.Co, out + (size_t)2 * r0 * W2 * e.Co, true, e.Co, 0.f));
        if (ev) cudaEventRecord(ev[4], g_ctx.stream);
    }
    return 0;
}

// the sampled tokens of an n-token output: all when n <= 20000, else every 7th
int64_t stride_of(int64_t n) { return n <= 20000 ? 1 : 7; }

struct Cmp {
    double rel = 0, max_abs = 0;
    int64_t nonfinite = 0, first_bad = -1;
};
// out vs ref over the tokens ref covers (ref[i] for token i * stride), C channels
Cmp compare_tokens(const std::vector<float> &out, const std::vector<double> &ref, int C, int64_t stride) {
    Cmp c;
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const float o = out[(size_t)((int64_t)(i / C) * stride) * C + i % C];
        if (!std::isfinite(o)) {
            if (!c.nonfinite++) c.first_bad = (int64_t)(i / C) * stride;
            continue;
        }
        const double d = o - ref[i];
        d2 += d * d;
        r2 += ref[i] * ref[i];
        c.max_abs = std::max(c.max_abs, std::fabs(d));
    }
    c.rel = std::sqrt(d2 / std::max(r2, 1e-300));
    return c;
}
Cmp compare_all(const std::vector<float> &a, const std::vector<float> &b) {
    Cmp c;
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
            if (!c.nonfinite++) c.first_bad = (int64_t)i;
            continue;
        }
        const double d = (double)a[i] - b[i];
        d2 += d * d;
        r2 += (double)b[i] * b[i];
        c.max_abs = std::max(c.max_abs, std::fabs(d));
    }
    c.rel = std::sqrt(d2 / std::max(r2, 1e-300));
    return c;
}

void check_merge(int C, int Co_, int H, int W, int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    MergeW m(C, Co_, rng);
    const int K = 4 * C, ho = H / 2, wo = W / 2, Co = m.Co;
    const int64_t nt = (int64_t)ho * wo, stride = stride_of(nt);
    const std::vector<float> x = token_map((size_t)H * W, C, rng);
    Dev xd(4 * x.size());
    upload(xd, x.data(), 4 * x.size());
    GuardedMap of((size_t)nt * Co * 4), os((size_t)nt * Co * 4);
    Dev a(2 * (size_t)std::min(rows, ho) * wo * K);
    ok_or_die(patch_merge_tc(g_ctx, xd.as<float>(), H, W, C, m.wp, m.gp, m.bp, Co, kEps, (float *)of.map()), "patch_merge_tc");
    if (g_seq) ok_or_die(seq_merge(m, xd.as<float>(), H, W, (float *)os.map(), a.as<bf16>(), rows, nullptr), "merge op sequence");
    ck(cudaStreamSynchronize(g_ctx.stream), "patch merge");
    std::vector<float> f((size_t)nt * Co), s((size_t)nt * Co), x2(x.size());
    d2h(f.data(), of.map(), 4 * f.size());
    d2h(s.data(), os.map(), 4 * s.size());
    d2h(x2.data(), xd.p, 4 * x2.size());
    // reference on the sampled tokens
    std::vector<double> ref, y(K), wr((size_t)Co * K);
    for (size_t i = 0; i < wr.size(); ++i) wr[i] = rb(m.W[i]);
    for (int64_t t = 0; t < nt; t += stride) {
        const int yo = (int)(t / wo), xo = (int)(t % wo);
        double sum = 0, q = 0;
        for (int k = 0; k < K; ++k) {
            y[k] = x[((size_t)(2 * yo + ((k >> 1) & 1)) * W + 2 * xo + (k & 1)) * C + k / 4];
            sum += y[k];
        }
        const double mean = sum / K;
        for (int k = 0; k < K; ++k) q += (y[k] - mean) * (y[k] - mean);
        const double rstd = 1.0 / std::sqrt(q / K + kEps);
        for (int k = 0; k < K; ++k) y[k] = rb((y[k] - mean) * rstd * m.g[k] + m.b[k]);
        for (int n = 0; n < Co; ++n) {
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += y[k] * wr[(size_t)n * K + k];
            ref.push_back(acc);
        }
    }
    const Cmp r = compare_tokens(f, ref, Co, stride), q = g_seq ? compare_all(f, s) : Cmp();
    const bool guards = of.guards_intact() && os.guards_intact(), same_in = std::memcmp(x.data(), x2.data(), 4 * x.size()) == 0;
    const bool ok = r.nonfinite == 0 && q.nonfinite == 0 && r.rel < kRelRef && r.max_abs < kAbsRef && q.rel < kRelSeq &&
                    q.max_abs < kAbsSeq && guards && same_in;
    result(ok,
           "patch merge fused C %3d -> %3d %4dx%-4d (%lld tokens, sequence in chunks of %d rows): vs reference (every %lld. "
           "token) rel L2 %.2e max abs %.2e | vs sequence rel L2 %.2e max abs %.2e | non-finite %lld (first at token %lld) "
           "| guards %s, input %s",
           C, Co, W, H, (long long)nt, std::min(rows, ho), (long long)stride, r.rel, r.max_abs, q.rel, q.max_abs,
           (long long)(r.nonfinite + q.nonfinite), (long long)(r.nonfinite ? r.first_bad : q.first_bad / Co),
           guards ? "intact" : "WRITTEN", same_in ? "unchanged" : "CHANGED");
}

void check_expand(int C, int Cs_, int h, int w, bool in_place, int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    ExpandW e(C, Cs_, rng);
    const int Cu = e.C2 / 4, Cs = e.Cs, Co = e.Co, Ck = e.Ck, W2 = 2 * w;
    const int64_t nlo = (int64_t)h * w, nhi = 4 * nlo, stride = stride_of(nhi);
    const std::vector<float> lo = token_map((size_t)nlo, C, rng), skip = token_map((size_t)nhi, Cs, rng);
    Dev lod(4 * lo.size());
    upload(lod, lo.data(), 4 * lo.size());
    // fused: out in its own poisoned map, or over a copy of skip (in place, as the engine runs it)
    GuardedMap of((size_t)nhi * Co * 4), os((size_t)nhi * Co * 4), sk((size_t)nhi * Cs * 4);
    h2d(sk.map(), skip.data(), 4 * skip.size());
    float *fout = (float *)of.map();
    if (in_place) h2d(fout, skip.data(), 4 * skip.size());
    const int rr = std::min(rows, h);
    Dev a(2 * (size_t)std::max<int64_t>((int64_t)rr * w * C, (int64_t)4 * rr * w * e.Kz)), q(2 * (size_t)rr * w * e.C2);
    ok_or_die(patch_expand_tc(g_ctx, lod.as<float>(), h, w, C, e.wep, e.bep, e.C2, in_place ? fout : (float *)sk.map(), Cs,
                              e.wsp, e.bs32, Co, fout),
              "patch_expand_tc");
    if (g_seq)
        ok_or_die(seq_expand(e, lod.as<float>(), h, w, (const float *)sk.map(), (float *)os.map(), a.as<bf16>(), q.as<bf16>(),
                             rows, nullptr),
                  "expand op sequence");
    ck(cudaStreamSynchronize(g_ctx.stream), "patch expand");
    std::vector<float> f((size_t)nhi * Co), s((size_t)nhi * Co), sk2(skip.size()), lo2(lo.size());
    d2h(f.data(), fout, 4 * f.size());
    d2h(s.data(), os.map(), 4 * s.size());
    d2h(sk2.data(), sk.map(), 4 * sk2.size());
    d2h(lo2.data(), lod.p, 4 * lo2.size());
    // reference on the sampled output tokens: o = (2y + dy) W2 + 2x + dx
    std::vector<double> ref, wer((size_t)e.C2 * C), wsr((size_t)Co * Ck), z(Ck);
    for (size_t i = 0; i < wer.size(); ++i) wer[i] = rb(e.We[i]);
    for (size_t i = 0; i < wsr.size(); ++i) wsr[i] = rb(e.Ws[i]);
    for (int64_t o = 0; o < nhi; o += stride) {
        const int Y = (int)(o / W2), X = (int)(o % W2), j = (Y & 1) * 2 + (X & 1);
        const int64_t t = (int64_t)(Y / 2) * w + X / 2;
        for (int c = 0; c < Cu; ++c) {
            const int u = c * 4 + j;
            double acc = e.be[u];
            for (int k = 0; k < C; ++k) acc += rb(lo[(size_t)t * C + k]) * wer[(size_t)u * C + k];
            z[c] = rb(acc);
        }
        for (int c = 0; c < Cs; ++c) z[Cu + c] = skip[(size_t)o * Cs + c];  // hi + lo: s to ~2^-17
        for (int n = 0; n < Co; ++n) {
            double acc = e.bs[n];
            for (int k = 0; k < Ck; ++k) acc += z[k] * wsr[(size_t)n * Ck + k];
            ref.push_back(acc);
        }
    }
    const Cmp r = compare_tokens(f, ref, Co, stride), qq = g_seq ? compare_all(f, s) : Cmp();
    const bool guards = of.guards_intact() && os.guards_intact() && sk.guards_intact();
    const bool same_in = std::memcmp(lo.data(), lo2.data(), 4 * lo.size()) == 0 &&
                         std::memcmp(skip.data(), sk2.data(), 4 * skip.size()) == 0;
    const bool ok = r.nonfinite == 0 && qq.nonfinite == 0 && r.rel < kRelRef && r.max_abs < kAbsRef && qq.rel < kRelSeq &&
                    qq.max_abs < kAbsSeq && guards && same_in;
    result(ok,
           "patch expand fused C %3d -> %3d + skip %3d -> %3d low-res %4dx%-4d%s (sequence in chunks of %d rows): vs "
           "reference (every %lld. token) rel L2 %.2e max abs %.2e | vs sequence rel L2 %.2e max abs %.2e | non-finite %lld "
           "(first at token %lld) | guards %s, inputs %s",
           C, e.C2, Ck, Co, w, h, in_place ? " in place" : "", rr, (long long)stride, r.rel, r.max_abs, qq.rel, qq.max_abs,
           (long long)(r.nonfinite + qq.nonfinite), (long long)(r.nonfinite ? r.first_bad : qq.first_bad / Co),
           guards ? "intact" : "WRITTEN", same_in ? "unchanged" : "CHANGED");
}

void check_refusals() {
    std::mt19937 rng(5);
    MergeW m(32, 64, rng);
    ExpandW e(64, 32, rng);
    Dev x(4 * 64 * 64 * 64 + 64), o(4 * 64 * 64 * 64 + 64);
    fill(x.p, 0, x.bytes);
    float *xp = x.as<float>(), *op = o.as<float>();
    struct Bad {
        const char *what;
        int rc;
    } bad[] = {
        {"merge C 48", patch_merge_tc(g_ctx, xp, 8, 8, 48, m.wp, m.gp, m.bp, 96, kEps, op)},
        {"merge Co 40", patch_merge_tc(g_ctx, xp, 8, 8, 32, m.wp, m.gp, m.bp, 40, kEps, op)},
        {"merge odd map 8x7", patch_merge_tc(g_ctx, xp, 7, 8, 32, m.wp, m.gp, m.bp, 64, kEps, op)},
        {"merge x not 16-byte aligned", patch_merge_tc(g_ctx, xp + 1, 8, 8, 32, m.wp, m.gp, m.bp, 64, kEps, op)},
        {"merge null weight", patch_merge_tc(g_ctx, xp, 8, 8, 32, nullptr, m.gp, m.bp, 64, kEps, op)},
        {"expand C2 96", patch_expand_tc(g_ctx, xp, 4, 4, 64, e.wep, e.bep, 96, op, 32, e.wsp, e.bs32, 32, op)},
        {"expand in place with Co != Cs", patch_expand_tc(g_ctx, xp, 4, 4, 64, e.wep, e.bep, 128, op, 32, e.wsp, e.bs32, 48, op)},
        {"expand skip not 16-byte aligned",
         patch_expand_tc(g_ctx, xp, 4, 4, 64, e.wep, e.bep, 128, op + 2, 32, e.wsp, e.bs32, 32, op)},
    };
    for (const Bad &b : bad) result(b.rc == DENOISE_EINVAL, "refuses %s: rc %d", b.what, b.rc);
    g_ctx.err.clear();
}


// `fused_check --merge [--quick]`: the checks
void run(bool quick) {
    uint32_t seed = 7000;
    g_seq = !quick;
    // model v1's merges (C 32 -> 64 at the level-0 grid, C 64 -> 128 at level 1) and a deeper
    // model's C 128; wide64's (64 -> 64 at level 0, 64 -> 128 at level 1 as v1's): small maps with
    // tile tails that wrap output rows, the sequence in chunks of a few rows
    check_merge(32, 64, 34, 46, 3, seed++);
    check_merge(32, 64, 2, 2, 1, seed++);
    check_merge(64, 128, 18, 30, 2, seed++);
    check_merge(128, 256, 10, 14, 1, seed++);
    check_merge(256, 512, 6, 10, 2, seed++);
    check_merge(64, 64, 34, 46, 3, seed++);
    // v1's expands (128 -> 4 x 64 + 64, 64 -> 4 x 32 + 32), wide64's (128 -> 4 x 64 as v1's, 64 ->
    // 4 x 64 + 64), in place as the engine runs them and not
    check_expand(128, 64, 9, 15, true, 2, seed++);
    check_expand(128, 64, 9, 15, false, 4, seed++);
    check_expand(64, 32, 17, 23, true, 3, seed++);
    check_expand(64, 32, 1, 1, false, 1, seed++);
    check_expand(256, 128, 5, 7, true, 2, seed++);
    check_expand(64, 64, 17, 23, true, 3, seed++);
    check_expand(64, 64, 9, 15, false, 2, seed++);
    check_refusals();
    if (!quick) {
        // 1080p token grids (1920x1088 frame), the engine's chunk rows for the sequence
        check_merge(32, 64, 544, 960, 136, seed++);
        check_merge(64, 128, 272, 480, 68, seed++);
        check_merge(128, 256, 136, 240, 1000, seed++);
        check_merge(64, 64, 544, 960, 136, seed++);
        check_expand(128, 64, 68, 120, true, 17, seed++);
        check_expand(64, 32, 136, 240, true, 34, seed++);
        check_expand(64, 32, 136, 240, false, 1000, seed++);
        check_expand(256, 128, 34, 60, true, 1000, seed++);
        check_expand(64, 64, 136, 240, true, 34, seed++);
    }
}

#undef PC_TRY
}  // namespace patchchk

// ---- the head: head_conv3d_tc (kernels/cuda/head_tc.cu, one tensor-core kernel) against the
// two-pass head (three cuBLASLt GEMMs into G + head_stencil, in bands of rows as Net::head runs
// them) and against the CPU engine's fp32 head (kernels/cpu/head.cpp), on fresh random inputs:
// F ~ U(-1, 1), weights ~ U(-0.1, 0.1), bias ~ U(-0.1, 0.1), residual ~ U(-1.3, 1.3) (the clamp
// and its widening both act), all bf16-exact so that the three differ only in fp32 summation.
struct HeadCase {
    int h, w, Cout, Cin;
    std::vector<float> F[3], W, bias, res;  // W: PyTorch's (Cout, Cin, 3, 3, 3)
    std::vector<uint16_t> Fb[3], resb;
    HeadCase(int h_, int w_, int Cout_, uint32_t seed, int Cin_ = 32) : h(h_), w(w_), Cout(Cout_), Cin(Cin_) {
        auto uni = [&](size_t n, float lo, float hi, uint32_t s) {
            std::mt19937 rng(s);
            std::uniform_real_distribution<float> u(lo, hi);
            std::vector<float> v(n);
            for (float &x : v) x = bf16_host::round(u(rng));
            return v;
        };
        for (int dt = 0; dt < 3; ++dt) {
            F[dt] = uni((size_t)h * w * Cin, -1.f, 1.f, seed + dt);
            Fb[dt] = bf16_of(F[dt].data(), F[dt].size());
        }
        W = uni((size_t)Cout * Cin * 27, -0.1f, 0.1f, seed + 3);
        bias = uni(Cout, -0.1f, 0.1f, seed + 4);
        res = uni((size_t)h * w * Cout, -1.3f, 1.3f, seed + 5);
        resb = bf16_of(res.data(), res.size());
    }
};

// The two-pass head's weights (Net::upload's layout): per time tap (Gc, Cin) bf16, row (ky*3 +
// kx)*Cout + o, rows 9 Cout .. Gc-1 zero.
int head_gc(int Cout) { return (9 * Cout + 15) / 16 * 16; }
std::vector<uint16_t> two_pass_weights(const HeadCase &c, int dt) {
    const int Gc = head_gc(c.Cout), Cin = c.Cin;
    std::vector<float> m((size_t)Gc * Cin, 0.f);
    for (int o = 0; o < c.Cout; ++o)
        for (int ci = 0; ci < Cin; ++ci)
            for (int t = 0; t < 9; ++t)
                m[((size_t)t * c.Cout + o) * Cin + ci] = c.W[(((size_t)o * Cin + ci) * 3 + dt) * 9 + t];
    return bf16_of(m.data(), m.size());
}

struct DevHead {
    Dev F0, F1, F2, wtc, w0, w1, w2, bias, res, G;
    int Gc, band;
    DevHead(const HeadCase &c, int band_)
        : F0(2 * c.Fb[0].size()), F1(2 * c.Fb[1].size()), F2(2 * c.Fb[2].size()), wtc(2 * 9 * 16 * 3 * (size_t)c.Cin),
          w0(2 * (size_t)head_gc(c.Cout) * c.Cin), w1(w0.bytes), w2(w0.bytes), bias(4 * c.Cout), res(2 * c.resb.size()),
          G(4 * (size_t)(std::min(band_, c.h) + 2) * c.w * head_gc(c.Cout)), Gc(head_gc(c.Cout)), band(band_) {
        upload(F0, c.Fb[0].data(), F0.bytes);
        upload(F1, c.Fb[1].data(), F1.bytes);
        upload(F2, c.Fb[2].data(), F2.bytes);
        std::vector<uint16_t> wk((size_t)9 * 16 * 3 * c.Cin);
        if (!head_conv3d_tc_pack(c.W.data(), c.Cout, c.Cin, wk.data()))
            fatal("head_conv3d_tc_pack refused Cin " + std::to_string(c.Cin) + " Cout " + std::to_string(c.Cout));
        upload(wtc, wk.data(), wtc.bytes);
        Dev *wt[3] = {&w0, &w1, &w2};
        for (int dt = 0; dt < 3; ++dt) {
            const std::vector<uint16_t> m = two_pass_weights(c, dt);
            upload(*wt[dt], m.data(), wt[dt]->bytes);
        }
        upload(bias, c.bias.data(), bias.bytes);
        upload(res, c.resb.data(), res.bytes);
    }
    const bf16 *F(int dt) const { return (dt == 0 ? F0 : dt == 1 ? F1 : F2).as<bf16>(); }
    int tc(const HeadCase &c, float *out, bool as_change) const {
        const bf16 *Fp[3] = {F(0), F(1), F(2)};
        return head_conv3d_tc(g_ctx, Fp, c.h, c.w, c.Cin, wtc.as<bf16>(), bias.as<float>(), c.Cout, res.as<bf16>(), out,
                              as_change);
    }
    // Net::head's two-pass loop; parts: 1 the GEMMs only, 2 the stencil only, 3 both
    int two_pass(const HeadCase &c, float *out, bool as_change, int parts = 3) const {
        const bf16 *wt[3] = {w0.as<bf16>(), w1.as<bf16>(), w2.as<bf16>()};
        int rc;
        for (int r0 = 0; r0 < c.h; r0 += band) {
            const int r1 = std::min(c.h, r0 + band), g0 = std::max(0, r0 - 1), g1 = std::min(c.h, r1 + 1);
            const int64_t ng = (int64_t)(g1 - g0) * c.w;
            if (parts & 1)
                for (int dt = 0; dt < 3; ++dt)
                    if ((rc = linear(g_ctx, F(dt) + (size_t)g0 * c.w * c.Cin, ng, c.Cin, c.Cin, wt[dt], nullptr, Gc, G.p, true,
                                     Gc, dt ? 1.f : 0.f)))
                        return rc;
            if (parts & 2)
                if ((rc = head_stencil(g_ctx, G.as<float>(), Gc, g0, c.h, c.w, r0, r1, bias.as<float>(), c.Cout,
                                       res.as<bf16>(), out, as_change)))
                    return rc;
        }
        return 0;
    }
};

struct Diff {
    double rel = 0, max_abs = 0;
    int64_t nonfinite = 0, first_bad = -1;
};
Diff diff(const std::vector<float> &a, const std::vector<float> &ref) {
    Diff d;
    double n2 = 0, r2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i])) {
            if (!d.nonfinite++) d.first_bad = (int64_t)i;
            continue;
        }
        const double e = (double)a[i] - ref[i];
        n2 += e * e;
        r2 += (double)ref[i] * ref[i];
        d.max_abs = std::max(d.max_abs, std::fabs(e));
    }
    d.rel = r2 > 0 ? std::sqrt(n2 / r2) : std::sqrt(n2);
    return d;
}

constexpr double kHeadRel = 1e-5, kHeadAbs = 1e-4;  // fp32 summation order only (outputs O(1))

void check_head(int h, int w, int Cout, bool as_change, int band, uint32_t seed, int Cin = 32) {
    const HeadCase c(h, w, Cout, seed, Cin);
    const DevHead d(c, band);
    const size_t n = (size_t)h * w * Cout;
    // the CPU engine's head (fp32) on the same bf16-exact values
    std::vector<float> ref(n), work(cpu::head_work_floats(h, w, Cout)), wt((size_t)3 * Cin * 9 * Cout);
    cpu::head_pack(c.W.data(), Cout, Cin, wt.data());
    const float *Fp[3] = {c.F[0].data(), c.F[1].data(), c.F[2].data()};
    cpu::head_conv3d(Fp, h, w, Cin, wt.data(), c.bias.data(), Cout, c.res.data(), ref.data(), work.data());
    int64_t clamped = 0;
    for (size_t i = 0; i < n; ++i) {
        if (ref[i] == std::max(1.f, c.res[i]) || ref[i] == std::min(-1.f, c.res[i])) ++clamped;  // at a bound
        if (as_change) ref[i] = 0.5f * (ref[i] - c.res[i]);
    }
    std::vector<float> out[2];
    bool guards[2];
    for (int k = 0; k < 2; ++k) {
        GuardedMap m(4 * n);  // poisoned (0xFF: NaN) output between two guard bands
        ok_or_die(k ? d.two_pass(c, (float *)m.map(), as_change) : d.tc(c, (float *)m.map(), as_change),
                  k ? "two-pass head" : "head_conv3d_tc");
        ck(cudaStreamSynchronize(g_ctx.stream), k ? "two-pass head" : "head_conv3d_tc");
        out[k].resize(n);
        d2h(out[k].data(), m.map(), 4 * n);
        guards[k] = m.guards_intact();
    }
    const Diff e_tc = diff(out[0], ref), e_2p = diff(out[1], ref), e_x = diff(out[0], out[1]);
    auto ok = [](const Diff &e) { return e.nonfinite == 0 && e.rel < kHeadRel && e.max_abs < kHeadAbs; };
    const bool pass = ok(e_tc) && ok(e_2p) && ok(e_x) && guards[0] && guards[1] && (n < 1000 || clamped > 0);
    std::string detail;
    if (!pass) {
        char b[200];
        std::snprintf(b, sizeof b, "; first non-finite: tensor-core at %s, two-pass at %s",
                      where(e_tc.first_bad, w, Cout).c_str(), where(e_2p.first_bad, w, Cout).c_str());
        detail = b;
    }
    result(pass,
           "head %4dx%-4d Cin %2d Cout %2d %s bands of %d rows: tensor-core vs CPU rel L2 %.2e max abs %.2e; two-pass vs CPU "
           "%.2e / %.2e; tensor-core vs two-pass %.2e / %.2e (each < %.0e / %.0e); non-finite %lld / %lld; clamped %lld "
           "of %zu; guards %s / %s%s",
           w, h, Cin, Cout, as_change ? "change" : "output", band, e_tc.rel, e_tc.max_abs, e_2p.rel, e_2p.max_abs, e_x.rel,
           e_x.max_abs, kHeadRel, kHeadAbs, (long long)e_tc.nonfinite, (long long)e_2p.nonfinite, (long long)clamped, n,
           guards[0] ? "intact" : "WRITTEN", guards[1] ? "intact" : "WRITTEN", detail.c_str());
}

void check_head_refusals() {
    const HeadCase c(16, 16, 12, 4242);
    const DevHead d(c, 16);
    Dev out(4 * 16 * 16 * 16);
    const bf16 *Fp[3] = {d.F(0), d.F(1), d.F(2)};
    const bf16 *Fmis[3] = {d.F(0), d.F(1) + 4, d.F(2)};  // 8 bytes off
    const struct {
        const char *what;
        const bf16 *const *F;
        int h, w, Cin, Cout;
        const bf16 *wk;
    } bad[] = {
        {"Cout 17", Fp, 16, 16, 32, 17, d.wtc.as<bf16>()},
        {"Cout 0", Fp, 16, 16, 32, 0, d.wtc.as<bf16>()},
        {"Cin 96", Fp, 16, 16, 96, 12, d.wtc.as<bf16>()},
        {"h 0 (empty map)", Fp, 0, 16, 32, 12, d.wtc.as<bf16>()},
        {"feature map 1 not 16-byte aligned", Fmis, 16, 16, 32, 12, d.wtc.as<bf16>()},
        {"null weights", Fp, 16, 16, 32, 12, nullptr},
    };
    for (const auto &b : bad) {
        g_ctx.err.clear();
        const int rc = head_conv3d_tc(g_ctx, b.F, b.h, b.w, b.Cin, b.wk, d.bias.as<float>(), b.Cout, d.res.as<bf16>(),
                                      out.as<float>(), false);
        result(rc == DENOISE_EINVAL && !g_ctx.err.empty(), "head_conv3d_tc refuses %s: rc %d, \"%s\"", b.what, rc,
               g_ctx.err.c_str());
    }
    for (int Cin : {32, 64}) {
        std::string why;
        const int rc = head_conv3d_tc_supported(g_ctx.device, Cin, &why);
        result(rc == 0, "head_conv3d_tc_supported on this device, Cin %d: rc %d (needs %zu B of shared memory per block) %s",
               Cin, rc, head_conv3d_tc_smem(Cin), why.c_str());
    }
    std::string why;
    const int rc = head_conv3d_tc_supported(g_ctx.device, 96, &why);
    result(rc == DENOISE_EINVAL && !why.empty(), "head_conv3d_tc_supported refuses Cin 96: rc %d, \"%s\"", rc, why.c_str());
}

void head_checks(bool quick) {
    check_head(1, 1, 12, false, 7, 501);    // every tap but the centre outside the map
    check_head(2, 19, 12, true, 1, 502);    // every token an edge token; a band per row
    check_head(37, 21, 12, false, 7, 503);  // tails in both directions; band edges inside tiles
    check_head(17, 33, 7, true, 5, 504);    // odd Cout, one-token tails
    check_head(18, 17, 16, false, 64, 505); // Cout 16 (no N padding); one band
    check_head(19, 9, 4, true, 3, 506);     // gray (4 channels)
    // wide64's head (64 feature channels: three K passes in the tensor-core kernel)
    check_head(37, 21, 12, false, 7, 511, 64);
    check_head(2, 19, 12, true, 1, 512, 64);
    check_head(18, 17, 16, false, 64, 513, 64);
    if (!quick) {
        check_head(135, 241, 12, true, 7, 507);  // odd width and height, many tiles and bands
        const int band = (int)std::max<int64_t>(1, ((int64_t)32 << 20) / ((int64_t)960 * 112 * 4) - 2);
        check_head(544, 960, 12, true, band, 508);   // a 1080p frame's token map, the backend's bands
        check_head(544, 960, 12, false, band, 509);
        check_head(135, 241, 12, false, 7, 514, 64);
        check_head(544, 960, 12, true, band, 515, 64);
    }
    check_head_refusals();
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false, merge = false, head_only = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick"))
            quick = true;
        else if (!std::strcmp(argv[i], "--merge"))
            merge = true;
        else if (!std::strcmp(argv[i], "--head"))
            head_only = true;
        else {
            std::fprintf(stderr, "usage: %s [--quick] [--merge] [--head]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        std::printf("SKIP fused_check: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        return 77;
    }
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("device: %s, sm_%d%d, %d SMs, %.0f MB L2, %zu KB shared memory per block (opt-in)\n", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, prop.sharedMemPerBlockOptin / 1024);
    ok_or_die(ctx_create(g_ctx, 0, true), "ctx_create");
    if (merge || head_only) {
        if (merge) patchchk::run(quick);
        if (head_only) head_checks(quick);
        const int rc = check_tally::summary();
        ctx_destroy(g_ctx);
        return rc;
    }

    // 1. against the CPU reference
    uint32_t seed = 1;
    // --quick (the sanitizer runs): the other builds of a tile plan (CTAS, PF) only in the fp32 form
    for (const Kernel &k : swin_ref::instantiated_kernels()) {
        const bool two = k.t.TW == 2, plain = k.CTAS == 0 && k.PF == 0;
        check_vs_cpu(k, 8, 8, 4, false, seed += 10);  // one window: all four regions meet in it
        if (!quick || plain) {
            check_vs_cpu(k, 16, 24, 4, true, seed += 10);
            check_bf16_out(k, 16, 24, 4, seed += 10);
        }
        if (!quick) {
            check_vs_cpu(k, 16, 24, 0, false, seed += 10);
            check_vs_cpu(k, two ? 24 : 8, two ? 40 : 24, 4, false, seed += 10);  // odd window count
            check_vs_cpu(k, 40, 56, 4, true, seed += 10);
            check_vs_cpu(k, 40, 56, 0, false, seed += 10);
        }
    }
    if (!quick) {
        // model v1's widths on their 1080p token grids (1920x1088 padded frame), default tiles
        const struct {
            int C, H, W;
        } v1[] = {{32, 544, 960}, {64, 272, 480}, {128, 136, 240}};
        for (const auto &s : v1)
            for (int sh : {0, 4})
                for (bool bf : {false, true}) check_vs_cpu(engine_kernel(s.C, s.C / 32), s.H, s.W, sh, bf, seed += 10);
        // the other widths on the 1080p grid of a level a wider model would put them at (C 64 at
        // level 0: wide64's)
        const struct {
            int C, HD, H, W;
        } wide[] = {{48, 48, 544, 960}, {64, 32, 544, 960}, {96, 32, 272, 480}, {192, 32, 136, 240}, {256, 32, 136, 240}};
        for (const auto &s : wide) {
            check_vs_cpu(engine_kernel(s.C, s.C / s.HD), s.H, s.W, 4, false, seed += 10);
            check_vs_cpu(engine_kernel(s.C, s.C / s.HD), s.H, s.W, 0, true, seed += 10);
        }
    }
    // 2. mma count (--quick: once per instrumented kernel, i.e. per tile plan and pf); every kernel
    // of a width that has several against the engine's, bit for bit (a 1080p level-1 grid: several
    // waves of CTAs; small maps with --quick)
    std::vector<std::string> counted;
    for (const Kernel &k : swin_ref::instantiated_kernels()) {
        const std::string plan = kernel_name(Kernel{k.t, k.PF, 1});
        if (quick && std::find(counted.begin(), counted.end(), plan) != counted.end()) continue;
        counted.push_back(plan);
        check_mma_count(k, 24, 40);
    }
    for (const auto &w : {std::pair<int, int>{32, 32}, {48, 48}, {64, 32}, {96, 32}, {128, 32}, {192, 32}, {256, 32}})
        if (swin_fused_kernels(w.first, w.first / w.second).size() > 1)
            check_kernels_agree(w.first, w.second, quick ? 16 : 272, quick ? 24 : 480, 700 + w.first);
    // 3. refusals
    check_refusals();
    // 5. the head (tensor-core vs two-pass vs CPU)
    head_checks(quick);
    if (quick) {
        return check_tally::summary();
    }
    // 4. the sequence the timings compare against, whole and in Net::block's chunks
    check_unfused(32, 16, 24, 4, 0, 0);
    check_unfused(32, 16, 24, 4, 2, 100);
    check_unfused(128, 16, 24, 4, 0, 0);
    check_unfused(128, 16, 24, 4, 2, 100);
    check_unfused(64, 24, 40, 0, 4, 256);
    const int rc = check_tally::summary();
    ctx_destroy(g_ctx);
    return rc;
}
