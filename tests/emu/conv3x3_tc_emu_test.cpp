// The tensor-core fusion conv (kernels/cuda/conv3x3_tc.cu) run on the CPU through the warp
// emulator (tests/emu/warp_emu.h: the same kernel source, its mma/ldmatrix/barrier as rendezvous of
// fibers) against the CPU engine's conv (kernels/cpu/conv3x3.cpp on build_fusion_input's map, the
// sigma channel included). No GPU needed: this checks the kernel's index math (halo staging,
// zero padding at the map's edges, K padding, fragment layouts, the sigma term over in-bounds taps
// only, tile tails, the persistent tile loop).
//
// Each case: frames ~ U(-1, 1) and weights ~ U(-0.1, 0.1), bias ~ U(-0.1, 0.1), fresh per case and
// rounded to bf16 for both sides (the kernel takes bf16), so the two differ only in fp32 summation
// order; map sizes not multiples of the 16 x 16 tile; fewer CTAs than tiles; shared memory
// poisoned with 0xFF bytes (NaN) before every CTA and the output with NaN. Pass: every output
// written and finite, relative L2 < 1e-5, max abs < 1e-4 (outputs are O(1)).
#define DENOISE_WARP_EMULATION 1
#include "tc_emu_util.h"

#include "cuda/conv3x3_tc.cu"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "cpu/ops.h"
#include "cpu/unet.h"

using namespace denoise::cuda;

namespace {

using tc_emu::bits;
using tc_emu::round_bf16;
using tc_emu::uniform;

template <int NT>
void check(int nf, int h, int w, float sigma, int ncta, uint32_t seed) {
    constexpr int Cout = 8 * NT;
    const int Cin = 12 * nf + 1;
    std::mt19937 rng(seed);
    std::vector<std::vector<float>> fr;
    std::vector<std::vector<uint16_t>> frb;
    for (int k = 0; k < nf; ++k) {
        fr.push_back(uniform((size_t)h * w * 12, -1.f, 1.f, rng));
        frb.push_back(bits(fr.back()));
    }
    const std::vector<float> w_oihw = uniform((size_t)Cout * Cin * 9, -0.1f, 0.1f, rng);
    const std::vector<float> bias = uniform(Cout, -0.1f, 0.1f, rng);
    std::vector<float> wk((size_t)9 * Cin * Cout);
    denoise::cpu::conv3x3_pack(w_oihw.data(), Cout, Cin, wk.data());
    const std::vector<uint16_t> wkb = bits(wk);

    // reference: the CPU engine's fusion input (sigma / 255 as channel Cin - 1) and conv
    std::vector<const float *> frp;
    for (auto &f : fr) frp.push_back(f.data());
    std::vector<float> fin((size_t)h * w * Cin), ref((size_t)h * w * Cout);
    std::vector<float> work(denoise::cpu::conv3x3_work_floats(h, w, Cin, Cout));
    denoise::cpu::build_fusion_input(frp.data(), nf, h, w, sigma, fin.data());
    denoise::cpu::conv3x3(fin.data(), h, w, Cin, wk.data(), bias.data(), Cout, ref.data(), work.data());

    conv_tc::Args a{};
    for (int k = 0; k < nf; ++k) a.frame[k] = frb[k].data();
    a.nframes = nf;
    a.sigma_map = sigma / 255.0f;
    a.h = h;
    a.w = w;
    a.wk = wkb.data();
    a.bias = bias.data();
    std::vector<float> out((size_t)h * w * Cout, std::numeric_limits<float>::quiet_NaN());
    a.out = out.data();
    a.tiles_x = (w + conv_tc::kTileW - 1) / conv_tc::kTileW;
    a.ntiles = a.tiles_x * ((h + conv_tc::kTileH - 1) / conv_tc::kTileH);
    ncta = std::min(ncta, a.ntiles);
    const conv_tc::Layout L = conv_tc::layout(nf, Cout);
    tc_emu::run_ctas(ncta, conv_tc::kThreads, L.bytes,
                     [&](int b, int tid, uint8_t *sm) { conv_tc::conv_cta<NT>(a, b, ncta, tid, sm); });

    const tc_emu::Diff df = tc_emu::compare(out, ref);
    const double rel = df.rel, max_abs = df.max_abs;
    const size_t bad = df.bad, first_bad = df.first_bad;
    std::printf("n %d Cout %2d %3dx%-3d sigma %5.1f CTAs %d of %d tiles (%zu B smem): rel L2 %.2e, max abs %.2e\n", nf,
                Cout, w, h, sigma, ncta, a.ntiles, L.bytes, rel, max_abs);
    EXPECT_EQ(bad, 0u) << "unwritten or non-finite outputs, the first at token " << first_bad / Cout << " (x "
                       << first_bad / Cout % w << ", y " << first_bad / Cout / w << ") channel " << first_bad % Cout;
    EXPECT_LT(rel, 1e-5);
    EXPECT_LT(max_abs, 1e-4);
}

}  // namespace

// model v1: 5 frames + sigma -> 32
TEST(Conv3x3TcEmu, ModelV1) {
    check<4>(5, 37, 21, 25.f, 4, 1);   // 3 x 2 tiles, tails in both directions, 4 CTAs loop
    check<4>(5, 16, 16, 50.f, 1, 2);   // exactly one tile
    check<4>(5, 17, 33, 5.f, 2, 3);    // one-token tails
    check<4>(5, 1, 1, 25.f, 1, 4);     // every tap but the centre outside the map
    check<4>(5, 2, 19, 75.f, 2, 5);    // two rows: every token is an edge token
}
// the v3 study's wide64: 5 frames + sigma -> 64 (132,416 B of shared memory)
TEST(Conv3x3TcEmu, Wide64) {
    check<8>(5, 37, 21, 25.f, 4, 21);  // 3 x 2 tiles, tails in both directions, 4 CTAs loop
    check<8>(5, 1, 1, 25.f, 1, 22);    // every tap but the centre outside the map
    check<8>(5, 2, 19, 75.f, 2, 23);   // every token an edge token
}
// other fusion radii (K padding 0, 4, 8 and 12 channels) and widths
TEST(Conv3x3TcEmu, OtherShapes) {
    check<2>(1, 5, 40, 25.f, 2, 11);   // 12 -> 16 channels
    check<6>(3, 19, 9, 25.f, 1, 12);   // 36 -> 48
    check<8>(4, 18, 17, 25.f, 3, 13);  // 48, no padding
    check<4>(7, 9, 20, 25.f, 2, 14);   // 84 -> 96
    check<8>(8, 17, 16, 10.f, 2, 15);  // 96, no padding; the largest layout (194 KB)
}
