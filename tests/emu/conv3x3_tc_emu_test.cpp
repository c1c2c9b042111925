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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
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

// A whole frame's shift map of th x tw tiles, (dy, dx) each uniform in [-R, R] (odd and even,
// beyond the map's edges at its border tiles), and the part of it over the domain of tiles
// [ty0, ty0 + nty) x [tx0, tx0 + ntx) as its own map (the CPU ops' input).
struct ShiftMaps {
    std::vector<int32_t> whole, part;
    const int32_t *first = nullptr;  // the domain's first tile in `whole`
    int stride = 0;
};
ShiftMaps shift_maps(int th, int tw, int ty0, int tx0, int nty, int ntx, int R, std::mt19937 &rng) {
    std::uniform_int_distribution<int> d(-R, R);
    ShiftMaps m;
    m.whole.resize((size_t)th * tw * 2);
    for (int32_t &v : m.whole) v = d(rng);
    for (int y = 0; y < nty; ++y)
        for (int x = 0; x < ntx; ++x)
            for (int k = 0; k < 2; ++k) m.part.push_back(m.whole[((size_t)(y + ty0) * tw + x + tx0) * 2 + k]);
    m.first = m.whole.data() + ((size_t)ty0 * tw + tx0) * 2;
    m.stride = tw;
    return m;
}

// Model v2's alignment read through the shift maps (Args.shift, tile_shift.h), the fusion window's
// frames but the centre each with its own map: the kernel on the frames as they are, with their
// maps, against the kernel on the frames moved first by the CPU's shift_tiles_s2d
// (kernels/cpu/shift_tiles.cpp, reads clamped to the h x w token map): every output bit for bit
// (the same halo, so the same mma sums). Tiles of t2 tokens (align_tile = 2 t2 px), shifts up to
// R px; domain: the maps are a whole frame's with a tile of margin around the domain (the map's
// first tile and its stride as the tiles plan passes them); map sizes not multiples of the conv's
// 16 x 16 tile.
template <int NT>
void check_shifted(int nf, int h, int w, int t2, int R, bool domain, int ncta, uint32_t seed) {
    constexpr int Cout = 8 * NT;
    const int Cin = 12 * nf + 1, centre = nf / 2;
    std::mt19937 rng(seed);
    const int nty = h / t2, ntx = w / t2, m = domain ? 1 : 0;
    std::vector<std::vector<uint16_t>> frb(nf), movedb(nf);
    std::vector<ShiftMaps> maps(nf);
    for (int k = 0; k < nf; ++k) {
        const std::vector<float> f = uniform((size_t)h * w * 12, -1.f, 1.f, rng);
        frb[k] = bits(f);
        if (k == centre) {
            movedb[k] = frb[k];
            continue;
        }
        maps[k] = shift_maps(nty + 2 * m, ntx + 2 * m, m, m, nty, ntx, R, rng);
        std::vector<float> moved(f.size());
        ASSERT_EQ(0, denoise::cpu::shift_tiles_s2d(f.data(), h, w, maps[k].part.data(), 2 * t2, moved.data()));
        movedb[k] = bits(moved);
    }
    const std::vector<float> w_oihw = uniform((size_t)Cout * Cin * 9, -0.1f, 0.1f, rng);
    const std::vector<float> bias = uniform(Cout, -0.1f, 0.1f, rng);
    std::vector<float> wk((size_t)9 * Cin * Cout);
    denoise::cpu::conv3x3_pack(w_oihw.data(), Cout, Cin, wk.data());
    const std::vector<uint16_t> wkb = bits(wk);
    const conv_tc::Layout L = conv_tc::layout(nf, Cout);
    auto run = [&](bool through_maps, std::vector<float> *out) {
        conv_tc::Args a{};
        for (int k = 0; k < nf; ++k) {
            a.frame[k] = through_maps ? frb[k].data() : movedb[k].data();
            a.shift[k] = through_maps && k != centre ? maps[k].first : nullptr;
        }
        a.shift_stride = ntx + 2 * m;
        a.shift_tile = t2;
        a.nframes = nf;
        a.sigma_map = 25.f / 255.0f;
        a.h = h;
        a.w = w;
        a.wk = wkb.data();
        a.bias = bias.data();
        out->assign((size_t)h * w * Cout, std::numeric_limits<float>::quiet_NaN());
        a.out = out->data();
        a.tiles_x = (w + conv_tc::kTileW - 1) / conv_tc::kTileW;
        a.ntiles = a.tiles_x * ((h + conv_tc::kTileH - 1) / conv_tc::kTileH);
        const int n = std::min(ncta, a.ntiles);
        tc_emu::run_ctas(n, conv_tc::kThreads, L.bytes, [&](int b, int tid, uint8_t *sm) { conv_tc::conv_cta<NT>(a, b, n, tid, sm); });
    };
    std::vector<float> got, ref;
    run(true, &got);
    run(false, &ref);
    size_t differ = 0, bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        differ += std::memcmp(&got[i], &ref[i], 4) != 0;
        bad += !std::isfinite(got[i]);
    }
    std::printf("n %d Cout %2d %3dx%-3d tiles of %d tokens, R %d%s: %zu of %zu outputs differ from the conv of the "
                "CPU-moved frames\n",
                nf, Cout, w, h, t2, R, domain ? " (domain of a larger map)" : "", differ, got.size());
    EXPECT_EQ(bad, 0u) << "unwritten or non-finite outputs";
    EXPECT_EQ(differ, 0u);
}

}  // namespace

