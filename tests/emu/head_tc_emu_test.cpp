// The tensor-core head (kernels/cuda/head_tc.cu) run on the CPU through the warp emulator
// (tests/emu/warp_emu.h: the same kernel source, its mma/ldmatrix/barrier as rendezvous of fibers)
// against a plain double-precision conv3d 3x3x3 + bias + residual + widened clamp written here
// from the definition (weights/denoise_train/model.py's head and output_clamp). No GPU needed: this checks the
// kernel's index math (weight packing, halo staging of the three time taps, zero padding at the
// map's edges, N padding, fragment layouts, the epilogue's channel mask, tile tails, the
// persistent tile loop, the as_change form).
//
// Feature channels Cin 32 (models v1 / v2: one K pass of the three time taps) and 64 (wide64: a
// pass per time tap, the accumulators carried across the passes).
// Each case: F ~ U(-1, 1), weights ~ U(-0.1, 0.1), bias ~ U(-0.1, 0.1), residual ~ U(-1.3, 1.3)
// (so that the clamp, and its widening to out-of-range residuals, both act), fresh per case and
// rounded to bf16 for both sides (the kernel takes bf16), so the two differ only in the fp32
// summation; map sizes not multiples of the 16 x 16 tile, odd widths and heights; fewer CTAs than
// tiles; shared memory poisoned with 0xFF bytes (NaN) before every CTA and the output with NaN.
// Pass: every output written and finite, relative L2 < 1e-5, max abs < 1e-4 (outputs are O(1)),
// and in every case with enough outputs some clamped ones (the clamp was exercised).
#define DENOISE_WARP_EMULATION 1
#include "tc_emu_util.h"

#include "cuda/head_tc.cu"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/ops.h"

using namespace denoise::cuda;

namespace {

using tc_emu::bits;
using tc_emu::round_bf16;
using tc_emu::uniform;

// conv3d 3x3x3 in double: W (Cout, Cin, 3, 3, 3), F[dt] (h, w, Cin), zero outside the map in space.
void reference(const std::vector<float> F[3], int h, int w, int Cin, const std::vector<float> &W,
               const std::vector<float> &bias, int Cout, const std::vector<float> &res, bool as_change,
               std::vector<float> *out, int64_t *clamped) {
    out->assign((size_t)h * w * Cout, 0.f);
    *clamped = 0;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int o = 0; o < Cout; ++o) {
                double a = bias[o];
                for (int dt = 0; dt < 3; ++dt)
                    for (int ky = 0; ky < 3; ++ky)
                        for (int kx = 0; kx < 3; ++kx) {
                            const int yy = y + ky - 1, xx = x + kx - 1;
                            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                            const float *f = &F[dt][((size_t)yy * w + xx) * Cin];
                            for (int c = 0; c < Cin; ++c)
                                a += (double)f[c] * W[((((size_t)o * Cin + c) * 3 + dt) * 3 + ky) * 3 + kx];
                        }
                const size_t i = ((size_t)y * w + x) * Cout + o;
                const double r = res[i], lo = std::min(-1.0, r), hi = std::max(1.0, r);
                const double v = std::min(hi, std::max(lo, a + r));
                if (v != a + r) ++*clamped;
                (*out)[i] = (float)(as_change ? 0.5 * (v - r) : v);
            }
}

// The kernel's arguments for an h x w map with Cin features in, Cout out, over the whole map's
// tiles; the caller sets the three feature maps (and shift maps).
head_tc::Args head_args(int h, int w, int Cin, const uint16_t *wk, const float *bias, int Cout, const uint16_t *res,
                        float *out, bool as_change) {
    head_tc::Args a{};
    a.h = h;
    a.w = w;
    a.cin = Cin;
    a.wk = wk;
    a.bias = bias;
    a.cout = Cout;
    a.res = res;
    a.out = out;
    a.as_change = as_change;
    a.tiles_x = (w + head_tc::kTileW - 1) / head_tc::kTileW;
    a.ntiles = a.tiles_x * ((h + head_tc::kTileH - 1) / head_tc::kTileH);
    return a;
}

