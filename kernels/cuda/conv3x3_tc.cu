// fusion_conv3x3_tc: the input fusion conv (3x3, zero padding 1, 12 n + 1 -> Cout channels) as an
// implicit GEMM on tensor cores (mma.sync.m16n8k16 bf16, fp32 accumulate; kernels/cuda/warp_mma.h).
// Same interface and result as conv3x3.cu's direct form (the fallback for what this one refuses).
//
// Math: out[y, x, o] = bias[o] + sum_{tap = (ky, kx) in-bounds} ( sum_{c < 12 n} in[y+ky-1, x+kx-1, c]
// wk[tap, c, o] + sigma_map wk[tap, 12 n, o] ), in = [frames[0] | ... | frames[n-1]], the last input
// channel being the constant sigma map, zero outside the map like every channel (PyTorch's zero
// padding). As a GEMM: M = output tokens, N = Cout, K = 9 taps x Kf frame channels (12 n padded
// with zeros to Kf, a multiple of 16: 64 for n = 5); the A operand (im2col) is never built: A[tok,
// (tap, c)] is read from a halo tile in shared memory at the token shifted by the tap. The sigma
// channel is not in the GEMM: its term, sigma_map x the sum of its weights over the in-bounds taps,
// is added in fp32 in the epilogue (one precomputed value per channel for interior tokens).
//
// CTA: a 16 x 16 tile of output tokens, 8 warps; warp w owns tile rows 2w and 2w+1, one m16 tile
// each (16 consecutive columns), and all Cout / 8 n8 tiles (acc: 2 x Cout / 8 x 4 fp32 per lane).
// Persistent: the grid is the number of CTAs resident at once, each loops over tiles t, t + grid,
// ..., so the weights are staged once per CTA. Shared memory: weights (9, Kf, Cout + 8) bf16, the
// halo (18 x 18 tokens, Kf + 8) bf16 (the +8 pads make every ldmatrix row set of 8 conflict-free:
// the row strides are odd multiples of 16 B), the sigma weights (9, Cout) and 2 x Cout fp32 bias
// terms: 94 KB for model v1 (n = 5, Cout = 32), 2 CTAs per SM on sm_90; 132,416 B for wide64 (n =
// 5, Cout = 64: the weights double), 1 CTA per SM on sm_90 and sm_80, more than sm_89's 99 KB per
// block (the direct form runs there).
// Per (tap, k step of 16): 2 ldmatrix.x4 for A, Cout / 16 ldmatrix.x4.trans for B, Cout / 4 mma.
// The halo is staged 8 items (8-byte colour quads) a thread at a time, the 8 loads in flight before
// their stores (one at a time, a thread waited ~19 load latencies per tile).
// Model v2's alignment (Args.shift): a non-centre frame is read moved onto the centre through its
// shift map (tile_shift.h: the tile's shift looked up per halo item; one 8-byte read for an even
// shift inside the map, 4 two-byte reads otherwise), the values the moved copy held, so the
// output is the copy's bit for bit and no copy is written (4 x 100 MB of DRAM traffic per 4K
// frame saved).
//
// Value path: frames and weights are bf16 already and enter the mma unchanged (no rounding here);
// products are exact and summed in fp32 by the tensor cores; sigma_map stays fp32 (it is NOT
// rounded to bf16, unlike a 61st bf16 channel would be) and its weights are widened exactly; bias
// fp32; output fp32. Against the fp32 CPU engine the only differences are the bf16 inputs and
// weights (rounded by the caller) and the fp32 summation order.
//
// Cost per output token (n = 5, Cout = 32): 2 x 9 x 64 x 32 = 36.9 KFLOP issued on tensor cores
// (34.6 K useful: 60 of 64 K channels) + 9 x 32 x 2 fp32 for the sigma term at map edges only;
// DRAM: 5 x 24 = 120 B of frames read (the halo re-reads 27 % more, served by L2) and Cout x 4 =
// 128 B written: ~150 FLOP/B, i.e. at 4K (1920 x 1080 tokens) 76 GFLOP and 0.5 GB, bandwidth-bound
// (~0.15 ms at 4 TB/s) unless the mma.sync rate falls below ~500 TFLOP/s.
//
// Limits: n (nframes) 1..8, Cout 16..64 in steps of 16, shared memory <= the device's per-block
// opt-in limit (fusion_conv3x3_tc_smem); anything else is DENOISE_EINVAL with a message.
// The body (conv_tc::conv_cta) is written against warp_mma.h so that tests/emu/conv3x3_tc_emu_test.cpp
// runs this source on the CPU warp emulator.
#include "tile_shift.h"
#include "warp_mma.h"

