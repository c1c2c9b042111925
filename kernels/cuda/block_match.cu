// luma_pyramid and block_match: per-tile whole-pixel motion of frames against a centre frame
// (model option `align`'s estimation, weights/denoise_train/align.py tile_shifts), the GPU twin of
// kernels/cpu/block_match.cpp with the same shifts on every tile, ties included; block_match does
// all the pairs of a fusion window (2r frames against its centre) in one launch.
//
// Math: L = ((R' + G' + B') / 3 of the fp32 network input x, written by frame_in before its bf16
// rounding; L1 and L2 = 2x2 and 4x4 box means of L (L2 of L, not of L1: avg_pool2d(L, 4)), each
// the fp32 sum of its window in row-major order from 0, divided by the area. Per tile of the
// centre frame three searches of the least cost mean |Lc(p) - Lo(clamp(p + s))| over the tile
// (reads clamped to the level's edge): on L2 over +-ceil(R/4) (tiles of tile/4), on L1 over +-1
// around twice that (tile/2), on L over +-1 around twice that (tile); clamped to [-R, R].
// Candidates in align.py's order, nearest first by |dy| + |dx|, then dy, then dx; a later one
// must be strictly better. Each candidate's cost is one fp32 sum over the tile in row-major
// order by one thread, divided by the area: the CPU's value bit for bit (the exactness contract:
// no split of a sum over threads, no reassociation; the reads go in batches ahead of the adds,
// the adds stay in order). The grid is (tile groups, pairs); a warp owns kGroup = 3 tiles of one
// pair, and its candidates (the 3 tiles' in turn, each in raster order) go to lanes l, l + 32,
// ...: at the +-1 levels one each, lanes 0-8, 9-17, 18-26 (27 of 32 lanes busy where one tile a
// warp kept 9), on L2 at R 24 3 x 169 over 16 rounds. Each lane keeps per tile its least (cost,
// rank), rank = (|dy| + |dx|, dy, dx) in that order, and per tile a butterfly of shuffles gives
// every lane the least pair of the warp: the first minimum in candidate order, as the sequential
// search. Luma is finite (frame_in sanitises float samples), so no NaN cost breaks the order.
// Traffic: luma_pyramid reads L once and writes L1 and L2 (1.31 x 4 B per pixel in all);
// block_match reads per tile (2 ceil(R/4) + 1)^2 candidates x (tile/4)^2 L2 samples and 9 x
// (tile/2)^2 L1 and 9 x tile^2 L samples of each frame, from L1/L2 caches mostly (a tile's
// window is a few tens of KB): at R 24, tile 64 89,344 sample pairs a tile, for a 3840 x 2176
// window's 4 pairs x 2,040 tiles 729 M (5.8 GB of cache reads).
// Time: one launch per pair (one warp a tile, one read per add; H200, 2026-12-05) took 0.34 ms at
// 960x540 and at 1920x1080 alike and 0.54 ms at 3840x2160: latency-bound, one warp's chain of
// 6,656 sequential steps (L2 6 rounds x 256, L1 1,024, L 4,096) at ~90 cycles each, 2r = 4
// such launches a window; with the reads 8 at a time ahead of the adds 0.330 / 0.507 ms
// (docs/perf.md). This form: not yet timed. Estimate (H100, ~1.75 GHz, 132 SMs), to be measured:
// a 4K window's 4 pairs are 2,720 warps (20.6 a SM, all resident: 72 registers, 28 warps a SM) of
// 9,216 steps each (L2 16 x 256, L1 1,024, L 4,096), a step ~4.75 warp instructions (2 loads,
// 2 FADD, the batch's addressing): ~119 M warp instructions, ~0.13 ms at 4 issues a cycle per SM;
// the L1 cache's tag and data stages ~4 cycles a warp-step on L1 and L (3 centre and 9 to 12
// other-frame lines; 4 tags a cycle), ~2 on L2: ~29 K cycles a warp, ~0.34 ms; a warp's chain
// 9,216 x 4 cycles (reads hidden behind the previous batch's adds) to x ~30 (an L2 miss a batch),
// 20 us to 0.16 ms. So about 0.15 to 0.4 ms for the 4 pairs at 4K, where 4 launches took ~2.0
// ms; at 960x540 (180 warps) the chain, ~0.03 to 0.16 ms.
// Layout: a luma pyramid is L (H, W), then L1 (H/2, W/2), then L2 (H/4, W/4), fp32, contiguous.
// sm_90 (nvcc 13.0 -Xptxas -v): block_match_kernel 72 registers, luma_pyramid_kernel 27, no
// spills, no stack.
// The body (block_match_dev::match_tiles) is written against warp_mma.h so that
// tests/emu/block_match_emu_test.cpp runs this source on the CPU warp emulator.
#include "warp_mma.h"

