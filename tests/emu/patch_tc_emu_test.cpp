// The fused patch merge / patch expand (kernels/cuda/patch_tc.cu) run on the CPU through the warp
// emulator (tests/emu/warp_emu.h: the same kernel source, its mma/ldmatrix/barrier as rendezvous of
// fibers) against double-precision references. No GPU needed: this checks the kernels' index math
// (s2d gather and the k' permutation folded into the packed weights, LayerNorm, fragment layouts,
// the d2s in shared memory, the concat, tile tails that wrap map rows, in-place expand).
//
// Each case draws fresh inputs: x = per-token offset U(-1, 1) + U(-2, 2) (LayerNorm sees a
// non-zero mean), weights U(-1, 1) / sqrt(K) (outputs O(1)), gamma U(0.5, 1.5), beta and biases
// U(-0.2, 0.2). Two references, both in double:
//  - "matched": the kernel's rounding points (bf16 weights; the LN output, lo and the expand's
//    result rounded to bf16 where the kernel rounds them; the skip map not rounded: the kernel
//    takes it as two bf16 parts, exact to about 2^-17, so a kernel that dropped the low part would
//    miss the tolerance by an order of magnitude), so the kernel differs only by fp32 arithmetic
//    (and the rare bf16 rounding flip it causes): rel L2 < 1e-4, max abs < 4e-3;
//  - "exact": fp32 weights, nothing rounded (the model's math): rel L2 < 1e-2 (bf16 operands).
// Shared memory is poisoned with 0xFF bytes (NaN) before every CTA, the output with NaN and
// guard bands of 64 floats either side that must stay untouched; every output must be finite.
#define DENOISE_WARP_EMULATION 1
#include "tc_emu_util.h"

#include "cuda/patch_tc.cu"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

using namespace denoise::cuda;

namespace {

constexpr float kEps = 1e-5f;
constexpr size_t kGuard = 64;

double rb(double v) { return bf16_host::round((float)v); }

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937 &rng) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

// A map with per-token offsets (h w tokens of c channels).
std::vector<float> token_map(size_t tokens, int c, std::mt19937 &rng) {
    std::vector<float> v = uniform(tokens * c, -2.f, 2.f, rng);
    std::uniform_real_distribution<float> off(-1.f, 1.f);
    for (size_t t = 0; t < tokens; ++t) {
        const float o = off(rng);
        for (int k = 0; k < c; ++k) v[t * c + k] += o;
    }
    return v;
}

// out with NaN guard bands: data() + kGuard is the map.
struct Guarded {
    std::vector<float> v;
    explicit Guarded(size_t n) : v(n + 2 * kGuard, std::numeric_limits<float>::quiet_NaN()) {}
    float *map() { return v.data() + kGuard; }
    bool guards_nan() const {
        for (size_t i = 0; i < kGuard; ++i)
            if (!std::isnan(v[i]) || !std::isnan(v[v.size() - 1 - i])) return false;
        return true;
    }
};

void expect_close(const char *what, const float *out, const std::vector<double> &matched, const std::vector<double> &exact,
                  int Co) {
    const size_t n = matched.size();
    const tc_emu::Diff m = tc_emu::compare(out, matched.data(), n), x = tc_emu::compare(out, exact.data(), n);
    std::printf("  %s: vs matched rel L2 %.2e max abs %.2e | vs exact rel L2 %.2e max abs %.2e\n", what, m.rel, m.max_abs,
                x.rel, x.max_abs);
    EXPECT_EQ(m.bad, 0u) << what << ": unwritten or non-finite outputs, the first at token " << m.first_bad / Co
                               << " channel " << m.first_bad % Co;
    EXPECT_LT(m.rel, 1e-4) << what;
    EXPECT_LT(m.max_abs, 4e-3) << what;
    EXPECT_LT(x.rel, 1e-2) << what;
}