#if defined(DENOISE_WARP_EMULATION)
#include <cstddef>
#include <cstring>
#endif

namespace denoise {
namespace cuda {
namespace conv_tc {

using namespace warp;

constexpr int kTileH = 16, kTileW = 16, kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHaloH = kTileH + 2, kHaloW = kTileW + 2;
constexpr int kMaxFrames = 8, kFrameC = 12;
constexpr int kMinCout = 16, kMaxCout = 64;
constexpr int kBatch = 8;  // halo items (8-byte quads) a thread loads before storing them

struct Args {
    const uint16_t *frame[kMaxFrames];  // (h, w, 12) bf16 bits, 8-byte aligned
    // model v2's alignment: frame k read moved by its per-tile shifts (tile_shift.h) where
    // shift[k] is set, through the map's part from the domain's first tile (shift_stride tiles
    // per row, shift_tile tokens per tile side); null: read as it is
    const int32_t *shift[kMaxFrames];
    int shift_stride, shift_tile;
    int nframes;
    float sigma_map;                    // the sigma channel's value (sigma / 255)
    int h, w;                           // token map
    const uint16_t *wk;                 // (9, 12 n + 1, Cout) bf16 bits (conv3x3_pack's layout)
    const float *bias;                  // (Cout) fp32
    float *out;                         // (h, w, Cout) fp32, 8-byte aligned
    int tiles_x, ntiles;
};

// Shared memory layout (byte offsets, all 16-byte aligned).
struct Layout {
    int kf, sk, sn;  // K channels per tap (padded), halo token stride, weight row stride (bf16)
    size_t w_off, in_off, sig_off, bias_off, full_off, bytes;
};
DN_HD Layout layout(int nframes, int cout) {
    Layout L;
    L.kf = (kFrameC * nframes + 15) / 16 * 16;
    L.sk = L.kf + 8;
    L.sn = cout + 8;
    L.w_off = 0;
    L.in_off = L.w_off + (size_t)9 * L.kf * L.sn * 2;
    L.sig_off = L.in_off + (size_t)kHaloH * kHaloW * L.sk * 2;
    L.bias_off = L.sig_off + (size_t)9 * cout * 4;
    L.full_off = L.bias_off + (size_t)cout * 4;
    L.bytes = L.full_off + (size_t)cout * 4;
    return L;
}

#if defined(DENOISE_WARP_EMULATION)
inline uint64_t load8(const uint16_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline void store8(uint16_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline void store2f(float *p, float a, float b) {
    p[0] = a;
    p[1] = b;
}
#else
DN_DEVI uint64_t load8(const uint16_t *p) { return __ldg(reinterpret_cast<const unsigned long long *>(p)); }
DN_DEVI void store8(uint16_t *p, uint64_t v) { *reinterpret_cast<uint64_t *>(p) = v; }
DN_DEVI void store2f(float *p, float a, float b) { *reinterpret_cast<float2 *>(p) = make_float2(a, b); }
#endif

// Colour quad j (4 bf16) of token (y, x) (inside the map) of frame k: read as it is, or moved by
// its tile's shift (tile_shift.h: one 8-byte read for an even shift away from the map's edge, 4
// two-byte reads otherwise). The frame's pointer and map picked without a dynamic index into the
// kernel parameters (which would copy them to local memory).
DN_DEVI uint64_t frame_quad(const Args &a, int k, int y, int x, int j) {
    const uint16_t *src = a.frame[0];
    const int32_t *sh = a.shift[0];
    DN_UNROLL
    for (int kk = 1; kk < kMaxFrames; ++kk)
        if (k == kk) {
            src = a.frame[kk];
            sh = a.shift[kk];
        }
    if (!sh) return load8(src + ((size_t)y * a.w + x) * kFrameC + 4 * j);
    int dy, dx;
    tile_shift::shift_at(TileShift{sh, a.shift_stride, a.shift_tile}, y, x, dy, dx);
    return tile_shift::s2d_quad(src, a.h, a.w, y, x, j, dy, dx);
}

// One CTA (tid 0 .. kThreads - 1) of the persistent grid: tiles cta, cta + ncta, ... Cout = 8 NT.
template <int NT>
DN_DEVI void conv_cta(const Args &a, int cta, int ncta, int tid, uint8_t *smem) {
    constexpr int Cout = 8 * NT;
    static_assert(NT % 2 == 0 && Cout >= kMinCout && Cout <= kMaxCout, "Cout: 16..64 in steps of 16");
    const Layout L = layout(a.nframes, Cout);
    uint16_t *ws = reinterpret_cast<uint16_t *>(smem + L.w_off);
    uint16_t *ins = reinterpret_cast<uint16_t *>(smem + L.in_off);
    float *wsig = reinterpret_cast<float *>(smem + L.sig_off);
    float *bs = reinterpret_cast<float *>(smem + L.bias_off);
    float *full = reinterpret_cast<float *>(smem + L.full_off);
    const int cf = kFrameC * a.nframes, cin = cf + 1;

    // weights: frame channels -> ws (tap, kf, sn) with zero rows cf..kf-1; sigma row -> wsig fp32
    for (int i = tid; i < 9 * L.kf * Cout; i += kThreads) {
        const int o = i % Cout, r = i / Cout, k = r % L.kf, tap = r / L.kf;
        ws[(size_t)r * L.sn + o] = k < cf ? a.wk[((size_t)tap * cin + k) * Cout + o] : (uint16_t)0;
    }
    for (int i = tid; i < 9 * Cout; i += kThreads) {
        const int o = i % Cout, tap = i / Cout;
        wsig[i] = bf16_lo(a.wk[((size_t)tap * cin + cf) * Cout + o]);
    }
    for (int o = tid; o < Cout; o += kThreads) {
        float s = 0.f;
        for (int tap = 0; tap < 9; ++tap) s += bf16_lo(a.wk[((size_t)tap * cin + cf) * Cout + o]);
        bs[o] = a.bias[o];
        full[o] = a.bias[o] + a.sigma_map * s;
    }

    const int warp_id = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    // ldmatrix row of this lane: matrix lane / 8 = (row half (lane / 8) & 1, column half lane / 16)
    const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lcol = (lane >> 4) * 8;
    const int fq = cf / 4, nq = L.kf / 4;  // 8-byte quads per halo token: from frames, in all
    const int items = a.nframes * kHaloH * kHaloW * 3;
    for (int tile = cta; tile < a.ntiles; tile += ncta) {
        const int ty0 = (tile / a.tiles_x) * kTileH, tx0 = (tile % a.tiles_x) * kTileW;
        sync_cta();  // the weights are staged (first tile), or every warp is done with the last halo
        // halo: item i = (frame k, halo row hy, token hx, colour quad j), 3 quads per token: a halo
        // row of a frame is contiguous; kBatch items per thread loaded before their stores (the
        // loads of a batch in flight together); a frame with shifts gathered through them
        for (int i0 = tid; i0 < items; i0 += kBatch * kThreads) {
            uint64_t v[kBatch];
            DN_UNROLL
            for (int b = 0; b < kBatch; ++b) {
                const int i = i0 + b * kThreads;
                const int j3 = i % (kHaloW * 3), r = i / (kHaloW * 3), hy = r % kHaloH, k = r / kHaloH;
                const int hx = j3 / 3, j = j3 - 3 * hx;
                const int y = ty0 + hy - 1, x = tx0 + hx - 1;
                v[b] = 0;
                if (i < items && y >= 0 && y < a.h && x >= 0 && x < a.w) v[b] = frame_quad(a, k, y, x, j);
            }
            DN_UNROLL
            for (int b = 0; b < kBatch; ++b) {
                const int i = i0 + b * kThreads;
                const int j3 = i % (kHaloW * 3), r = i / (kHaloW * 3), hy = r % kHaloH, k = r / kHaloH;
                const int hx = j3 / 3, j = j3 - 3 * hx;
                if (i < items) store8(ins + (size_t)(hy * kHaloW + hx) * L.sk + 4 * (3 * k + j), v[b]);
            }
        }
        for (int i = tid; i < kHaloH * kHaloW * (nq - fq); i += kThreads) {  // K padding channels
            const int p = i / (nq - fq), q = fq + i % (nq - fq);
            store8(ins + (size_t)p * L.sk + 4 * q, 0);
        }
        sync_cta();

        float acc[2][NT][4];
        DN_UNROLL
        for (int mi = 0; mi < 2; ++mi)
            DN_UNROLL
            for (int j = 0; j < NT; ++j)
                DN_UNROLL
                for (int e = 0; e < 4; ++e) acc[mi][j][e] = 0.f;
        DN_UNROLL_1
        for (int tap = 0; tap < 9; ++tap) {
            const int ky = tap / 3, kx = tap - 3 * ky;
            // A row: output (tile row 2 warp + mi, column lrow) at tap (ky, kx) = halo (row + ky, column + kx)
            const uint16_t *a0p = ins + (size_t)((2 * warp_id + ky) * kHaloW + lrow + kx) * L.sk + lcol;
            const uint16_t *a1p = a0p + (size_t)kHaloW * L.sk;
            // B row: k = lrow of the k step, n = lcol of the n-tile pair
            const uint16_t *bp = ws + (size_t)(tap * L.kf + lrow) * L.sn + lcol;
            for (int kk = 0; kk < L.kf; kk += 16) {
                uint32_t fa0[4], fa1[4];
                ldsm_x4(fa0, a0p + kk);
                ldsm_x4(fa1, a1p + kk);
                DN_UNROLL
                for (int np = 0; np < NT / 2; ++np) {
                    uint32_t fb[4];
                    ldsm_x4_t(fb, bp + (size_t)kk * L.sn + 16 * np);
                    mma_bf16(acc[0][2 * np], fa0, fb[0], fb[1]);
                    mma_bf16(acc[0][2 * np + 1], fa0, fb[2], fb[3]);
                    mma_bf16(acc[1][2 * np], fa1, fb[0], fb[1]);
                    mma_bf16(acc[1][2 * np + 1], fa1, fb[2], fb[3]);
                }
            }
        }

        // epilogue: C fragment (row g / g + 8 = column of the m tile, channels 8 j + 2 t, + 1)
        DN_UNROLL
        for (int mi = 0; mi < 2; ++mi) {
            const int y = ty0 + 2 * warp_id + mi;
            DN_UNROLL
            for (int hh = 0; hh < 2; ++hh) {
                const int x = tx0 + g + 8 * hh;
                if (y >= a.h || x >= a.w) continue;
                const bool edge = y == 0 || y == a.h - 1 || x == 0 || x == a.w - 1;
                float *o = a.out + ((size_t)y * a.w + x) * Cout + 2 * t;
                DN_UNROLL
                for (int j = 0; j < NT; ++j) {
                    const int c = 8 * j + 2 * t;
                    float b0 = full[c], b1 = full[c + 1];
                    if (edge) {  // the sigma channel over the in-bounds taps only
                        float s0 = 0.f, s1 = 0.f;
                        for (int tap = 0; tap < 9; ++tap) {
                            const int yy = y + tap / 3 - 1, xx = x + tap % 3 - 1;
                            if (yy < 0 || yy >= a.h || xx < 0 || xx >= a.w) continue;
                            s0 += wsig[tap * Cout + c];
                            s1 += wsig[tap * Cout + c + 1];
                        }
                        b0 = bs[c] + a.sigma_map * s0;
                        b1 = bs[c + 1] + a.sigma_map * s1;
                    }
                    store2f(o + 8 * j, acc[mi][j][2 * hh] + b0, acc[mi][j][2 * hh + 1] + b1);
                }
            }
        }
    }
}

}  // namespace conv_tc
}  // namespace cuda
}  // namespace denoise

#if !defined(DENOISE_WARP_EMULATION)

#include <algorithm>

#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

template <int NT>
__global__ void __launch_bounds__(conv_tc::kThreads, 2) fusion_conv3x3_tc_kernel(const conv_tc::Args a) {
    extern __shared__ __align__(16) uint8_t smem[];
    conv_tc::conv_cta<NT>(a, blockIdx.x, gridDim.x, threadIdx.x, smem);
}

template <int NT>
int launch(Ctx &ctx, const conv_tc::Args &a, size_t smem) {
    int per_sm = 0, sms = 0;
    TRY(smem_kernel(ctx, (const void *)fusion_conv3x3_tc_kernel<NT>, "fusion_conv3x3_tc_kernel", conv_tc::kThreads, smem,
                    &per_sm, &sms));
    const int grid = (int)std::min<int64_t>(a.ntiles, (int64_t)per_sm * sms);
    fusion_conv3x3_tc_kernel<NT><<<grid, conv_tc::kThreads, smem, ctx.stream>>>(a);
    return launch_check(ctx, "fusion_conv3x3_tc_kernel");
}

}  // namespace

size_t fusion_conv3x3_tc_smem(int nframes, int Cout) {
    if (nframes < 1 || nframes > conv_tc::kMaxFrames || Cout < conv_tc::kMinCout || Cout > conv_tc::kMaxCout ||
        Cout % 16)
        return 0;
    return conv_tc::layout(nframes, Cout).bytes;
}

int fusion_conv3x3_tc(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w, const bf16 *wk,
                      const float *bias, int Cout, float *out, const TileShift *shifts) {
    DN_REQUIRE(frames && wk && bias && out, "null pointer");
    DN_REQUIRE(nframes >= 1 && nframes <= conv_tc::kMaxFrames,
               "nframes " + std::to_string(nframes) + " outside 1..8");
    DN_REQUIRE(Cout >= conv_tc::kMinCout && Cout <= conv_tc::kMaxCout && Cout % 16 == 0,
               "Cout " + std::to_string(Cout) + " (this kernel is built for 16..64 in steps of 16)");
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    const int64_t tiles_x = (w + conv_tc::kTileW - 1) / conv_tc::kTileW;
    const int64_t ntiles = tiles_x * ((h + conv_tc::kTileH - 1) / conv_tc::kTileH);
    DN_REQUIRE(ntiles <= 0x7fffffffLL, "map too large");
    conv_tc::Args a{};
    for (int k = 0; k < nframes; ++k) {
        DN_REQUIRE(frames[k], "frame " + std::to_string(k) + " is null");
        DN_REQUIRE(((uintptr_t)frames[k] & 7) == 0, "frame pointer not 8-byte aligned");
        a.frame[k] = reinterpret_cast<const uint16_t *>(frames[k]);
    }
    TRY(tile_shifts_check(ctx, shifts, nframes, w, a.shift, &a.shift_stride, &a.shift_tile));
    DN_REQUIRE(((uintptr_t)out & 15) == 0, "out not 16-byte aligned");
    const size_t smem = fusion_conv3x3_tc_smem(nframes, Cout);
    a.nframes = nframes;
    a.sigma_map = sigma_map;
    a.h = h;
    a.w = w;
    a.wk = reinterpret_cast<const uint16_t *>(wk);
    a.bias = bias;
    a.out = out;
    a.tiles_x = (int)tiles_x;
    a.ntiles = (int)ntiles;
    switch (Cout) {
    case 16: return launch<2>(ctx, a, smem);
    case 32: return launch<4>(ctx, a, smem);
    case 48: return launch<6>(ctx, a, smem);
    default: return launch<8>(ctx, a, smem);
    }
}

}  // namespace cuda
}  // namespace denoise

#endif
