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

// A pair whose best candidates tie in exact arithmetic, for the summation order of block
// matching's costs: planar gray frames c, o (R' = G' = B', so the luma is that value) mirrored
// along `axis` (0: rows, 1: columns) about the centre line of every t x t tile: positions p and
// q with p + q = t - 1 (mod 2t) share one value, drawn uniformly from [-1, 1] per such orbit and
// per position along the other axis; o(p) = (c(p - 1) + c(p + 1)) / 2 along the axis (clamped at
// the frame's edge), mirrored as c is. On a tile away from the frame's edges (along the axis),
// the candidates -1 and +1 along the axis meet the same |differences| in mirrored order (rows
// reversed for axis 0, each row reversed for axis 1), and beat 0 (|c(p) - c(p +- 2)| / 2 against
// |c(p) - (c(p - 1) + c(p + 1)) / 2|): which of the two wins depends on the order of the fp32
// sums alone (axis 0: the sum over the rows; axis 1: each row's sum).
inline void mirrored_pair(int H, int W, int t, int axis, std::mt19937 &g, std::vector<float> *c,
                          std::vector<float> *o) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const int along = axis ? W : H, across = axis ? H : W;
    std::vector<float> orbit((size_t)2 * t * across);  // value of orbit (j, a), j = min(p, t - 1 - p) mod 2t
    for (float &v : orbit) v = u(g);
    auto cv = [&](int p, int a) {  // c at position p along the axis, a across
        p = std::min(std::max(p, 0), along - 1);
        const int j = p % (2 * t), m = ((t - 1 - j) % (2 * t) + 2 * t) % (2 * t);
        return orbit[(size_t)std::min(j, m) * across + a];
    };
    c->assign((size_t)3 * H * W, 0.f);
    o->assign(c->size(), 0.f);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const int p = axis ? x : y, a = axis ? y : x;
            const float vc = cv(p, a), vo = (cv(p - 1, a) + cv(p + 1, a)) / 2.f;
            for (int ch = 0; ch < 3; ++ch) {
                (*c)[((size_t)ch * H + y) * W + x] = vc;
                (*o)[((size_t)ch * H + y) * W + x] = vo;
            }
        }
}
