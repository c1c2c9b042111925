// Per-tile whole-pixel block matching of two frames (the estimation half of model option `align`,
// weights/denoise_train/align.py tile_shifts; hierarchical block matching after Bierling, SPIE VCIP 1988).
//
// Math: luma L = (R' + G' + B') / 3 of the network input; box means L1 = 2x2 and L2 = 4x4 means
// of L. Per tile of the centre frame, three searches of the least mean |Lc(p) - Lo(clamp(p + s))|
// over the tile: on L2 over +-ceil(R/4) (tiles of tile/4), on L1 over +-1 around twice that
// (tile/2), on L over +-1 around twice that (tile); clamped to [-R, R]. Candidates nearest-first
// ((|dy| + |dx|), then dy, then dx), a later one must be strictly better.
// Floating point: every value is formed as PyTorch's CPU kernels form it (fp32, same order):
// luma (r + g) + b then / 3; box means summed sequentially in row-major order over the window and
// divided by its area (avg_pool2d's CPU loop); a candidate's tile cost the mean of the tile's row
// means: m_y = (sum over the row's t samples, in order from 0) / t, cost = (sum of m_0 .. m_{t-1}
// in order from 0) / t, as avg_pool2d(avg_pool2d(|d|, (1, t)), (t, 1)) forms it (align.py
// _costs). The blocked order is what lets the GPU twin (kernels/cuda/block_match.cu) sum a
// tile's rows in parallel and still match bit for bit: the longest chain of dependent adds is t
// (a row) + t (the rows), not t^2. Costs compared as those quotients. So the costs are
// bit-identical to align.py's on PyTorch's CPU kernels and ties resolve identically
// (tests/unit/block_match_ref.sh checks both the summation order and the shifts).
// Traffic: one pass over both s2d inputs (12 floats per token) writing L, L1, L2 of each frame
// (2 x 1.31 floats per pixel), then per tile (2 ceil(R/4) + 1)^2 + 18 candidate passes over the
// tile's samples at their level, reading the centre tile and a clamped window of the other frame
// (cache-resident: a tile's window is a few tens of KB). At R = 24 that is about 21 sample reads
// per pixel per frame (align.py's docstring: 45 M candidate samples for a 1080p pair).
#include "denoise.h"
#include "ops.h"
#include "../common/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace denoise {
namespace cpu {

namespace {

struct Cand {
    int dy, dx;
};

// Every (dy, dx) with |dy|, |dx| <= r, ordered as align.py's _candidates.
std::vector<Cand> candidates(int r) {
    std::vector<Cand> c;
    c.reserve((size_t)(2 * r + 1) * (2 * r + 1));
    for (int dy = -r; dy <= r; ++dy)
        for (int dx = -r; dx <= r; ++dx) c.push_back({dy, dx});
    std::stable_sort(c.begin(), c.end(), [](const Cand &a, const Cand &b) {
        const int da = std::abs(a.dy) + std::abs(a.dx), db = std::abs(b.dy) + std::abs(b.dx);
        if (da != db) return da < db;
        if (a.dy != b.dy) return a.dy < b.dy;
        return a.dx < b.dx;
    });
    return c;
}

// Mean over the t x t tile at (y0, x0) of |lc(p) - lo(clamp(p + (sy, sx)))| on an H x W level,
// fp32, as the mean of the row means (each row summed in order from 0 and divided by t, the row
// means summed in order from 0 and divided by t; the header's order).
float tile_cost(const float *lc, const float *lo, int H, int W, int y0, int x0, int t, int sy, int sx) {
    const float side = (float)t;
    float sum = 0.f;
    const bool inside_x = x0 + sx >= 0 && x0 + sx + t <= W;
    for (int y = y0; y < y0 + t; ++y) {
        const float *c = lc + (size_t)y * W;
        const float *o = lo + (size_t)std::clamp(y + sy, 0, H - 1) * W;
        float row = 0.f;
        if (inside_x) {
            const float *os = o + sx;
            for (int x = x0; x < x0 + t; ++x) row += std::abs(c[x] - os[x]);
        } else {
            for (int x = x0; x < x0 + t; ++x) row += std::abs(c[x] - o[std::clamp(x + sx, 0, W - 1)]);
        }
        sum += row / side;
    }
    return sum / side;
}

// base + the candidate of `cands` with the least mean cost for the tile at (y0, x0) (first wins).
void search(const float *lc, const float *lo, int H, int W, int y0, int x0, int t, const std::vector<Cand> &cands,
            int &by, int &bx) {
    float best = 0.f;
    int ky = 0, kx = 0;
    bool first = true;
    for (const Cand &c : cands) {
        const float cost = tile_cost(lc, lo, H, W, y0, x0, t, by + c.dy, bx + c.dx);
        if (first || cost < best) {
            best = cost;
            ky = c.dy;
            kx = c.dx;
            first = false;
        }
    }
    by += ky;
    bx += kx;
}

}  // namespace

size_t block_match_work_floats(int h2, int w2) {
    const size_t n = (size_t)4 * h2 * w2;  // full-resolution samples
    return 2 * (n + n / 4 + n / 16);
}

int block_match(const float *centre, const float *other, int h2, int w2, int radius, int tile, int32_t *shifts,
                float *work) {
    const int H = 2 * h2, W = 2 * w2;
    if (!centre || !other || !shifts || !work || h2 <= 0 || w2 <= 0 || radius < 0 || tile <= 0 || tile % 4 ||
        H % tile || W % tile)
        return DENOISE_EINVAL;
    const size_t n0 = (size_t)H * W, n1 = n0 / 4, n2 = n0 / 16;
    float *L0[2] = {work, work + n0};
    float *L1[2] = {work + 2 * n0, work + 2 * n0 + n1};
    float *L2[2] = {work + 2 * n0 + 2 * n1, work + 2 * n0 + 2 * n1 + n2};
    const float *in[2] = {centre, other};

    // luma at full resolution from the s2d tokens: pixel (Y, X) is token (Y/2, X/2), channel
    // c*4 + (Y&1)*2 + (X&1)
    parallel_for(2 * (int64_t)H, grain_for(2 * (int64_t)H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int f = (int)(r / H), Y = (int)(r % H);
            const float *tok = in[f] + (size_t)(Y / 2) * w2 * 12 + (Y & 1) * 2;
            float *l = L0[f] + (size_t)Y * W;
            for (int X = 0; X < W; ++X) {
                const float *p = tok + (size_t)(X / 2) * 12 + (X & 1);
                l[X] = (p[0] + p[4] + p[8]) / 3.f;
            }
        }
    });
    // box means of L (not of L1: avg_pool2d(L, 4)), rows of L2 / L1 in parallel
    const int H1 = H / 2, W1 = W / 2, H2 = H / 4, W2 = W / 4;
    parallel_for(2 * (int64_t)H1, grain_for(2 * (int64_t)H1), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int f = (int)(r / H1), y = (int)(r % H1);
            const float *l = L0[f];
            float *o = L1[f] + (size_t)y * W1;
            for (int x = 0; x < W1; ++x) {
                float s = 0.f;
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) s += l[(size_t)(2 * y + i) * W + 2 * x + j];
                o[x] = s / 4.f;
            }
            if (y % 2) continue;
            const int y2 = y / 2;
            float *o2 = L2[f] + (size_t)y2 * W2;
            for (int x = 0; x < W2; ++x) {
                float s = 0.f;
                for (int i = 0; i < 4; ++i)
                    for (int j = 0; j < 4; ++j) s += l[(size_t)(4 * y2 + i) * W + 4 * x + j];
                o2[x] = s / 16.f;
            }
        }
    });

    const std::vector<Cand> coarse = candidates((radius + 3) / 4), fine = candidates(1);
    const int th = H / tile, tw = W / tile;
    parallel_for((int64_t)th * tw, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t k = t0; k < t1; ++k) {
            const int ty = (int)(k / tw), tx = (int)(k % tw);
            int sy = 0, sx = 0;
            search(L2[0], L2[1], H2, W2, ty * (tile / 4), tx * (tile / 4), tile / 4, coarse, sy, sx);
            sy *= 2, sx *= 2;
            search(L1[0], L1[1], H1, W1, ty * (tile / 2), tx * (tile / 2), tile / 2, fine, sy, sx);
            sy *= 2, sx *= 2;
            search(L0[0], L0[1], H, W, ty * tile, tx * tile, tile, fine, sy, sx);
            shifts[2 * k] = std::clamp(sy, -radius, radius);
            shifts[2 * k + 1] = std::clamp(sx, -radius, radius);
        }
    });
    return 0;
}

}  // namespace cpu
}  // namespace denoise
