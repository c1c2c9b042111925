// The CPU block matching of model option `align` (kernels/cpu/block_match.cpp, weights/denoise_train/align.py
// tile_shifts), mirroring tests/weights/check_align.py: a smoothed random frame moved by known per-tile
// shifts (|s| <= 20, R 24, tile 64, 256x256) found exactly on every inner tile, clean and with
// noise; a flat frame kept at shift 0; bad arguments refused; on mirrored pairs (ties in exact
// arithmetic) the winner the documented summation order gives (the mean of the row means).
//
// `block_match_test --ref IN OUT` is the driver of tests/block_match_ref.sh (the cross-check
// against align.py): IN holds int32 n, then n cases of int32 H, W, radius, tile and the centre and
// other frames as float32 (3, H, W) planar R'G'B' in [-1, 1]; OUT gets one line per case, the
// shifts (dy dx per tile, row-major) or "error CODE".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "align_test_util.h"
#include "cpu/ops.h"
#include "denoise.h"

namespace cpu = denoise::cpu;

namespace {

struct Planar {  // (3, H, W) R'G'B' in [-1, 1]
    int H, W;
    std::vector<float> v;
    Planar(int h, int w, float fill = 0.f) : H(h), W(w), v((size_t)3 * h * w, fill) {}
    float &at(int c, int y, int x) { return v[((size_t)c * H + y) * W + x]; }
    float at(int c, int y, int x) const { return v[((size_t)c * H + y) * W + x]; }
};

// tests/weights/check_align.py's textured(): uniform [-1, 1] noise, 3x3 mean with zero padding
Planar textured(int H, int W, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    Planar r(H, W), o(H, W);
    for (float &x : r.v) x = u(rng);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                float s = 0.f;
                for (int i = -1; i <= 1; ++i)
                    for (int j = -1; j <= 1; ++j)
                        if (y + i >= 0 && y + i < H && x + j >= 0 && x + j < W) s += r.at(c, y + i, x + j);
                o.at(c, y, x) = s / 9.f;
            }
    return o;
}

// align.py's shift_tiles: out(p) = f(clamp(p + s_tile(p))), s (H/t, W/t, 2)
Planar shift_tiles(const Planar &f, const std::vector<int> &s, int t) {
    Planar o(f.H, f.W);
    const int tw = f.W / t;
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < f.H; ++y)
            for (int x = 0; x < f.W; ++x) {
                const int k = (y / t) * tw + x / t;
                const int yy = std::min(std::max(y + s[2 * k], 0), f.H - 1);
                const int xx = std::min(std::max(x + s[2 * k + 1], 0), f.W - 1);
                o.at(c, y, x) = f.at(c, yy, xx);
            }
    return o;
}

// planar -> the engine's network input: NHWC (H/2, W/2, 12), channel c*4 + dy*2 + dx
std::vector<float> to_s2d(const Planar &f) {
    std::vector<float> hwc((size_t)f.H * f.W * 3), out(hwc.size());
    for (int y = 0; y < f.H; ++y)
        for (int x = 0; x < f.W; ++x)
            for (int c = 0; c < 3; ++c) hwc[((size_t)y * f.W + x) * 3 + c] = f.at(c, y, x);
    cpu::s2d_nhwc(hwc.data(), f.H, f.W, 3, out.data());
    return out;
}

int match(const Planar &centre, const Planar &other, int radius, int tile, std::vector<int32_t> &shifts) {
    const int h2 = centre.H / 2, w2 = centre.W / 2;
    std::vector<float> c = to_s2d(centre), o = to_s2d(other), work(cpu::block_match_work_floats(h2, w2));
    shifts.assign((size_t)2 * std::max(centre.H / tile, 0) * std::max(centre.W / tile, 0), 0);
    return cpu::block_match(c.data(), o.data(), h2, w2, radius, tile, shifts.data(), work.data());
}

Planar add_noise(const Planar &f, float sigma, std::mt19937 &rng) {
    std::normal_distribution<float> n(0.f, sigma);
    Planar o = f;
    for (float &x : o.v) x += n(rng);
    return o;
}

