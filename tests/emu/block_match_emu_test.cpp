// The CUDA block matching (kernels/cuda/block_match.cu: luma_pyramid's per-pixel body and
// block_match's launch over pairs x tile groups, a warp per three tiles, lanes over candidates,
// shuffle reductions per tile) run on the CPU through the warp emulator (tests/emu/warp_emu.h: the
// same kernel source, its shuffles as rendezvous of fibers) against kernels/cpu/block_match.cpp,
// the reference. No GPU needed: this checks the kernel's index math (pyramid levels, candidate
// raster and rank encoding, the three tiles of a warp and a last group of one or two, clamped reads
// at the frame's edges, the first-minimum tie rule, the final clamp, tiles beyond the last CTA's
// warps, the pair index of the grid).
//
// The luma L is formed here as frame_in.cu forms it, ((x_R + x_G) + x_B) / 3 of the fp32 s2d
// input, and both sides get the same s2d frames. Cases: textured frames moved by per-tile shifts
// (odd and even, up to beyond R so that the final clamp acts), plus noise; a flat frame (every
// candidate ties: the nearest-first rule alone decides); frames quantised to a few levels (many
// exact ties between candidates at different distances); sizes whose tile count is not a multiple
// of a warp's 3 tiles or a CTA's 12; R 24 / tile 64, R 8 / tile 32, R 5 / tile 16, R 0 / tile 8,
// R 12 / tile 24 (level widths 24, 12, 6: the batched reads, and the one-at-a-time sum); one
// launch of 8 pairs (every pair slot of the launch) and of 4 against one centre: textures moved
// differently, the centre itself, a flat and a quantised frame.
// Pass: every shift of every pair equal to the CPU's for that pair alone (outputs poisoned
// first), and every L1 / L2 value bit-identical.
#define DENOISE_WARP_EMULATION 1
#include "warp_emu.h"

#include "cuda/block_match.cu"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "align_test_util.h"
#include "cpu/ops.h"

namespace bm = denoise::cuda::block_match_dev;
namespace cpu = denoise::cpu;

namespace {

// (H, W) full resolution -> s2d fp32 (H/2, W/2, 12), channel c*4 + dy*2 + dx
std::vector<float> to_s2d(const std::vector<float> &planar, int H, int W) {
    const int h2 = H / 2, w2 = W / 2;
    std::vector<float> x((size_t)h2 * w2 * 12);
    for (int c = 0; c < 3; ++c)
        for (int Y = 0; Y < H; ++Y)
            for (int X = 0; X < W; ++X)
                x[((size_t)(Y / 2) * w2 + X / 2) * 12 + c * 4 + (Y & 1) * 2 + (X & 1)] = planar[((size_t)c * H + Y) * W + X];
    return x;
}

// frame_in.cu's luma plane of an s2d frame, in a pyramid buffer's first H x W floats
std::vector<float> pyramid_of(const std::vector<float> &s2d, int H, int W) {
    std::vector<float> p(H * W + H * W / 4 + H * W / 16, std::nanf(""));
    const int w2 = W / 2;
    for (int Y = 0; Y < H; ++Y)
        for (int X = 0; X < W; ++X) {
            const float *t = &s2d[((size_t)(Y / 2) * w2 + X / 2) * 12 + (Y & 1) * 2 + (X & 1)];
            p[(size_t)Y * W + X] = ((t[0] + t[4]) + t[8]) / 3.f;
        }
    for (int y = 0; y < H / 2; ++y)
        for (int x = 0; x < W / 2; ++x) bm::pyramid_pixel(p.data(), H, W, y, x);
    return p;
}

// textured planar frame: uniform noise, 3x3 mean (zero padded)
std::vector<float> textured(int H, int W, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> r((size_t)3 * H * W), o(r.size());
    for (float &v : r) v = u(rng);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                float s = 0.f;
                for (int i = -1; i <= 1; ++i)
                    for (int j = -1; j <= 1; ++j)
                        if (y + i >= 0 && y + i < H && x + j >= 0 && x + j < W) s += r[((size_t)c * H + y + i) * W + x + j];
                o[((size_t)c * H + y) * W + x] = s / 9.f;
            }
    return o;
}

void add_noise(std::vector<float> &f, float a, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-a, a);
    for (float &v : f) v += u(rng);
}

