// The CUDA block matching (kernels/cuda/block_match.cu: luma_pyramid's per-pixel body and
// block_match's CTA per tile and pair: bands of rows copied to shared memory, row tasks, row means
// summed in row order, the argmin through shuffles and shared memory) run on the CPU through the
// warp emulator (tests/emu/warp_emu.h: the same kernel source, its shuffles and barriers as
// rendezvous of fibers, warps drifting apart between them) against kernels/cpu/block_match.cpp,
// the reference. No GPU needed: this checks the kernel's index math (pyramid levels, bands and
// their running sums, dx chunks and their spare sums, candidate raster and rank encoding, clamped
// reads at the frame's edges, the first-minimum tie rule within a thread and across threads and
// warps, the final clamp, the pair index of the grid), its barriers, and its summation order.
//
// The luma L is formed here as frame_in.cu forms it, ((x_R + x_G) + x_B) / 3 of the fp32 s2d
// input, and both sides get the same s2d frames. Cases: textured frames moved by per-tile shifts
// (odd and even, up to beyond R so that the final clamp acts), plus noise; a flat frame (every
// candidate ties: the nearest-first rule alone decides); frames quantised to a few levels (many
// exact ties between candidates at different distances); a periodic frame (exact ties between a
// thread's candidates 128 apart); mirrored frames whose best two candidates tie in exact
// arithmetic (the summation order decides: the rows' sum, each row's sum); R 24 / tile 64 (the
// full-resolution level in two bands), R 64 / tile 64 (L2 in 8 bands of 2 rows, 33 dx in 5 chunks
// of 7), R 8 / tile 32, R 5 / tile 16, R 0 / tile 8, R 12 / tile 24 and R 3 / tile 12 (level
// sides 24, 12, 6 and 12, 6, 3: means by division, the steps left after the batches of 4), R 2 /
// tile 4 (sides 4, 2, 1); one launch of 8 pairs (every pair slot of the launch) and of 4 against
// one centre: textures moved differently, the centre itself, a flat and a quantised frame.
// Shared memory is poisoned (NaN) before each CTA.
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

// Runs the kernel's CTAs of one launch (a CTA per tile and pair, the launch's shared memory, bands
// planned as block_match plans them) on the emulator: every pyramid of `others` against `pc`;
// returns each pair's shifts.
std::vector<std::vector<int32_t>> run_emulated(const std::vector<float> &pc, const std::vector<std::vector<float>> &others,
                                               int H, int W, int R, int t) {
    bm::Args a{};
    a.centre = pc.data();
    a.H = H;
    a.W = W;
    a.radius = R;
    a.tile = t;
    a.tw = W / t;
    const int tiles = (H / t) * a.tw;
    const int pairs = (int)others.size();
    EXPECT_LE(pairs, bm::kMaxPairs);
    a.pairs = pairs;
    std::vector<uint8_t> smem(bm::plan_bands(a));
    std::vector<std::vector<int32_t>> s(pairs, std::vector<int32_t>((size_t)tiles * 2, INT32_MIN));
    for (int k = 0; k < pairs; ++k) {
        a.other[k] = others[k].data();
        a.shifts[k] = s[k].data();
    }
    for (int cta = 0; cta < tiles * pairs; ++cta) {
        std::fill(smem.begin(), smem.end(), 0xff);  // NaN: a read before its write shows
        warp_emu::run_cta(bm::kThreads, smem.data(), smem.size(), [&](int tid) {
            bm::match_tile(a, reinterpret_cast<float *>(smem.data()), cta % pairs, cta / pairs, tid);
        });
    }
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
                          {"R 12, tile 24, 120x72", 72, 120, 12, 24},
                          {"R 3, tile 12, 48x36", 36, 48, 3, 12},
                          {"R 2, tile 4, 24x16", 16, 24, 2, 4},
                          {"R 64, tile 64, 192x128", 128, 192, 64, 64}};
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

// Exact ties between candidates far apart in the scan order: a frame periodic over 40 rows and 8
// columns (10 and 2 at L2) against itself moved, o(p) = c(p + (-3, 3)). At L2, R 24 (13 x 13 candidates, a
// thread's second candidate 128 = 10 x 13 - 2 after its first), the candidates (dy, dx) and
// (dy + 10, dx - 2) have the same |differences| on tiles away from the frame's edges (equal
// costs, bit for bit): the least rank among the tied least costs must win, within a thread's
// candidates as across threads.
TEST(BlockMatchEmu, PeriodicTies) {
    std::mt19937 rng(13);
    const Case c = {"periodic 40 x 8, R 24, tile 64", 256, 320, 24, 64};
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> period(3 * 40 * 8), f((size_t)3 * c.H * c.W), o(f.size());
    for (float &v : period) v = u(rng);
    for (int ch = 0; ch < 3; ++ch)
        for (int y = 0; y < c.H; ++y)
            for (int x = 0; x < c.W; ++x) {
                f[((size_t)ch * c.H + y) * c.W + x] = period[(ch * 40 + y % 40) * 8 + x % 8];
                o[((size_t)ch * c.H + y) * c.W + x] = period[(ch * 40 + (y + 37) % 40) * 8 + (x + 3) % 8];
            }
    check_case(c, f, o);
}

// Ties in exact arithmetic that only the summation order decides (align_test_util.h's
// mirrored_pair): the rows' sum (axis 0) and each row's sum (axis 1), at tile 16 (one band a
// level), 24 (means by division: no level's side a power of two) and 64 (the full-resolution
// level in two bands).
TEST(BlockMatchEmu, MirroredTiesFollowTheSummationOrder) {
    std::mt19937 rng(11);
    const Case cases[] = {{"mirrored rows, R 4, tile 16", 192, 256, 4, 16},
                          {"mirrored rows, R 4, tile 24", 192, 240, 4, 24},
                          {"mirrored rows, R 4, tile 64", 192, 256, 4, 64},
                          {"mirrored columns, R 4, tile 16", 192, 256, 4, 16},
                          {"mirrored columns, R 4, tile 24", 192, 240, 4, 24},
                          {"mirrored columns, R 4, tile 64", 192, 256, 4, 64}};
    for (int k = 0; k < 6; ++k) {
        const Case &c = cases[k];
        std::vector<float> f, o;
        mirrored_pair(c.H, c.W, c.t, k / 3, rng, &f, &o);
        check_case(c, f, o);
    }
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
