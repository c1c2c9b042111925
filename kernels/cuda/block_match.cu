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
// must be strictly better. Luma is finite (frame_in sanitises float samples), so no NaN cost
// breaks the order.
// Summation order (the exactness contract, the same in kernels/cpu/block_match.cpp and align.py
// _costs): a t x t tile's cost is the mean of its row means, m_y = (sum of the row's t |d| in x
// order from 0) / t, cost = (sum of m_0 .. m_{t-1} in y order from 0) / t, every add and divide
// an fp32 round to nearest (x / t as x * (1 / t) where t is a power of two: the same value).
// So the rows of a tile are summed by different threads, and only the row means' sum is one
// chain: the longest chain of dependent adds is t + t, where one sum over the tile in row-major
// order (the form before) was t^2 long.
// Form: a CTA (4 warps) per (tile, pair), CTA x = tile x pairs + pair, so that a tile's pairs run
// side by side and share its centre samples in the L2 cache; all 2r pairs of a window in one
// launch (up to 8). Per level, in bands of rows that fit 24 KB of shared memory (band_rows): the
// warps copy the band's centre rows and the other frame's rows and columns (clamped, + r each
// side, coalesced) into shared memory with cp.async (every copy of the band in flight, then one
// wait and the barrier: copied through registers, each warp waited on a load per row it copied,
// ~33-66 load latencies a CTA at R 24, T 64, its longest path); a row task (row y, dy, a chunk of kDx dx) sums its row
// against kDx candidates at once (kDx = 3 at the +-1 levels, 7 at L2), reading 4 centre and
// 4 + kDx - 1 other samples per 4 steps (odd strides: 32 rows in 32 banks), and stores the kDx
// row means; after a barrier the thread of candidate ci (ci = tid, tid + 128, ...) adds the band's
// row means in row order to its running sum, and after the last band divides by t and keeps its
// least (cost, rank), rank = (|dy| + |dx|, dy, dx); a shuffle butterfly per warp and the 4
// warps' pairs through shared memory give every thread the least: the first minimum in candidate
// order, as the sequential search.
// Work at R 24, tile 64 (a CTA): L2 t 16, 13 x 13 candidates, one band: 16 rows x 13 dy x 2 dx
// chunks (7 + 6; 14 sums, 13 kept) = 416 row tasks, 4 rounds of 128 threads, 46,592 |d| adds;
// L1 t 32, one band, 96 tasks, 9,216 adds; L t 64, bands of 42 and 22 rows, 126 and 66 tasks,
// 36,864 adds; 92,672 in all (the CPU's 89,344 and 14 dx computed for 13 at L2). Chain of
// dependent adds a thread: L2 4 rounds x 16 + 2 x 16 (row means, 169 candidates over 128
// threads), L1 32 + 32, L 2 x 64 + 64: 352, where a warp ran 9,216 in the form before (3 tiles'
// candidates, each one sum over its tile). Shared memory 24.3 KB (L: 6,082 floats), 64
// registers (nvcc 13.0 sm_90 -Xptxas -v, no spills): 8 CTAs (32 warps) a SM.
// Time. Measured with the copies through registers (H100, 2026-12-08): 4 pairs 0.042 / 0.118 /
// 0.434 ms at 960x540 / 1920x1080 / 3840x2160 (540 / 2,040 / 8,160 CTAs), one pair at 4K 0.128:
// 0.042 ms for fewer CTAs than the SMs hold at once is one CTA's lifetime, ~70 K cycles, where its
// issue is ~10 K warp instructions: latency, the band copies' chain of loads (a warp's rows of a
// band one after another, 33 rows-of-4 a CTA; more when its centre row's load waits behind the
// other frame's). Counted for 4K (not measured since cp.async): each CTA issues ~5.8 K warp
// instructions of FP32 (2 a |d|), ~2 K of shared-memory reads (0.5-0.83 a |d|: 14 per 28 at kDx
// 7, 10 per 12 at kDx 3), ~2 K of addressing and the copies' 5.6 K cp.async over 4 warps; 62 CTAs
// a SM: ~0.09 ms of issue at 4 a cycle, ~0.065 ms of shared-memory reads; DRAM: the 5 pyramids
// once, 219 MB, 0.073 ms at 3.0 TB/s (a tile's centre stays in the L2 cache for its 4 pairs). A
// CTA's path is now 4 band copies of one load latency each plus ~7.5 K cycles of dependent
// arithmetic, hidden by the 8 CTAs a SM: ~0.1-0.15 ms expected for 4 pairs at 4K.
// Layout: a luma pyramid is L (H, W), then L1 (H/2, W/2), then L2 (H/4, W/4), fp32, contiguous.
// sm_90 (nvcc 13.0 -Xptxas -v): block_match_kernel 64 registers, luma_pyramid_kernel 27, no
// spills, no stack.
// The body (block_match_dev::match_tile) is written against warp_mma.h so that
// tests/emu/block_match_emu_test.cpp runs this source on the CPU warp emulator.
#include "warp_mma.h"