TEST(BlockMatch, KnownShiftsInnerTilesExact) {
    std::mt19937 rng(0);
    const int N = 256, t = 64, tn = N / t;
    for (int rep = 0; rep < 2; ++rep) {
        Planar img = textured(N, N, rng);
        std::uniform_int_distribution<int> d(-20, 20);
        std::vector<int> truth(2 * tn * tn), neg(truth.size());
        for (size_t i = 0; i < truth.size(); ++i) truth[i] = d(rng), neg[i] = -truth[i];
        Planar moved = shift_tiles(img, neg, t);  // moved(p) = img(p - s): a block matches img at s
        for (int noisy = 0; noisy < 2; ++noisy) {
            std::vector<int32_t> est;
            const Planar a = noisy ? add_noise(img, 0.08f, rng) : img;
            const Planar b = noisy ? add_noise(moved, 0.08f, rng) : moved;
            ASSERT_EQ(match(a, b, 24, t, est), 0);
            for (int ty = 1; ty < tn - 1; ++ty)
                for (int tx = 1; tx < tn - 1; ++tx) {
                    const int k = ty * tn + tx;
                    EXPECT_EQ(est[2 * k], truth[2 * k]) << "rep " << rep << " noisy " << noisy << " tile " << ty << "," << tx;
                    EXPECT_EQ(est[2 * k + 1], truth[2 * k + 1]) << "rep " << rep << " noisy " << noisy << " tile " << ty << "," << tx;
                }
        }
    }
}

TEST(BlockMatch, FlatFrameKeepsZero) {
    Planar flat(128, 192, 0.3f);
    for (int tile : {16, 32, 64}) {
        std::vector<int32_t> est;
        ASSERT_EQ(match(flat, flat, 24, tile, est), 0);
        for (int32_t s : est) EXPECT_EQ(s, 0) << "tile " << tile;
    }
}

TEST(BlockMatch, RadiusBoundsTheShift) {
    // a uniform shift of (9, -11) with radius 4: every tile's result stays within [-4, 4]
    std::mt19937 rng(1);
    Planar img = textured(128, 128, rng);
    std::vector<int> s(2 * 4, 0);
    for (int k = 0; k < 4; ++k) s[2 * k] = -9, s[2 * k + 1] = 11;
    Planar moved = shift_tiles(img, s, 64);
    std::vector<int32_t> est;
    ASSERT_EQ(match(img, moved, 4, 64, est), 0);
    for (int32_t v : est) EXPECT_LE(std::abs(v), 4);
    ASSERT_EQ(match(img, moved, 0, 64, est), 0);
    for (int32_t v : est) EXPECT_EQ(v, 0);
}

// luma of a planar gray frame (R' = G' = B') as block_match forms it from the s2d input
std::vector<float> gray_luma(const std::vector<float> &planar, int H, int W) {
    std::vector<float> L((size_t)H * W);
    for (size_t i = 0; i < L.size(); ++i) L[i] = ((planar[i] + planar[i]) + planar[i]) / 3.f;
    return L;
}

// The cost of candidate (sy, sx) for the t x t tile at (y0, x0) as block_match.cpp's header
// defines it, the mean of the row means (each row summed in order and divided by t, then the row
// means likewise), with the rows (flip_rows) or each row's samples (flip_cols) taken in reverse.
float documented_cost(const std::vector<float> &Lc, const std::vector<float> &Lo, int H, int W, int y0, int x0, int t,
                      int sy, int sx, bool flip_rows, bool flip_cols) {
    float sum = 0.f;
    for (int i = 0; i < t; ++i) {
        const int y = y0 + (flip_rows ? t - 1 - i : i);
        float row = 0.f;
        for (int k = 0; k < t; ++k) {
            const int x = x0 + (flip_cols ? t - 1 - k : k);
            const int yy = std::min(std::max(y + sy, 0), H - 1), xx = std::min(std::max(x + sx, 0), W - 1);
            row += std::abs(Lc[(size_t)y * W + x] - Lo[(size_t)yy * W + xx]);
        }
        sum += row / (float)t;
    }
    return sum / (float)t;
}