void check_merge(int C, int Co, int H, int W, uint32_t seed) {
    std::mt19937 rng(seed);
    const int K = 4 * C, ho = H / 2, wo = W / 2;
    const int64_t nt = (int64_t)ho * wo;
    const std::vector<float> x = token_map((size_t)H * W, C, rng);
    const std::vector<float> Wt = uniform((size_t)Co * K, -1.f / std::sqrt((float)K), 1.f / std::sqrt((float)K), rng);
    const std::vector<float> gamma = uniform(K, 0.5f, 1.5f, rng), beta = uniform(K, -0.2f, 0.2f, rng);
    std::vector<uint16_t> wp;
    std::vector<float> gp, bp;
    patch_tc::pack_merge(Wt.data(), C, Co, gamma.data(), beta.data(), &wp, &gp, &bp);

    // references: s2d (channel c * 4 + 2 dy + dx), LN in double, GEMM
    std::vector<double> matched((size_t)nt * Co), exact((size_t)nt * Co), y(K);
    for (int64_t t = 0; t < nt; ++t) {
        const int yo = (int)(t / wo), xo = (int)(t % wo);
        double s = 0, q = 0;
        for (int k = 0; k < K; ++k) {
            const int c = k / 4, dy = (k / 2) & 1, dx = k & 1;
            y[k] = x[((size_t)(2 * yo + dy) * W + 2 * xo + dx) * C + c];
            s += y[k];
        }
        const double mean = s / K;
        for (int k = 0; k < K; ++k) q += (y[k] - mean) * (y[k] - mean);
        const double rstd = 1.0 / std::sqrt(q / K + kEps);
        for (int k = 0; k < K; ++k) y[k] = (y[k] - mean) * rstd * gamma[k] + beta[k];
        for (int n = 0; n < Co; ++n) {
            double am = 0, ax = 0;
            for (int k = 0; k < K; ++k) {
                am += rb(y[k]) * rb(Wt[(size_t)n * K + k]);
                ax += y[k] * Wt[(size_t)n * K + k];
            }
            matched[(size_t)t * Co + n] = am;
            exact[(size_t)t * Co + n] = ax;
        }
    }

    Guarded out((size_t)nt * Co);
    patch_tc::MergeArgs a{x.data(), H, W, C, wp.data(), gp.data(), bp.data(), kEps, Co, out.map(), nt};
    const int ctas = (int)((nt + patch_tc::kMergeM - 1) / patch_tc::kMergeM);
    const size_t bytes = patch_tc::merge_smem(C);
    tc_emu::run_ctas(ctas, patch_tc::kThreads, bytes,
                     [&](int b, int tid, uint8_t *sm) { patch_tc::merge_cta_any(a, b, tid, sm); });
    char what[128];
    std::snprintf(what, sizeof what, "merge C %3d -> %3d, %3dx%-3d map (%lld tokens, %d CTAs, %zu B smem)", C, Co, W, H,
                  (long long)nt, ctas, bytes);
    expect_close(what, out.map(), matched, exact, Co);
    EXPECT_TRUE(out.guards_nan()) << what << ": a write outside the output";
}

void check_expand(int C, int C2, int Cs, int Co, int h, int w, bool in_place, uint32_t seed) {
    std::mt19937 rng(seed);
    const int Cu = C2 / 4, Ck = Cu + Cs, W2 = 2 * w;
    const int64_t nlo = (int64_t)h * w, nhi = 4 * nlo;
    const std::vector<float> lo = token_map((size_t)nlo, C, rng), skip = token_map((size_t)nhi, Cs, rng);
    const std::vector<float> We = uniform((size_t)C2 * C, -1.f / std::sqrt((float)C), 1.f / std::sqrt((float)C), rng);
    const std::vector<float> be = uniform(C2, -0.2f, 0.2f, rng);
    const std::vector<float> Ws = uniform((size_t)Co * Ck, -1.f / std::sqrt((float)Ck), 1.f / std::sqrt((float)Ck), rng);
    const std::vector<float> bs = uniform(Co, -0.2f, 0.2f, rng);
    std::vector<uint16_t> wep, wsp;
    std::vector<float> bep;
    patch_tc::pack_expand(We.data(), be.data(), C, C2, Ws.data(), Ck, Co, &wep, &bep, &wsp);

    // references: up = lo We^T + be, d2s (up channel c * 4 + 2 dy + dx -> sub-pixel (dy, dx)
    // channel c), concat [d2s | skip], skip linear
    std::vector<double> matched((size_t)nhi * Co), exact((size_t)nhi * Co), um(C2), ux(C2), zm(Ck), zx(Ck);
    for (int64_t t = 0; t < nlo; ++t) {
        const int y = (int)(t / w), x = (int)(t % w);
        for (int u = 0; u < C2; ++u) {
            double am = be[u], ax = be[u];
            for (int k = 0; k < C; ++k) {
                am += rb(lo[(size_t)t * C + k]) * rb(We[(size_t)u * C + k]);
                ax += (double)lo[(size_t)t * C + k] * We[(size_t)u * C + k];
            }
            um[u] = rb(am);
            ux[u] = ax;
        }
        for (int j = 0; j < 4; ++j) {
            const int64_t o = (int64_t)(2 * y + j / 2) * W2 + 2 * x + j % 2;
            for (int c = 0; c < Cu; ++c) {
                zm[c] = um[c * 4 + j];
                zx[c] = ux[c * 4 + j];
            }
            for (int c = 0; c < Cs; ++c) {
                zm[Cu + c] = skip[(size_t)o * Cs + c];  // two bf16 parts: s to ~2^-17
                zx[Cu + c] = skip[(size_t)o * Cs + c];
            }
            for (int n = 0; n < Co; ++n) {
                double am = bs[n], ax = bs[n];
                for (int k = 0; k < Ck; ++k) {
                    am += zm[k] * rb(Ws[(size_t)n * Ck + k]);
                    ax += zx[k] * Ws[(size_t)n * Ck + k];
                }
                matched[(size_t)o * Co + n] = am;
                exact[(size_t)o * Co + n] = ax;
            }
        }
    }

    Guarded out((size_t)nhi * std::max(Co, Cs));
    Guarded skipbuf((size_t)nhi * Cs);
    std::memcpy(skipbuf.map(), skip.data(), skip.size() * 4);
    float *sk = in_place ? out.map() : skipbuf.map();
    if (in_place) std::memcpy(sk, skip.data(), skip.size() * 4);
    patch_tc::ExpandArgs a{lo.data(), h, w, C, wep.data(), bep.data(), C2, sk, Cs, wsp.data(), bs.data(), Co, out.map()};
    const int ctas = (int)((nlo + patch_tc::kExpandL - 1) / patch_tc::kExpandL);
    const size_t bytes = patch_tc::expand_smem(C, Cu, Cs);
    tc_emu::run_ctas(ctas, patch_tc::kThreads, bytes,
                     [&](int b, int tid, uint8_t *sm) { patch_tc::expand_cta(a, b, tid, sm); });
    char what[160];
    std::snprintf(what, sizeof what, "expand C %3d -> %3d (+ skip %3d -> %3d), %3dx%-3d low-res map (%d CTAs, %zu B smem)%s",
                  C, C2, Cs, Co, w, h, ctas, bytes, in_place ? ", in place" : "");
    expect_close(what, out.map(), matched, exact, Co);
    EXPECT_TRUE(out.guards_nan() && skipbuf.guards_nan()) << what << ": a write outside the output";
    if (!in_place) {
        EXPECT_EQ(std::memcmp(skipbuf.map(), skip.data(), skip.size() * 4), 0) << what << ": skip map written";
    }
}

}  // namespace