// Runs the kernel's CTAs of one launch (grid: tile groups x pairs) on the emulator: every pyramid of
// `others` against `pc`; returns each pair's shifts.
std::vector<std::vector<int32_t>> run_emulated(const std::vector<float> &pc, const std::vector<std::vector<float>> &others,
                                               int H, int W, int R, int t) {
    bm::Args a{};
    a.centre = pc.data();
    a.H = H;
    a.W = W;
    a.radius = R;
    a.tile = t;
    a.tw = W / t;
    a.tiles = (H / t) * a.tw;
    const int pairs = (int)others.size();
    EXPECT_LE(pairs, bm::kMaxPairs);
    std::vector<std::vector<int32_t>> s(pairs, std::vector<int32_t>((size_t)a.tiles * 2, INT32_MIN));
    for (int k = 0; k < pairs; ++k) {
        a.other[k] = others[k].data();
        a.shifts[k] = s[k].data();
    }
    const int groups = (a.tiles + bm::kGroup - 1) / bm::kGroup, ncta = (groups + bm::kWarps - 1) / bm::kWarps;
    for (int pair = 0; pair < pairs; ++pair)
        for (int b = 0; b < ncta; ++b)
            warp_emu::run_cta(bm::kThreads, nullptr, 0, [&](int tid) {
                bm::match_tiles(a, pair, (b * bm::kWarps + tid / 32) * bm::kGroup, tid % 32);
            });
    return s;
}

struct Case {
    const char *name;
    int H, W, R, t;
};

// CPU shifts of one pair, and its workspace (L, L1, L2 of the centre, then of the other frame,
// level by level)
std::vector<int32_t> cpu_shifts(const Case &c, const std::vector<float> &xc, const std::vector<float> &xo,
                                std::vector<float> *work) {
    std::vector<int32_t> ref((size_t)(c.H / c.t) * (c.W / c.t) * 2);
    work->assign(cpu::block_match_work_floats(c.H / 2, c.W / 2), 0.f);
    EXPECT_EQ(0, cpu::block_match(xc.data(), xo.data(), c.H / 2, c.W / 2, c.R, c.t, ref.data(), work->data()));
    return ref;
}

// every shift of got equal to ref's; prints the counts
void compare_shifts(const char *name, const std::vector<int32_t> &got, const std::vector<int32_t> &ref) {
    size_t differ = 0, nonzero = 0;
    for (size_t i = 0; i < ref.size(); i += 2) {
        if (got[i] != ref[i] || got[i + 1] != ref[i + 1]) {
            if (differ < 5)
                ADD_FAILURE() << name << ", tile " << i / 2 << ": (" << got[i] << ", " << got[i + 1] << "), CPU ("
                              << ref[i] << ", " << ref[i + 1] << ")";
            ++differ;
        }
        nonzero += ref[i] || ref[i + 1];
    }
    EXPECT_EQ(0u, differ) << name << ": of " << ref.size() / 2 << " tiles";
    std::printf("  %s: %zu tiles, %zu with a non-zero shift, %zu differ\n", name, ref.size() / 2, nonzero, differ);
}

void check_case(const Case &c, const std::vector<float> &fc, const std::vector<float> &fo) {
    SCOPED_TRACE(c.name);
    const std::vector<float> xc = to_s2d(fc, c.H, c.W), xo = to_s2d(fo, c.H, c.W);
    std::vector<float> work;
    const std::vector<int32_t> ref = cpu_shifts(c, xc, xo, &work);
    const std::vector<float> pc = pyramid_of(xc, c.H, c.W), po = pyramid_of(xo, c.H, c.W);
    const size_t n0 = (size_t)c.H * c.W, n1 = n0 / 4, n2 = n0 / 16;
    EXPECT_EQ(0, std::memcmp(pc.data(), work.data(), n0 * 4)) << "L (centre)";
    EXPECT_EQ(0, std::memcmp(pc.data() + n0, work.data() + 2 * n0, n1 * 4)) << "L1 (centre)";
    EXPECT_EQ(0, std::memcmp(pc.data() + n0 + n1, work.data() + 2 * n0 + 2 * n1, n2 * 4)) << "L2 (centre)";
    EXPECT_EQ(0, std::memcmp(po.data() + n0 + n1, work.data() + 2 * n0 + 2 * n1 + n2, n2 * 4)) << "L2 (other)";
    compare_shifts(c.name, run_emulated(pc, {po}, c.H, c.W, c.R, c.t)[0], ref);
}

