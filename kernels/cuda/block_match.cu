// luma_pyramid and block_match: per-tile whole-pixel motion of one frame against another (model
// option `align`'s estimation, weights/denoise_train/align.py tile_shifts), the GPU twin of kernels/cpu/
// block_match.cpp with the same shifts on every tile, ties included.
//
// Math: L = ((R' + G' + B') / 3 of the fp32 network input x, written by frame_in before its bf16
// rounding; L1 and L2 = 2x2 and 4x4 box means of L (L2 of L, not of L1: avg_pool2d(L, 4)), each
// the fp32 sum of its window in row-major order from 0, divided by the area. Per tile of the
// centre frame three searches of the least cost mean |Lc(p) - Lo(clamp(p + s))| over the tile
// (reads clamped to the level's edge): on L2 over +-ceil(R/4) (tiles of tile/4), on L1 over +-1
// around twice that (tile/2), on L over +-1 around twice that (tile); clamped to [-R, R].
// Candidates in align.py's order, nearest first by |dy| + |dx|, then dy, then dx; a later one
// must be strictly better. Each candidate's cost is one fp32 sum over the tile in row-major
// order by one thread, divided by the area: the CPU's value bit for bit. A warp owns a tile,
// lane l the candidates l, l + 32, ... of the raster order; each lane keeps its least (cost,
// rank), rank = (|dy| + |dx|, dy, dx) in that order, and a butterfly of shuffles gives every lane
// the least pair of the warp: the first minimum in candidate order, as the sequential search.
// Luma is finite (frame_in sanitises float samples), so no NaN cost breaks the order.
// Traffic: luma_pyramid reads L once and writes L1 and L2 (1.31 x 4 B per pixel in all);
// block_match reads per tile (2 ceil(R/4) + 1)^2 candidates x (tile/4)^2 L2 samples and 9 x
// (tile/2)^2 L1 and 9 x tile^2 L samples of each frame, from L1/L2 caches mostly (a tile's
// window is a few tens of KB): at R 24, tile 64, 1920 x 1088 (510 tiles) about 45 M sample pairs,
// 360 MB of cache reads, latency-bound on the sequential sums (4,096 dependent adds per lane at
// the finest level; their reads are issued kBatch at a time ahead of the adds, tile_cost). With
// one read per add (H200, 2026-12-05) a pair took 0.34 ms at 960x540 and at 1920x1080 alike (one
// warp's chain of about 6,700 steps at ~90 cycles each, an L2 latency) and 0.54 ms at 3840x2160;
// batched: not yet timed.
// Layout: a luma pyramid is L (H, W), then L1 (H/2, W/2), then L2 (H/4, W/4), fp32, contiguous.
// sm_90 (nvcc 13.0 -Xptxas -v): block_match_kernel 40 registers, luma_pyramid_kernel 27, no
// spills, no stack.
// The body (block_match_dev::match_tile) is written against warp_mma.h so that
// tests/emu/block_match_emu_test.cpp runs this source on the CPU warp emulator.
#include "warp_mma.h"

#include <cstddef>
#include <cstdint>