void check(int Cin, int h, int w, int Cout, bool as_change, int ncta, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> F[3];
    std::vector<uint16_t> Fb[3];
    for (int dt = 0; dt < 3; ++dt) {
        F[dt] = uniform((size_t)h * w * Cin, -1.f, 1.f, rng);
        Fb[dt] = bits(F[dt]);
    }
    const std::vector<float> W = uniform((size_t)Cout * Cin * 27, -0.1f, 0.1f, rng);
    const std::vector<float> bias = uniform(Cout, -0.1f, 0.1f, rng);
    const std::vector<float> res = uniform((size_t)h * w * Cout, -1.3f, 1.3f, rng);
    const std::vector<uint16_t> resb = bits(res);
    std::vector<uint16_t> wk((size_t)9 * head_tc::kN * 3 * Cin, 0xFFFF);
    ASSERT_TRUE(head_conv3d_tc_pack(W.data(), Cout, Cin, wk.data()));
    std::vector<float> ref;
    int64_t clamped = 0;
    reference(F, h, w, Cin, W, bias, Cout, res, as_change, &ref, &clamped);

    std::vector<float> out((size_t)h * w * Cout, std::numeric_limits<float>::quiet_NaN());
    head_tc::Args a = head_args(h, w, Cin, wk.data(), bias.data(), Cout, resb.data(), out.data(), as_change);
    for (int dt = 0; dt < 3; ++dt) a.F[dt] = Fb[dt].data();
    ncta = std::min(ncta, a.ntiles);
    const size_t bytes = head_tc::smem_bytes(Cin);
    ASSERT_GT(bytes, 0u);
    tc_emu::run_ctas(ncta, head_tc::kThreads, bytes,
                     [&](int b, int tid, uint8_t *sm) { head_tc::head_cta_any(a, b, ncta, tid, sm); });

    const tc_emu::Diff df = tc_emu::compare(out, ref);
    const double rel = df.rel, max_abs = df.max_abs;
    const size_t bad = df.bad, first_bad = df.first_bad;
    std::printf("Cin %2d Cout %2d %3dx%-3d %s CTAs %d of %d tiles (%zu B smem): rel L2 %.2e, max abs %.2e, clamped %lld "
                "of %zu\n",
                Cin, Cout, w, h, as_change ? "change" : "output", ncta, a.ntiles, bytes, rel, max_abs, (long long)clamped,
                out.size());
    EXPECT_EQ(bad, 0u) << "unwritten or non-finite outputs, the first at token " << first_bad / Cout << " (x "
                       << first_bad / Cout % w << ", y " << first_bad / Cout / w << ") channel " << first_bad % Cout;
    EXPECT_LT(rel, 1e-5);
    EXPECT_LT(max_abs, 1e-4);
    if (out.size() >= 1000) {
        EXPECT_GT(clamped, 0) << "no output clamped: the clamp was not exercised";
    }
}

// Model v2's alignment read through the shift maps (Args.shift, tile_shift.h): F_{t-1} and F_{t+1}
// each with its own map of full-resolution shifts in [-R, R] (odd and even: halved with floor),
// the kernel on the maps as they are against the kernel on the maps moved first by the CPU's
// shift_tiles (kernels/cpu/shift_tiles.cpp, on the halved shifts, reads clamped to the h x w
// map): every output bit for bit. Tiles of t tokens; domain: the maps are a whole frame's with a
// tile of margin around the domain (its first tile and stride as the tiles plan passes them).
void check_shifted(int Cin, int h, int w, int t, int R, bool domain, int ncta, uint32_t seed) {
    std::mt19937 rng(seed);
    const int Cout = 12, nty = h / t, ntx = w / t, m = domain ? 1 : 0, stride = ntx + 2 * m;
    std::uniform_int_distribution<int> d(-R, R);
    std::vector<uint16_t> Fb[3], Mb[3];
    std::vector<int32_t> whole[3];
    for (int dt = 0; dt < 3; ++dt) {
        const std::vector<float> F = uniform((size_t)h * w * Cin, -1.f, 1.f, rng);
        Fb[dt] = Mb[dt] = bits(F);
        if (dt == 1) continue;
        whole[dt].resize((size_t)(nty + 2 * m) * stride * 2);
        for (int32_t &v : whole[dt]) v = d(rng);
        std::vector<int32_t> half;  // the domain's part, halved with floor (align.py align_features)
        for (int y = 0; y < nty; ++y)
            for (int x = 0; x < ntx; ++x)
                for (int k = 0; k < 2; ++k) {
                    const int32_t v = whole[dt][((size_t)(y + m) * stride + x + m) * 2 + k];
                    half.push_back(v >= 0 ? v / 2 : -((-v + 1) / 2));
                }
        std::vector<float> moved(F.size());
        ASSERT_EQ(0, denoise::cpu::shift_tiles(F.data(), h, w, Cin, half.data(), t, moved.data()));
        Mb[dt] = bits(moved);
    }
    const std::vector<float> W = uniform((size_t)Cout * Cin * 27, -0.1f, 0.1f, rng);
    const std::vector<float> bias = uniform(Cout, -0.1f, 0.1f, rng);
    const std::vector<uint16_t> resb = bits(uniform((size_t)h * w * Cout, -1.3f, 1.3f, rng));
    std::vector<uint16_t> wk((size_t)9 * head_tc::kN * 3 * Cin, 0xFFFF);
    ASSERT_TRUE(head_conv3d_tc_pack(W.data(), Cout, Cin, wk.data()));
    auto run = [&](bool through_maps, std::vector<float> *out) {
        out->assign((size_t)h * w * Cout, std::numeric_limits<float>::quiet_NaN());
        head_tc::Args a = head_args(h, w, Cin, wk.data(), bias.data(), Cout, resb.data(), out->data(), true);
        for (int dt = 0; dt < 3; ++dt) {
            a.F[dt] = through_maps ? Fb[dt].data() : Mb[dt].data();
            a.shift[dt] = through_maps && dt != 1 ? whole[dt].data() + ((size_t)m * stride + m) * 2 : nullptr;
        }
        a.shift_stride = stride;
        a.shift_tile = t;
        const int n = std::min(ncta, a.ntiles);
        tc_emu::run_ctas(n, head_tc::kThreads, head_tc::smem_bytes(Cin),
                         [&](int b, int tid, uint8_t *sm) { head_tc::head_cta_any(a, b, n, tid, sm); });
    };
    std::vector<float> got, ref;
    run(true, &got);
    run(false, &ref);
    size_t differ = 0, bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        differ += std::memcmp(&got[i], &ref[i], 4) != 0;
        bad += !std::isfinite(got[i]);
    }
    std::printf("Cin %2d %3dx%-3d tiles of %d tokens, R %d%s: %zu of %zu outputs differ from the head on the CPU-moved "
                "maps\n",
                Cin, w, h, t, R, domain ? " (domain of a larger map)" : "", differ, got.size());
    EXPECT_EQ(bad, 0u) << "unwritten or non-finite outputs";
    EXPECT_EQ(differ, 0u);
}

}  // namespace