// One launch of every frame of `others` (planar) against `centre`: each pair's shifts equal to the
// CPU's for that pair alone.
void check_batched(const Case &c, const std::vector<float> &centre, const std::vector<std::vector<float>> &others) {
    SCOPED_TRACE(c.name);
    const std::vector<float> xc = to_s2d(centre, c.H, c.W);
    std::vector<std::vector<float>> po;
    std::vector<std::vector<int32_t>> ref;
    std::vector<float> work;
    for (const std::vector<float> &f : others) {
        const std::vector<float> xo = to_s2d(f, c.H, c.W);
        ref.push_back(cpu_shifts(c, xc, xo, &work));
        po.push_back(pyramid_of(xo, c.H, c.W));
    }
    const std::vector<std::vector<int32_t>> got = run_emulated(pyramid_of(xc, c.H, c.W), po, c.H, c.W, c.R, c.t);
    for (size_t k = 0; k < others.size(); ++k) {
        const std::string name = std::string(c.name) + ", pair " + std::to_string(k) + " of " + std::to_string(others.size());
        compare_shifts(name.c_str(), got[k], ref[k]);
    }
}

// planar frame of four luma levels in blocks of 4 px (many candidates share the least cost
// exactly), and the same moved by (2, -4) px
void quantised_pair(int H, int W, std::mt19937 &rng, std::vector<float> *f, std::vector<float> *o) {
    std::uniform_int_distribution<int> lv(0, 3);
    f->assign((size_t)3 * H * W, 0.f);
    o->assign(f->size(), 0.f);
    std::vector<int> blocks((size_t)(H / 4) * (W / 4));
    for (int &b : blocks) b = lv(rng);
    for (int ch = 0; ch < 3; ++ch)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                (*f)[((size_t)ch * H + y) * W + x] = blocks[(y / 4) * (W / 4) + x / 4] * 0.5f - 0.75f;
                const int yy = std::min(y + 2, H - 1), xx = std::max(x - 4, 0);
                (*o)[((size_t)ch * H + y) * W + x] = blocks[(yy / 4) * (W / 4) + xx / 4] * 0.5f - 0.75f;
            }
}

TEST(BlockMatchEmu, MovingTexture) {
    std::mt19937 rng(71);
    const Case cases[] = {{"R 24, tile 64, 256x192", 192, 256, 24, 64},
                          {"R 8, tile 32, 128x160", 128, 160, 8, 32},
                          {"R 5, tile 16, 80x48", 48, 80, 5, 16},
                          {"R 0, tile 8, 40x24", 24, 40, 0, 8},
                          {"R 12, tile 24, 120x72", 72, 120, 12, 24}};
    for (const Case &c : cases) {
        const std::vector<float> f = textured(c.H, c.W, rng);
        std::vector<float> o = tile_moved(f, c.H, c.W, c.t, c.R + 3, 0.f, rng);  // beyond R: the final clamp acts
        add_noise(o, 0.1f, rng);
        check_case(c, f, o);
    }
}

TEST(BlockMatchEmu, FlatFrameTies) {
    const Case c = {"flat, R 24, tile 64", 128, 192, 24, 64};
    std::vector<float> f((size_t)3 * c.H * c.W, 0.25f);
    check_case(c, f, f);
}

TEST(BlockMatchEmu, QuantisedTies) {
    std::mt19937 rng(5);
    const Case c = {"quantised, R 24, tile 16", 64, 64, 24, 16};
    std::vector<float> f, o;
    quantised_pair(c.H, c.W, rng, &f, &o);
    check_case(c, f, o);
}

// One launch over the pairs of a window: 8 (every pair slot of a launch; 20 tiles, a last group of
// 2) and 4 (R 24, tile 64; 15 tiles) against one centre.
TEST(BlockMatchEmu, BatchedPairs) {
    std::mt19937 rng(37);
    {
        const Case c = {"8 pairs, R 8, tile 32, 160x128", 128, 160, 8, 32};
        const std::vector<float> f = textured(c.H, c.W, rng);
        std::vector<std::vector<float>> o;
        for (int smax : {2, 5, 11, 9, 1}) {  // 11: beyond R, the final clamp
            o.push_back(tile_moved(f, c.H, c.W, c.t, smax, 0.f, rng));
            add_noise(o.back(), 0.05f, rng);
        }
        o.push_back(f);  // the centre itself: every tile (0, 0) by the nearest-first rule
        o.push_back(std::vector<float>(f.size(), 0.25f));
        std::vector<float> q, qm;
        quantised_pair(c.H, c.W, rng, &q, &qm);
        o.push_back(qm);
        check_batched(c, f, o);
    }
    {
        const Case c = {"4 pairs, R 24, tile 64, 320x192", 192, 320, 24, 64};
        const std::vector<float> f = textured(c.H, c.W, rng);
        std::vector<std::vector<float>> o;
        for (int smax : {27, 3, 14}) {
            o.push_back(tile_moved(f, c.H, c.W, c.t, smax, 0.f, rng));
            add_noise(o.back(), 0.1f, rng);
        }
        o.push_back(f);
        check_batched(c, f, o);
    }
}

}  // namespace