namespace denoise {
namespace cuda {
namespace block_match_dev {

constexpr int kWarps = 4;  // tiles per CTA
constexpr int kThreads = 32 * kWarps;

struct Args {
    const float *centre, *other;  // luma pyramids
    int H, W;                     // full-resolution size
    int radius, tile;             // R; tile side (px, a multiple of 4 dividing H and W)
    int tw, tiles;                // tiles per row, tiles in all
    int32_t *shifts;              // (H / tile, W / tile, 2)
};

DN_DEVI int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

#if defined(DENOISE_WARP_EMULATION)
inline float add_rn(float a, float b) { return a + b; }
inline float div_rn(float a, float b) { return a / b; }
inline float absdiff(float a, float b) { return std::fabs(a - b); }
#else
DN_DEVI float add_rn(float a, float b) { return __fadd_rn(a, b); }
DN_DEVI float div_rn(float a, float b) { return __fdiv_rn(a, b); }
DN_DEVI float absdiff(float a, float b) { return fabsf(__fsub_rn(a, b)); }
#endif

// L1 pixel (y, x) of an H x W luma, and L2 pixel (y/2, x/2) when y and x are even, in pyramid p.
DN_DEVI void pyramid_pixel(float *p, int H, int W, int y, int x) {
    const float *L = p;
    float *L1 = p + (size_t)H * W, *L2 = L1 + (size_t)(H / 2) * (W / 2);
    float s = 0.f;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) s = add_rn(s, L[(size_t)(2 * y + i) * W + 2 * x + j]);
    L1[(size_t)y * (W / 2) + x] = div_rn(s, 4.f);
    if ((y | x) & 1) return;
    const int y2 = y / 2, x2 = x / 2;
    s = 0.f;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) s = add_rn(s, L[(size_t)(4 * y2 + i) * W + 4 * x2 + j]);
    L2[(size_t)y2 * (W / 4) + x2] = div_rn(s, 16.f);
}

// Sum of |lc(p) - lo(clamp(p + (sy, sx)))| over the t x t tile at (y0, x0) of an h x w level,
// sequential row-major, then / t^2 (kernels/cpu/block_match.cpp tile_sad and search). The reads
// go in batches of kBatch pairs into registers ahead of their adds, so that a batch's loads are in
// flight together (each lane reads its own candidate's rows, mostly from L2: one load at a time
// would put an L2 latency on every one of the sum's tile^2 steps); the adds keep their order.
constexpr int kBatch = 8;
DN_DEVI float tile_cost(const float *lc, const float *lo, int h, int w, int y0, int x0, int t, int sy, int sx) {
    float sum = 0.f;
    for (int y = y0; y < y0 + t; ++y) {
        const float *c = lc + (size_t)y * w;
        const float *o = lo + (size_t)clampi(y + sy, 0, h - 1) * w;
        int x = x0;
        for (; x + kBatch <= x0 + t; x += kBatch) {
            float cv[kBatch], ov[kBatch];
            DN_UNROLL
            for (int k = 0; k < kBatch; ++k) {
                cv[k] = c[x + k];
                ov[k] = o[clampi(x + k + sx, 0, w - 1)];
            }
            DN_UNROLL
            for (int k = 0; k < kBatch; ++k) sum = add_rn(sum, absdiff(cv[k], ov[k]));
        }
        for (; x < x0 + t; ++x) sum = add_rn(sum, absdiff(c[x], o[clampi(x + sx, 0, w - 1)]));
    }
    return div_rn(sum, (float)(t * t));
}

// One level: every lane the candidates (dy, dx), |dy|, |dx| <= r, of raster index lane, lane + 32,
// ...; the warp's least (cost, rank) to every lane; (by, bx) += that candidate.
DN_DEVI void search(const float *lc, const float *lo, int h, int w, int y0, int x0, int t, int r, int lane, int &by,
                    int &bx) {
    const int n = 2 * r + 1;
    float best = 0.f, key = 0.f;
    bool any = false;
    for (int i = lane; i < n * n; i += 32) {
        const int dy = i / n - r, dx = i % n - r;
        const float cost = tile_cost(lc, lo, h, w, y0, x0, t, by + dy, bx + dx);
        // rank (|dy| + |dx|, dy, dx) as one exact integer in a float (< 2^24: r <= 16)
        const int d = (dy < 0 ? -dy : dy) + (dx < 0 ? -dx : dx);
        const float k = (float)((d * n + dy + r) * n + dx + r);
        if (!any || cost < best || (cost == best && k < key)) {
            best = cost;
            key = k;
            any = true;
        }
    }
    if (!any) {  // lanes without candidates lose every comparison
        best = __builtin_inff();
        key = 1e30f;
    }
    for (int m = 16; m > 0; m >>= 1) {
        const float ob = warp::shfl_xor(best, m), ok = warp::shfl_xor(key, m);
        if (ob < best || (ob == best && ok < key)) {
            best = ob;
            key = ok;
        }
    }
    const int k = (int)key;
    by += (k / n) % n - r;
    bx += k % n - r;
}

// Tile `tile_i` (row-major over the frame's tiles) by the warp whose lane this is; lane 0 stores.
DN_DEVI void match_tile(const Args &a, int tile_i, int lane) {
    if (tile_i >= a.tiles) return;
    const int H = a.H, W = a.W, t = a.tile;
    const int ty = tile_i / a.tw, tx = tile_i % a.tw;
    const size_t n0 = (size_t)H * W, n1 = n0 / 4;
    int sy = 0, sx = 0;
    search(a.centre + n0 + n1, a.other + n0 + n1, H / 4, W / 4, ty * (t / 4), tx * (t / 4), t / 4, (a.radius + 3) / 4,
           lane, sy, sx);
    sy *= 2;
    sx *= 2;
    search(a.centre + n0, a.other + n0, H / 2, W / 2, ty * (t / 2), tx * (t / 2), t / 2, 1, lane, sy, sx);
    sy *= 2;
    sx *= 2;
    search(a.centre, a.other, H, W, ty * t, tx * t, t, 1, lane, sy, sx);
    if (lane == 0) {
        a.shifts[2 * tile_i] = clampi(sy, -a.radius, a.radius);
        a.shifts[2 * tile_i + 1] = clampi(sx, -a.radius, a.radius);
    }
}

}  // namespace block_match_dev
}  // namespace cuda
}  // namespace denoise

