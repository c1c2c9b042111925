// The per-tile warp of model option `align` (kernels/cpu/shift_tiles.cpp) against a direct
// transcription of weights/denoise_train/align.py's shift_tiles, out(p) = in(clamp(p + s_tile(p))): an NHWC map
// at its own resolution (C 32 and 3, tiles 16 and 32), and the full-resolution frame behind an
// s2d map (odd and even shifts, every tile's clamp at the frame edges), bit-exact; shift 0 is a
// copy; bad arguments refused with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/ops.h"
#include "denoise.h"

namespace cpu = denoise::cpu;

namespace {

std::vector<float> random_map(size_t n, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> v(n);
    for (float &x : v) x = u(rng);
    return v;
}

// (th, tw, 2) shifts in [-r, r], large enough that edge tiles clamp
std::vector<int32_t> random_shifts(int th, int tw, int r, std::mt19937 &rng) {
    std::uniform_int_distribution<int> d(-r, r);
    std::vector<int32_t> s((size_t)th * tw * 2);
    for (int32_t &x : s) x = d(rng);
    return s;
}

// align.py's shift_tiles on an NHWC (h, w, C) map
std::vector<float> reference(const std::vector<float> &in, int h, int w, int C, const std::vector<int32_t> &s, int t) {
    std::vector<float> out(in.size());
    const int tw = w / t;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const int k = (y / t) * tw + x / t;
            const int ys = std::clamp(y + s[2 * k], 0, h - 1), xs = std::clamp(x + s[2 * k + 1], 0, w - 1);
            for (int c = 0; c < C; ++c) out[((size_t)y * w + x) * C + c] = in[((size_t)ys * w + xs) * C + c];
        }
    return out;
}

TEST(ShiftTiles, NhwcMapMatchesTheReference) {
    std::mt19937 rng(3);
    for (int C : {32, 3})
        for (int t : {16, 32}) {
            const int h = 64, w = 96;
            const std::vector<float> in = random_map((size_t)h * w * C, rng);
            const std::vector<int32_t> s = random_shifts(h / t, w / t, 20, rng);
            std::vector<float> out(in.size(), NAN);
            ASSERT_EQ(cpu::shift_tiles(in.data(), h, w, C, s.data(), t, out.data()), 0);
            EXPECT_EQ(std::memcmp(out.data(), reference(in, h, w, C, s, t).data(), out.size() * 4), 0)
                << "C " << C << " tile " << t;
            const std::vector<int32_t> zero(s.size(), 0);
            ASSERT_EQ(cpu::shift_tiles(in.data(), h, w, C, zero.data(), t, out.data()), 0);
            EXPECT_EQ(std::memcmp(out.data(), in.data(), out.size() * 4), 0) << "shift 0 must copy";
        }
}

TEST(ShiftTiles, S2dFrameMovesAtFullResolution) {
    std::mt19937 rng(4);
    const int H = 96, W = 128, h2 = H / 2, w2 = W / 2;
    const std::vector<float> full = random_map((size_t)H * W * 3, rng);  // NHWC (H, W, 3)
    std::vector<float> in((size_t)h2 * w2 * 12), out(in.size(), NAN), want(in.size());
    cpu::s2d_nhwc(full.data(), H, W, 3, in.data());
    for (int t : {32, 16, 4}) {
        const std::vector<int32_t> s = random_shifts(H / t, W / t, 9, rng);
        ASSERT_EQ(cpu::shift_tiles_s2d(in.data(), h2, w2, s.data(), t, out.data()), 0);
        cpu::s2d_nhwc(reference(full, H, W, 3, s, t).data(), H, W, 3, want.data());
        EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * 4), 0) << "tile " << t;
    }
}

TEST(ShiftTiles, BadArguments) {
    std::vector<float> in((size_t)32 * 32 * 12, 0.5f), out(in.size(), 7.f);
    std::vector<int32_t> s(2 * 64, 1);
    EXPECT_EQ(cpu::shift_tiles(in.data(), 32, 32, 12, s.data(), 12, out.data()), DENOISE_EINVAL);  // 32 % 12
    EXPECT_EQ(cpu::shift_tiles(in.data(), 32, 32, 0, s.data(), 16, out.data()), DENOISE_EINVAL);
    EXPECT_EQ(cpu::shift_tiles(in.data(), 32, 32, 12, nullptr, 16, out.data()), DENOISE_EINVAL);
    EXPECT_EQ(cpu::shift_tiles_s2d(in.data(), 32, 32, s.data(), 6, out.data()), DENOISE_EINVAL);  // 64 % 6
    EXPECT_EQ(cpu::shift_tiles_s2d(in.data(), 32, 32, s.data(), 5, out.data()), DENOISE_EINVAL);  // odd
    EXPECT_EQ(cpu::shift_tiles_s2d(in.data(), 0, 32, s.data(), 16, out.data()), DENOISE_EINVAL);
    for (float v : out) ASSERT_EQ(v, 7.f) << "a refused call wrote";
    EXPECT_EQ(cpu::shift_tiles_s2d(in.data(), 32, 32, s.data(), 16, out.data()), 0);
}

}  // namespace