#include <cstddef>
#include <cstdint>

namespace denoise {
namespace cuda {
namespace block_match_dev {

constexpr int kWarps = 4;      // warps per CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kGroup = 3;      // tiles per warp: 3 x 9 lanes carry the +-1 searches
constexpr int kMaxPairs = 8;   // pairs per launch (block_match splits more into several)

struct Args {
    const float *centre;             // luma pyramid of the centre frame
    const float *other[kMaxPairs];   // luma pyramids of the frames matched against it (grid y)
    int32_t *shifts[kMaxPairs];      // each (H / tile, W / tile, 2)
    int H, W;                        // full-resolution size
    int radius, tile;                // R; tile side (px, a multiple of 4 dividing H and W)
    int tw, tiles;                   // tiles per row, tiles in all
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

// A candidate's sum runs over the tile in batches of kBatch samples of a row; the reads of the
// next batch are issued before the adds of the current one (two register sets in turn), so that a
// read's latency hides behind kBatch dependent adds instead of stalling the chain.
constexpr int kBatch = 8;

// The batches of a t x t tile at (y0, x0) of an h x w level in row-major order, the other frame
// moved by (sy, sx), its rows clamped to [0, h) and, with kClampX, its columns to [0, w) (without:
// every column x0 + sx .. x0 + sx + t - 1 is inside, and a batch's reads take immediate offsets).
template <bool kClampX>
struct BatchCursor {
    const float *lc, *lo;
    int h, w, x0, t, sy, sx;
    int y, x;
    const float *c, *o;
    DN_DEVI void row(int yy) {
        y = yy;
        x = x0;
        c = lc + (size_t)y * w;
        o = lo + (size_t)clampi(y + sy, 0, h - 1) * w;
    }
    DN_DEVI void read(float (&cv)[kBatch], float (&ov)[kBatch]) {
        const float *cp = c + x, *op = o + x + sx;
        DN_UNROLL
        for (int k = 0; k < kBatch; ++k) {
            cv[k] = cp[k];
            ov[k] = kClampX ? o[clampi(x + sx + k, 0, w - 1)] : op[k];
        }
        x += kBatch;
        if (x == x0 + t) row(y + 1);
    }
};

DN_DEVI void add_batch(float &sum, const float (&cv)[kBatch], const float (&ov)[kBatch]) {
    DN_UNROLL
    for (int k = 0; k < kBatch; ++k) sum = add_rn(sum, absdiff(cv[k], ov[k]));
}

// The sum of tile_cost over t x t samples, t a multiple of kBatch, batch b + 1 read before batch
// b is added.
template <bool kClampX>
DN_DEVI float batched_sum(const float *lc, const float *lo, int h, int w, int y0, int x0, int t, int sy, int sx) {
    BatchCursor<kClampX> q{lc, lo, h, w, x0, t, sy, sx, 0, 0, nullptr, nullptr};
    q.row(y0);
    float sum = 0.f, ca[kBatch], oa[kBatch], cb[kBatch], ob[kBatch];
    q.read(ca, oa);
    const int nb = t * (t / kBatch);  // even: t^2 / kBatch with t a multiple of kBatch
    for (int b = 0; b < nb; b += 2) {
        q.read(cb, ob);  // batch b + 1
        add_batch(sum, ca, oa);
        if (b + 2 < nb) q.read(ca, oa);
        add_batch(sum, cb, ob);
    }
    return sum;
}

// Sum of |lc(p) - lo(clamp(p + (sy, sx)))| over the t x t tile at (y0, x0) of an h x w level,
// sequential row-major, then / t^2 (kernels/cpu/block_match.cpp tile_sad and search): the reads
// in batches (t a multiple of kBatch) or one at a time; the adds in the same order either way.
DN_DEVI float tile_cost(const float *lc, const float *lo, int h, int w, int y0, int x0, int t, int sy, int sx) {
    float sum = 0.f;
    if (t % kBatch == 0) {
        sum = x0 + sx >= 0 && x0 + sx + t <= w ? batched_sum<false>(lc, lo, h, w, y0, x0, t, sy, sx)
                                                : batched_sum<true>(lc, lo, h, w, y0, x0, t, sy, sx);
    } else {
        for (int y = y0; y < y0 + t; ++y) {
            const float *c = lc + (size_t)y * w;
            const float *o = lo + (size_t)clampi(y + sy, 0, h - 1) * w;
            for (int x = x0; x < x0 + t; ++x) sum = add_rn(sum, absdiff(c[x], o[clampi(x + sx, 0, w - 1)]));
        }
    }
    return div_rn(sum, (float)(t * t));
}

// One level for the warp's `valid` tiles tile0, tile0 + 1, ... (row-major over the frame's tw
// tiles per row; level tiles of t samples): the warp's candidates i = 0 .. valid n^2 - 1, n = 2r
// + 1, are tile i / n^2's (dy, dx) of raster index i % n^2 around (by, bx) of that tile; lane l
// takes i = l, l + 32, ... (at r = 1 one each: lanes 0-8 tile 0, 9-17 tile 1, 18-26 tile 2).
// Each lane keeps per tile its least (cost, rank), a butterfly of shuffles per tile gives every
// lane the warp's least, and (by, bx) += that candidate for every valid tile.
DN_DEVI void search(const float *lc, const float *lo, int h, int w, int t, int r, int tile0, int tw, int valid,
                    int lane, int (&by)[kGroup], int (&bx)[kGroup]) {
    const int n = 2 * r + 1, nn = n * n;
    float best[kGroup], key[kGroup];
    DN_UNROLL
    for (int g = 0; g < kGroup; ++g) {  // lanes without candidates of a tile lose every comparison
        best[g] = __builtin_inff();
        key[g] = 1e30f;
    }
    for (int i = lane; i < valid * nn; i += 32) {
        const int g = i / nn, ci = i - g * nn;
        const int dy = ci / n - r, dx = ci % n - r;
        int sy = 0, sx = 0;
        DN_UNROLL
        for (int k = 0; k < kGroup; ++k)  // by[g] without a dynamic index into registers
            if (k == g) {
                sy = by[k];
                sx = bx[k];
            }
        const int tile = tile0 + g, ty = tile / tw, tx = tile % tw;
        const float cost = tile_cost(lc, lo, h, w, ty * t, tx * t, t, sy + dy, sx + dx);
        // rank (|dy| + |dx|, dy, dx) as one exact integer in a float (< 2^24: r <= 16)
        const int d = (dy < 0 ? -dy : dy) + (dx < 0 ? -dx : dx);
        const float kr = (float)((d * n + dy + r) * n + dx + r);
        DN_UNROLL
        for (int k = 0; k < kGroup; ++k)
            if (k == g && (cost < best[k] || (cost == best[k] && kr < key[k]))) {
                best[k] = cost;
                key[k] = kr;
            }
    }
    DN_UNROLL
    for (int g = 0; g < kGroup; ++g) {
        for (int m = 16; m > 0; m >>= 1) {
            const float ob = warp::shfl_xor(best[g], m), ok = warp::shfl_xor(key[g], m);
            if (ob < best[g] || (ob == best[g] && ok < key[g])) {
                best[g] = ob;
                key[g] = ok;
            }
        }
        if (g < valid) {
            const int k = (int)key[g];
            by[g] += (k / n) % n - r;
            bx[g] += k % n - r;
        }
    }
}

// Tiles tile0 .. tile0 + kGroup - 1 (those < tiles) of pair `pair` by the warp whose lane this is;
// lane 0 stores.
DN_DEVI void match_tiles(const Args &a, int pair, int tile0, int lane) {
    const int valid = a.tiles - tile0 < kGroup ? a.tiles - tile0 : kGroup;
    if (valid <= 0) return;
    const float *other = nullptr;
    int32_t *shifts = nullptr;
    DN_UNROLL
    for (int k = 0; k < kMaxPairs; ++k)  // a.other[pair] without a dynamic index into the parameters
        if (k == pair) {
            other = a.other[k];
            shifts = a.shifts[k];
        }
    const int H = a.H, W = a.W, t = a.tile;
    const size_t n0 = (size_t)H * W, n1 = n0 / 4;
    int sy[kGroup] = {}, sx[kGroup] = {};
    search(a.centre + n0 + n1, other + n0 + n1, H / 4, W / 4, t / 4, (a.radius + 3) / 4, tile0, a.tw, valid, lane,
           sy, sx);
    DN_UNROLL
    for (int g = 0; g < kGroup; ++g) {
        sy[g] *= 2;
        sx[g] *= 2;
    }
    search(a.centre + n0, other + n0, H / 2, W / 2, t / 2, 1, tile0, a.tw, valid, lane, sy, sx);
    DN_UNROLL
    for (int g = 0; g < kGroup; ++g) {
        sy[g] *= 2;
        sx[g] *= 2;
    }
    search(a.centre, other, H, W, t, 1, tile0, a.tw, valid, lane, sy, sx);
    if (lane == 0) {
        DN_UNROLL
        for (int g = 0; g < kGroup; ++g)
            if (g < valid) {
                shifts[2 * (tile0 + g)] = clampi(sy[g], -a.radius, a.radius);
                shifts[2 * (tile0 + g) + 1] = clampi(sx[g], -a.radius, a.radius);
            }
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

// grid (tile groups of kWarps warps, pairs): warp w of CTA x matches tiles (x kWarps + w) kGroup ..
// of pair blockIdx.y
__global__ void __launch_bounds__(block_match_dev::kThreads) block_match_kernel(const block_match_dev::Args a) {
    using namespace block_match_dev;
    match_tiles(a, blockIdx.y, (blockIdx.x * kWarps + threadIdx.x / 32) * kGroup, threadIdx.x % 32);
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

int block_match(Ctx &ctx, const float *centre, const float *const *others, int32_t *const *shifts, int pairs, int H,
                int W, int radius, int tile) {
    using block_match_dev::kMaxPairs;
    DN_REQUIRE(centre && (pairs == 0 || (others && shifts)), "null pointer");
    DN_REQUIRE(pairs >= 0, "pairs " + std::to_string(pairs) + " < 0");
    for (int k = 0; k < pairs; ++k) DN_REQUIRE(others[k] && shifts[k], "null pointer (pair " + std::to_string(k) + ")");
    DN_REQUIRE(radius >= 0 && radius <= 64, "radius " + std::to_string(radius) + " outside 0..64");
    DN_REQUIRE(tile >= 4 && tile % 4 == 0 && H > 0 && W > 0 && H % tile == 0 && W % tile == 0,
               "tile " + std::to_string(tile) + " (a multiple of 4) does not divide " + std::to_string(W) + "x" +
                   std::to_string(H));
    block_match_dev::Args a{};
    a.centre = centre;
    a.H = H;
    a.W = W;
    a.radius = radius;
    a.tile = tile;
    a.tw = W / tile;
    a.tiles = (H / tile) * a.tw;
    unsigned blocks;
    DN_REQUIRE(grid_1d((a.tiles + block_match_dev::kGroup - 1) / block_match_dev::kGroup, block_match_dev::kWarps,
                       &blocks),
               "grid too large");
    for (int p0 = 0; p0 < pairs; p0 += kMaxPairs) {
        const int n = pairs - p0 < kMaxPairs ? pairs - p0 : kMaxPairs;
        for (int k = 0; k < kMaxPairs; ++k) {
            a.other[k] = k < n ? others[p0 + k] : nullptr;
            a.shifts[k] = k < n ? shifts[p0 + k] : nullptr;
        }
        block_match_kernel<<<dim3(blocks, (unsigned)n), block_match_dev::kThreads, 0, ctx.stream>>>(a);
        TRY(launch_check(ctx, "block_match_kernel"));
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise

#endif