// The s2d gather alone (tile_shift.h's s2d_quad) against the CPU's shift_tiles_s2d on every token
// and colour quad of a 10 x 14 token frame, for every shift in [-7, 7]^2 (odd, even, and clamped
// at every edge): the same bf16 samples bit for bit.
TEST(TileShiftEmu, S2dQuadIsTheCpuWarp) {
    std::mt19937 rng(3);
    const int h2 = 10, w2 = 14;
    const std::vector<float> f = uniform((size_t)h2 * w2 * 12, -1.f, 1.f, rng);
    const std::vector<uint16_t> fb = bits(f);
    size_t differ = 0;
    for (int dy = -7; dy <= 7; ++dy)
        for (int dx = -7; dx <= 7; ++dx) {
            const int32_t s[2] = {dy, dx};  // every 4 px tile of the frame moved alike
            std::vector<int32_t> map((size_t)(h2 / 2) * (w2 / 2) * 2);
            for (size_t i = 0; i < map.size(); i += 2) {
                map[i] = s[0];
                map[i + 1] = s[1];
            }
            std::vector<float> ref(f.size());
            ASSERT_EQ(0, denoise::cpu::shift_tiles_s2d(f.data(), h2, w2, map.data(), 4, ref.data()));
            const std::vector<uint16_t> refb = bits(ref);
            for (int y = 0; y < h2; ++y)
                for (int x = 0; x < w2; ++x)
                    for (int c = 0; c < 3; ++c) {
                        const uint64_t q = tile_shift::s2d_quad(fb.data(), h2, w2, y, x, c, dy, dx);
                        for (int e = 0; e < 4; ++e)
                            differ += (uint16_t)(q >> (16 * e)) != refb[((size_t)y * w2 + x) * 12 + 4 * c + e];
                    }
        }
    EXPECT_EQ(differ, 0u);
}

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
// model v2's alignment: the window's frames read through their shift maps (R 24, tiles of 32
// tokens as align_tile 64; R 3-9 on tiles of 4, 6 and 8 tokens, many tiles per conv tile), whole
// maps and a domain of a larger map, Cout 16, 32 and 64, the fusion radius 1 (3 frames)
TEST(Conv3x3TcEmu, ShiftedThroughMaps) {
    check_shifted<4>(5, 32, 64, 32, 24, false, 4, 31);
    check_shifted<4>(5, 24, 40, 8, 5, true, 3, 32);
    check_shifted<4>(5, 20, 36, 4, 5, false, 2, 33);
    check_shifted<8>(5, 24, 40, 8, 9, true, 2, 34);
    check_shifted<2>(3, 12, 20, 4, 3, true, 2, 35);
    check_shifted<4>(5, 24, 36, 6, 7, true, 3, 36);  // tiles of 6 tokens: the division's path
}