#include <cstddef>
#include <cstdint>


namespace denoise {
namespace cuda {
namespace block_match_dev {

constexpr int kWarps = 4;      // warps per CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxPairs = 8;   // pairs per launch (block_match splits more into several)
constexpr int kFineDx = 3;     // row sums a row task carries at the +-1 levels: the 3 dx of one dy
constexpr int kCoarseDx = 7;   // at the coarse level: a chunk of 7 dx (R 24: 13 = 7 + 6)
constexpr int kSteps = 4;      // x steps of a row task per batch of reads
constexpr int kBandFloats = 6144;  // shared memory (floats) a level's band may take: 24 KB

struct Args {
    const float *centre;             // luma pyramid of the centre frame
    const float *other[kMaxPairs];   // luma pyramids of the frames matched against it
    int32_t *shifts[kMaxPairs];      // each (H / tile, W / tile, 2)
    int pairs;                       // pairs in this launch (CTA x: tile * pairs + pair)
    int H, W;                        // full-resolution size
    int radius, tile;                // R; tile side (px, a multiple of 4 dividing H and W)
    int tw;                          // tiles per row
    int band[3];                     // rows per band at L2, L1, L (band_rows)
};

// One level's shared memory for bands of b rows of a t x t tile searched over +-r, row tasks of
// dx sums: the argmin exchange (2 kWarps floats, first, the same place at every level), the
// centre's b rows (stride cs), the other frame's b + 2r rows (stride os; ow columns: the 2r + 1
// dx of every chunk of dx, the last chunk's spare sums reading clamped samples), the row means
// (n^2 candidates x bs, candidate-major) and the running sums over bands (n^2). Strides odd: the
// 32 lanes of a warp read 32 rows at one column from 32 banks.
struct Layout {
    int t, r, n, chunks, b, cs, ow, os, bs;
    DN_HD Layout(int t_, int r_, int dx, int b_)
        : t(t_), r(r_), n(2 * r_ + 1), chunks((n + dx - 1) / dx), b(b_), cs(t_ | 1), ow(t_ + chunks * dx - 1),
          os(ow | 1), bs(b_ | 1) {}
    DN_HD int centre() const { return 2 * kWarps; }
    DN_HD int other() const { return centre() + b * cs; }
    DN_HD int means() const { return other() + (b + 2 * r) * os; }
    DN_HD int sums() const { return means() + n * n * bs; }
    DN_HD int floats() const { return sums() + n * n; }
};

// The most rows per band (1 .. t) whose layout fits kBandFloats, or 1.
inline int band_rows(int t, int r, int dx) {
    int b = t;
    while (b > 1 && Layout(t, r, dx, b).floats() > kBandFloats) --b;
    return b;
}

#if defined(DENOISE_WARP_EMULATION)
inline float add_rn(float a, float b) { return a + b; }
inline float mul_rn(float a, float b) { return a * b; }
inline float div_rn(float a, float b) { return a / b; }
inline float absdiff(float a, float b) { return std::fabs(a - b); }
#else
DN_DEVI float add_rn(float a, float b) { return __fadd_rn(a, b); }
DN_DEVI float mul_rn(float a, float b) { return __fmul_rn(a, b); }
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

// s / t rounded as a division: for t a power of two s * (1 / t), the same value (both round
// s 2^-k once), without the division's instruction sequence.
struct Mean {
    float t, inv;
    bool pow2;
    DN_DEVI explicit Mean(int side) : t((float)side), inv(1.f / (float)side), pow2((side & (side - 1)) == 0) {}
    DN_DEVI float operator()(float s) const { return pow2 ? mul_rn(s, inv) : div_rn(s, t); }
};

// acc[j] = sum over x = 0 .. t - 1, in order, of |c[x] - o[x + j]|: one row of the centre against
// the other frame's row at kDx consecutive dx. kSteps centre and kSteps + kDx - 1 other samples
// are read per batch, each used kDx (centre) or up to kSteps (other) times from registers.
template <int kDx>
DN_DEVI void row_sums(const float *c, const float *o, int t, float (&acc)[kDx]) {
    DN_UNROLL
    for (int j = 0; j < kDx; ++j) acc[j] = 0.f;
    int x = 0;
    for (; x + kSteps <= t; x += kSteps) {
        float cv[kSteps], ov[kSteps + kDx - 1];
        DN_UNROLL
        for (int u = 0; u < kSteps; ++u) cv[u] = c[x + u];
        DN_UNROLL
        for (int v = 0; v < kSteps + kDx - 1; ++v) ov[v] = o[x + v];
        DN_UNROLL
        for (int u = 0; u < kSteps; ++u) {
            DN_UNROLL
            for (int j = 0; j < kDx; ++j) acc[j] = add_rn(acc[j], absdiff(cv[u], ov[u + j]));
        }
    }
    for (; x < t; ++x) {
        const float cv = c[x];
        DN_UNROLL
        for (int j = 0; j < kDx; ++j) acc[j] = add_rn(acc[j], absdiff(cv, o[x + j]));
    }
}

// One level for the CTA's tile at (y0, x0) of an h x w level (thread tid of kThreads): (by, bx) +=
// the candidate (dy, dx), |dy|, |dx| <= g.r, of the least cost, in every thread. Per band of g.b
// rows: the warps copy the centre's rows and the other frame's rows and columns (clamped) into
// shared memory; row task k (y = k % rows, dy index i, dx chunk c) writes the row means of its
// kDx candidates; candidate ci's thread (ci = tid, tid + kThreads, ...) adds the band's row means
// in row order to its running sum, after the last band divides by t and keeps its least (cost,
// rank); a shuffle butterfly per warp and the warps' 4 pairs through shared memory give every
// thread the CTA's least.
template <int kDx>
DN_DEVI void search(float *sm, const Layout &g, const float *lc, const float *lo, int h, int w, int y0, int x0, int tid,
                    int &by, int &bx) {
    const int t = g.t, r = g.r, n = g.n, nn = n * n, warp_id = tid / 32, lane = tid % 32;
    float *red = sm, *C = sm + g.centre(), *O = sm + g.other(), *M = sm + g.means(), *S = sm + g.sums();
    const Mean mean(t);
    float best = __builtin_inff(), key = 1e30f;  // threads without candidates lose every comparison
    for (int yb = 0; yb < t; yb += g.b) {
        const int rows = t - yb < g.b ? t - yb : g.b;
        // the band's copies as cp.async: every thread issues all of its copies, then waits once
        // (a copy through registers waits on each load at its store: a band's rows / 4 memory
        // latencies in a row per warp, the CTA's longest path before)
        for (int s = warp_id; s < rows + 2 * r; s += kWarps) {
            const float *src = lo + (size_t)clampi(y0 + yb + s - r + by, 0, h - 1) * w;
            float *dst = O + s * g.os;
            for (int u = lane; u < g.ow; u += 32) warp::cp_async4(dst + u, src + clampi(x0 + u - r + bx, 0, w - 1));
            if (s < rows) {
                const float *csrc = lc + (size_t)(y0 + yb + s) * w + x0;
                float *cdst = C + s * g.cs;
                for (int u = lane; u < t; u += 32) warp::cp_async4(cdst + u, csrc + u);
            }
        }
        warp::cp_async_wait_all();
        warp::sync_cta();
        for (int k = tid; k < rows * n * g.chunks; k += kThreads) {
            const int y = k % rows, q = k / rows, i = q % n, c = q / n;
            float acc[kDx];
            row_sums<kDx>(C + y * g.cs, O + (y + i) * g.os + c * kDx, t, acc);
            DN_UNROLL
            for (int j = 0; j < kDx; ++j)
                if (c * kDx + j < n) M[(i * n + c * kDx + j) * g.bs + y] = mean(acc[j]);
        }
        warp::sync_cta();
        const bool last = yb + rows == t;
        for (int ci = tid; ci < nn; ci += kThreads) {
            float sum = yb ? S[ci] : 0.f;
            const float *m = M + ci * g.bs;
            for (int y = 0; y < rows; ++y) sum = add_rn(sum, m[y]);
            if (!last) {
                S[ci] = sum;
                continue;
            }
            const float cost = mean(sum);
            // rank (|dy| + |dx|, dy, dx) as one exact integer in a float (< 2^24: r <= 16)
            const int dy = ci / n - r, dx = ci % n - r;
            const int d = (dy < 0 ? -dy : dy) + (dx < 0 ? -dx : dx);
            const float kr = (float)(d * nn + ci);
            if (cost < best || (cost == best && kr < key)) {
                best = cost;
                key = kr;
            }
        }
    }
    for (int m = 16; m > 0; m >>= 1) {
        const float ob = warp::shfl_xor(best, m), ok = warp::shfl_xor(key, m);
        if (ob < best || (ob == best && ok < key)) {
            best = ob;
            key = ok;
        }
    }
    if (lane == 0) {
        red[2 * warp_id] = best;
        red[2 * warp_id + 1] = key;
    }
    warp::sync_cta();
    best = red[0];
    key = red[1];
    for (int v = 1; v < kWarps; ++v)
        if (red[2 * v] < best || (red[2 * v] == best && red[2 * v + 1] < key)) {
            best = red[2 * v];
            key = red[2 * v + 1];
        }
    const int ci = (int)key % nn;
    by += ci / n - r;
    bx += ci % n - r;
}

// Tile `tile` of pair `pair` by the CTA whose thread this is (tid of kThreads; sm: the launch's
// shared memory, the largest level's Layout); thread 0 stores.
DN_DEVI void match_tile(const Args &a, float *sm, int pair, int tile, int tid) {
    const float *other = nullptr;
    int32_t *shifts = nullptr;
    DN_UNROLL
    for (int k = 0; k < kMaxPairs; ++k)  // a.other[pair] without a dynamic index into the parameters
        if (k == pair) {
            other = a.other[k];
            shifts = a.shifts[k];
        }
    const int H = a.H, W = a.W, T = a.tile, ty = tile / a.tw, tx = tile % a.tw;
    const size_t n0 = (size_t)H * W, n1 = n0 / 4;
    int sy = 0, sx = 0;
    search<kCoarseDx>(sm, Layout(T / 4, (a.radius + 3) / 4, kCoarseDx, a.band[0]), a.centre + n0 + n1,
                      other + n0 + n1, H / 4, W / 4, ty * (T / 4), tx * (T / 4), tid, sy, sx);
    sy *= 2;
    sx *= 2;
    search<kFineDx>(sm, Layout(T / 2, 1, kFineDx, a.band[1]), a.centre + n0, other + n0, H / 2, W / 2, ty * (T / 2),
                    tx * (T / 2), tid, sy, sx);
    sy *= 2;
    sx *= 2;
    search<kFineDx>(sm, Layout(T, 1, kFineDx, a.band[2]), a.centre, other, H, W, ty * T, tx * T, tid, sy, sx);
    if (tid == 0) {
        shifts[2 * tile] = clampi(sy, -a.radius, a.radius);
        shifts[2 * tile + 1] = clampi(sx, -a.radius, a.radius);
    }
}

// The launch's bands (a.band) and its dynamic shared memory in bytes (the largest level's).
inline size_t plan_bands(Args &a) {
    const int t[3] = {a.tile / 4, a.tile / 2, a.tile}, r[3] = {(a.radius + 3) / 4, 1, 1};
    const int dx[3] = {kCoarseDx, kFineDx, kFineDx};
    int f = 0;
    for (int l = 0; l < 3; ++l) {
        a.band[l] = band_rows(t[l], r[l], dx[l]);
        const int fl = Layout(t[l], r[l], dx[l], a.band[l]).floats();
        f = fl > f ? fl : f;
    }
    return (size_t)f * sizeof(float);
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

// CTA x: tile x / a.pairs, pair x % a.pairs (a tile's pairs side by side: they read its centre
// samples at about the same time)
__global__ void __launch_bounds__(block_match_dev::kThreads) block_match_kernel(const block_match_dev::Args a) {
    extern __shared__ float sm[];
    block_match_dev::match_tile(a, sm, (int)(blockIdx.x % a.pairs), (int)(blockIdx.x / a.pairs), threadIdx.x);
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
    const int64_t tiles = (int64_t)(H / tile) * a.tw;
    const size_t smem = block_match_dev::plan_bands(a);
    if (pairs == 0) return 0;
    TRY(smem_kernel(ctx, (const void *)block_match_kernel, "block_match_kernel", block_match_dev::kThreads, smem));
    for (int p0 = 0; p0 < pairs; p0 += kMaxPairs) {
        const int n = pairs - p0 < kMaxPairs ? pairs - p0 : kMaxPairs;
        unsigned blocks;
        DN_REQUIRE(grid_1d(tiles * n, 1, &blocks), "grid too large");
        a.pairs = n;
        for (int k = 0; k < kMaxPairs; ++k) {
            a.other[k] = k < n ? others[p0 + k] : nullptr;
            a.shifts[k] = k < n ? shifts[p0 + k] : nullptr;
        }
        block_match_kernel<<<blocks, block_match_dev::kThreads, smem, ctx.stream>>>(a);
        TRY(launch_check(ctx, "block_match_kernel"));
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise

#endif