// model v1's merges (C 32 -> 64, C 64 -> 128), tails that wrap output rows, and the other widths
TEST(PatchTcEmu, Merge) {
    check_merge(32, 64, 18, 30, 1);   // 135 tokens: 3 CTAs, the last with 7, tiles wrap rows
    check_merge(32, 64, 2, 2, 2);     // one token
    check_merge(64, 128, 10, 26, 3);  // 65 tokens: a one-token tail
    check_merge(96, 192, 4, 10, 4);
    check_merge(128, 256, 6, 6, 5);
    check_merge(256, 512, 2, 4, 6);   // 4C 1024: every lane 8 float4
    check_merge(32, 48, 4, 6, 7);     // Co not 2C: 3 column groups over 4 warp lanes
    check_merge(160, 320, 2, 6, 8);   // one token per warp iteration, 5 float4 per lane
}
// the v3 study's wide64 (channels 64/64/128): merge0 4 x 64 -> 64 (merge1 64 -> 128 is v1's)
TEST(PatchTcEmu, MergeWide64) {
    check_merge(64, 64, 18, 30, 21);  // 135 tokens: 3 CTAs, tiles wrap rows
    check_merge(64, 64, 2, 2, 22);    // one token
    check_merge(64, 64, 10, 26, 23);  // a one-token tail
}
// model v1's expands (C 128 -> 256 -> 64 + 64 -> 64; C 64 -> 128 -> 32 + 32 -> 32), in place
// as the engine runs them, and the other widths
TEST(PatchTcEmu, Expand) {
    check_expand(128, 256, 64, 64, 3, 11, false, 11);  // 33 low-res tokens: a one-token tail
    check_expand(128, 256, 64, 64, 3, 11, true, 12);
    check_expand(64, 128, 32, 32, 5, 7, true, 13);     // 35 tokens, tiles wrap rows
    check_expand(64, 128, 32, 32, 1, 1, false, 14);    // one token
    check_expand(32, 64, 16, 16, 2, 3, false, 15);
    check_expand(256, 512, 128, 128, 2, 2, true, 16);  // model v2-deep's widest level
    check_expand(96, 192, 48, 48, 2, 5, false, 17);
}
// wide64's expands: expand0 64 -> 4 x 64 (+ skip 64 -> 64), expand1 128 -> 4 x 64 (+ 64 -> 64, v1's
// shape), in place as the engine runs them and not
TEST(PatchTcEmu, ExpandWide64) {
    check_expand(64, 256, 64, 64, 3, 11, true, 31);    // 33 low-res tokens: a one-token tail
    check_expand(64, 256, 64, 64, 5, 7, false, 32);    // 35 tokens, tiles wrap rows
    check_expand(64, 256, 64, 64, 1, 1, true, 33);     // one token
    check_expand(128, 256, 64, 64, 5, 7, true, 34);
}