// model v2's alignment: F_{t-1} and F_{t+1} read through their shift maps (R 24 on tiles of 32
// tokens as align_tile 64; R 5-9 on tiles of 4, 6 and 8 tokens), whole maps and a domain of a
// larger map, Cin 32 and 64
TEST(HeadTcEmu, ShiftedThroughMaps) {
    check_shifted(32, 32, 64, 32, 24, false, 4, 41);
    check_shifted(32, 24, 40, 8, 5, true, 3, 42);
    check_shifted(32, 20, 36, 4, 9, false, 2, 43);
    check_shifted(64, 24, 40, 8, 9, true, 2, 44);
    check_shifted(32, 24, 36, 6, 7, true, 2, 45);  // tiles of 6 tokens: the division's path
}

// model v1 (RGB: 12 = 3 x 2 x 2 s2d channels)
TEST(HeadTcEmu, ModelV1) {
    check(32, 37, 21, 12, false, 4, 1);  // 2 x 3 tiles, tails in both directions, 4 CTAs loop
    check(32, 16, 16, 12, true, 1, 2);   // exactly one tile, the change form
    check(32, 17, 33, 12, false, 2, 3);  // one-token tails
    check(32, 1, 1, 12, false, 1, 4);    // every tap but the centre outside the map
    check(32, 2, 19, 12, true, 2, 5);    // two rows: every token is an edge token
}
// other channel counts (gray: 4; odd; the full 16 with no N padding)
TEST(HeadTcEmu, OtherCout) {
    check(32, 19, 9, 4, false, 1, 11);
    check(32, 5, 40, 7, true, 2, 12);
    check(32, 18, 17, 16, false, 3, 13);
    check(32, 9, 20, 1, true, 2, 14);
}
// the v3 study's wide64 (64 feature channels: three K passes, one per time tap)
TEST(HeadTcEmu, Cin64) {
    check(64, 37, 21, 12, false, 4, 21);  // tails in both directions, 4 CTAs loop over 6 tiles
    check(64, 16, 16, 12, true, 1, 22);   // exactly one tile, the change form
    check(64, 1, 1, 12, false, 1, 23);    // every tap but the centre outside the map
    check(64, 2, 19, 12, true, 2, 24);    // every token an edge token
    check(64, 18, 17, 16, false, 3, 25);  // Cout 16 (no N padding)
    check(64, 9, 20, 4, true, 2, 26);     // gray
}
TEST(HeadTcEmu, PackRefuses) {
    std::vector<float> W((size_t)17 * 96 * 27, 0.f);
    std::vector<uint16_t> wk((size_t)9 * head_tc::kN * 3 * 96, 0xABCD);
    EXPECT_FALSE(head_conv3d_tc_pack(W.data(), 12, 96, wk.data()));  // Cin 96
    EXPECT_FALSE(head_conv3d_tc_pack(W.data(), 12, 16, wk.data()));  // Cin 16
    EXPECT_FALSE(head_conv3d_tc_pack(W.data(), 17, 32, wk.data()));  // Cout 17
    EXPECT_FALSE(head_conv3d_tc_pack(W.data(), 0, 64, wk.data()));
    EXPECT_TRUE(std::all_of(wk.begin(), wk.end(), [](uint16_t v) { return v == 0xABCD; })) << "a refusal wrote weights";
    EXPECT_EQ(head_tc::smem_bytes(96), 0u);
    EXPECT_EQ(head_tc::smem_bytes(32), 97408u);
    EXPECT_EQ(head_tc::smem_bytes(64), 104320u);
}