#if !defined(DENOISE_WARP_EMULATION)

#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

__global__ void luma_pyramid_kernel(float *p, int H, int W) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int w1 = W / 2;
    if (i >= (int64_t)(H / 2) * w1) return;
    block_match_dev::pyramid_pixel(p, H, W, (int)(i / w1), (int)(i % w1));
}

__global__ void __launch_bounds__(block_match_dev::kThreads) block_match_kernel(const block_match_dev::Args a) {
    block_match_dev::match_tile(a, blockIdx.x * block_match_dev::kWarps + threadIdx.x / 32, threadIdx.x % 32);
}

}  // namespace

size_t luma_pyramid_floats(int H, int W) {
    const size_t n = (size_t)H * W;
    return n + n / 4 + n / 16;
}

int luma_pyramid(Ctx &ctx, float *pyr, int H, int W) {
    DN_REQUIRE(pyr, "null pointer");
    DN_REQUIRE(H >= 4 && W >= 4 && H % 4 == 0 && W % 4 == 0,
               "luma " + std::to_string(W) + "x" + std::to_string(H) + " not a multiple of 4");
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)(H / 2) * (W / 2), 256, &blocks), "grid too large");
    luma_pyramid_kernel<<<blocks, 256, 0, ctx.stream>>>(pyr, H, W);
    return launch_check(ctx, "luma_pyramid_kernel");
}

int block_match(Ctx &ctx, const float *centre, const float *other, int H, int W, int radius, int tile,
                int32_t *shifts) {
    DN_REQUIRE(centre && other && shifts, "null pointer");
    DN_REQUIRE(radius >= 0 && radius <= 64, "radius " + std::to_string(radius) + " outside 0..64");
    DN_REQUIRE(tile >= 4 && tile % 4 == 0 && H > 0 && W > 0 && H % tile == 0 && W % tile == 0,
               "tile " + std::to_string(tile) + " (a multiple of 4) does not divide " + std::to_string(W) + "x" +
                   std::to_string(H));
    block_match_dev::Args a;
    a.centre = centre;
    a.other = other;
    a.H = H;
    a.W = W;
    a.radius = radius;
    a.tile = tile;
    a.tw = W / tile;
    a.tiles = (H / tile) * a.tw;
    a.shifts = shifts;
    unsigned blocks;
    DN_REQUIRE(grid_1d(a.tiles, block_match_dev::kWarps, &blocks), "grid too large");
    block_match_kernel<<<blocks, block_match_dev::kThreads, 0, ctx.stream>>>(a);
    return launch_check(ctx, "block_match_kernel");
}

}  // namespace cuda
}  // namespace denoise

#endif
