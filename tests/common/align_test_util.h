// Test inputs for model v2's alignment (block_match_emu_test, the GPU align check): a planar (3, H, W)
// frame moved per t x t tile by whole-pixel shifts drawn uniformly from [-smax, smax] (reads
// clamped to the frame, as weights/denoise_train/align.py's shift_tiles), plus uniform noise in [-a, a] when
// a > 0. The shifts are drawn first, then the noise, from g.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

inline std::vector<float> tile_moved(const std::vector<float> &f, int H, int W, int t, int smax, float a,
                                     std::mt19937 &g) {
    std::uniform_int_distribution<int> d(-smax, smax);
    std::uniform_real_distribution<float> u(-a, a);
    const int tw = W / t;
    std::vector<int> s((size_t)(H / t) * tw * 2);
    for (int &v : s) v = d(g);
    std::vector<float> o(f.size());
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const int k = (y / t) * tw + x / t;
                const int yy = std::min(std::max(y + s[2 * k], 0), H - 1), xx = std::min(std::max(x + s[2 * k + 1], 0), W - 1);
                o[((size_t)c * H + y) * W + x] = f[((size_t)c * H + yy) * W + xx] + (a > 0 ? u(g) : 0.f);
            }
    return o;
}