// The summation order decides: on align_test_util.h's mirrored pairs the candidates -1 and +1
// along the axis have equal costs in exact arithmetic. Every tile away from the frame's edges
// along the axis ends at one of them, the one whose cost in the documented order is less (-1 on
// a tie: the nearest-first order); and the order has to matter for this to test it: with the
// rows (axis 0) or each row (axis 1) summed in reverse, the winner changes on some tiles.
TEST(BlockMatch, MirroredTilesFollowTheSummationOrder) {
    std::mt19937 rng(3);
    const int H = 192, W = 256;
    for (int axis = 0; axis < 2; ++axis)
        for (int t : {16, 64}) {
            std::vector<float> c, o;
            mirrored_pair(H, W, t, axis, rng, &c, &o);
            Planar pc(H, W), po(H, W);
            pc.v = c;
            po.v = o;
            std::vector<int32_t> est;
            ASSERT_EQ(match(pc, po, 4, t, est), 0);
            const std::vector<float> Lc = gray_luma(c, H, W), Lo = gray_luma(o, H, W);
            const int th = H / t, tw = W / t;
            int checked = 0, flips = 0;
            for (int ty = 0; ty < th; ++ty)
                for (int tx = 0; tx < tw; ++tx) {
                    if ((axis ? tx : ty) == 0 || (axis ? tx == tw - 1 : ty == th - 1)) continue;
                    const int k = ty * tw + tx, ey = axis ? 0 : 1, ex = axis ? 1 : 0;
                    auto cost = [&](int sgn, bool flip) {
                        return documented_cost(Lc, Lo, H, W, ty * t, tx * t, t, sgn * ey, sgn * ex, flip && !axis,
                                               flip && axis);
                    };
                    const int want = cost(+1, false) < cost(-1, false) ? 1 : -1;
                    const int flipped = cost(+1, true) < cost(-1, true) ? 1 : -1;
                    const std::string where = "axis " + std::to_string(axis) + ", tile " + std::to_string(t) + " (" +
                                              std::to_string(ty) + ", " + std::to_string(tx) + ")";
                    EXPECT_EQ(est[2 * k], want * ey) << where;
                    EXPECT_EQ(est[2 * k + 1], want * ex) << where;
                    ++checked;
                    flips += flipped != want;
                }
            std::printf("  axis %d, tile %d: %d tiles, %d won by the other candidate in reverse order\n", axis, t, checked,
                        flips);
            EXPECT_GT(flips, 0) << "axis " << axis << " tile " << t << ": the order decided no tile";
        }
}

TEST(BlockMatch, BadArguments) {
    std::vector<float> f((size_t)32 * 32 * 12), work(cpu::block_match_work_floats(32, 32));
    std::vector<int32_t> s(2 * 64);
    EXPECT_EQ(cpu::block_match(f.data(), f.data(), 32, 32, 8, 6, s.data(), work.data()), DENOISE_EINVAL);   // tile % 4
    EXPECT_EQ(cpu::block_match(f.data(), f.data(), 32, 32, 8, 24, s.data(), work.data()), DENOISE_EINVAL);  // 64 % 24
    EXPECT_EQ(cpu::block_match(f.data(), f.data(), 32, 32, -1, 16, s.data(), work.data()), DENOISE_EINVAL);
    EXPECT_EQ(cpu::block_match(f.data(), f.data(), 32, 32, 8, 0, s.data(), work.data()), DENOISE_EINVAL);
    EXPECT_EQ(cpu::block_match(nullptr, f.data(), 32, 32, 8, 16, s.data(), work.data()), DENOISE_EINVAL);
    EXPECT_EQ(cpu::block_match(f.data(), f.data(), 32, 32, 8, 16, s.data(), work.data()), 0);
}

// --ref IN OUT (tests/block_match_ref.sh)
int ref_mode(const char *in_path, const char *out_path) {
    FILE *in = std::fopen(in_path, "rb");
    FILE *out = std::fopen(out_path, "w");
    if (!in || !out) {
        std::fprintf(stderr, "block_match_test --ref: cannot open %s or %s\n", in_path, out_path);
        return 2;
    }
    int32_t n = 0;
    if (std::fread(&n, 4, 1, in) != 1) return 2;
    for (int32_t i = 0; i < n; ++i) {
        int32_t hdr[4];
        if (std::fread(hdr, 4, 4, in) != 4) return 2;
        const int H = hdr[0], W = hdr[1], R = hdr[2], t = hdr[3];
        Planar c(H, W), o(H, W);
        if (std::fread(c.v.data(), 4, c.v.size(), in) != c.v.size() ||
            std::fread(o.v.data(), 4, o.v.size(), in) != o.v.size())
            return 2;
        std::vector<int32_t> s;
        const int rc = match(c, o, R, t, s);
        if (rc) {
            std::fprintf(out, "error %d\n", rc);
            continue;
        }
        for (size_t k = 0; k < s.size(); ++k) std::fprintf(out, k ? " %d" : "%d", s[k]);
        std::fprintf(out, "\n");
    }
    std::fclose(in);
    return std::fclose(out) == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc == 4 && std::strcmp(argv[1], "--ref") == 0) return ref_mode(argv[2], argv[3]);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
