// head_conv3d_tc: the output head (conv3d 3x3x3 on the feature maps F_{t-1}, F_t, F_{t+1}, Cin =
// 32 or 64 -> Cout <= 16 channels, spatial zero padding 1) + bias + residual + widened clamp in ONE
// kernel, an implicit GEMM on tensor cores (mma.sync.m16n8k16 bf16, fp32 accumulate;
// kernels/cuda/warp_mma.h). Same result as the two-pass head (three GEMMs into G (h*w, 112) fp32
// + head.cu's stencil), which stays as the reference path (DENOISE_CUDA_FUSED=0), without G: G
// costs 448 B written and read per token, the whole head here moves 3 x 2 Cin B of features + 2
// Cout B of residual in and 4 Cout B out per token.
//
// Math: out[y, x, o] = clamp(a + r, min(-1, r), max(1, r)) (weights/denoise_train/model.py output_clamp), r =
// residual[y, x, o], a = bias[o] + sum_{ky, kx} sum_{dt < 3, c < Cin} F_dt[y+ky-1, x+kx-1, c]
// W[o, c, dt, ky, kx], F zero outside the map; with as_change the kernel stores 0.5 (out - r)
// instead (frame_out.cu turns it into samples). As a GEMM: M = output tokens, N = Cout padded to
// 16 with zero weights, K = 9 spatial taps x 3 Cin (the three time taps' channels side by side,
// k = dt Cin + c); the A operand is read from a halo tile in shared memory at the token shifted by
// the tap. Why this form and not "G for the tile + halo in shared memory, then the 9-tap
// stencil": both issue the same tensor-core work (Cin 32: here 2 x 9 x 96 x 16 = 27.6 KFLOP per
// token; the G form 2 x 96 x 112 = 21.5 K per halo token, x 1.27 halo tokens per output token
// for a 16 x 16 tile = 27.3 K), but the G form needs 112 fp32 per halo token of shared memory
// (145 KB for 18 x 18) and a second pass through it, this one none.
//
// CTA: a 16 x 16 tile of output tokens, 8 warps; warp w owns tile rows 2w and 2w+1 (one m16 tile
// of 16 consecutive columns each) and both n8 tiles (acc: 2 x 2 x 4 fp32 per lane). Persistent:
// the grid is the number of CTAs resident at once, each loops over tiles t, t + grid, ..., so the
// weights are staged once per CTA. The K axis runs in passes of KP = ND Cin channels, ND time
// taps per pass (Plan below), the halo holding one pass's channels; the accumulators carry over
// the passes:
//  - Cin 32 (models v1 / v2): ND 3, one pass. Shared memory: weights (9 taps, 16 n, 96 + 8 k) bf16
//    (29,952 B), the halo (18 x 18 tokens, 96 + 8 channels) bf16 (67,392 B), the bias (16 fp32):
//    97,408 B: 2 CTAs per SM on sm_90 (228 KB per SM, 1 KB reserved per CTA), 1 on sm_80 (164
//    KB) and sm_89 (100 KB).
//  - Cin 64 (wide64): ND 1, three passes (one per time tap; two barriers each). Weights (9, 16, 192
//    + 8) bf16 (57,600 B), the halo (18 x 18, 64 + 8) bf16 (46,656 B), the bias: 104,320 B: 2 CTAs
//    per SM on sm_90, 1 on sm_80; more than sm_89's 99 KB per block (the two-pass head runs there).
//    One pass of 96 channels (dt 0 and half of dt 1) would take a 67 KB halo and 125 KB in all:
//    1 CTA per SM on sm_90; restaging the weights per pass would keep 97 KB but read 55 KB more
//    from L2 per tile.
// The +8 pads make the row strides odd multiples of 16 B (Cin 32: 208 B both; Cin 64: 400 B
// weights, 144 B halo), so every ldmatrix row set of 8 is conflict-free. Features are staged with
// 16-byte loads (a halo row of one time tap is 18 x 2 Cin contiguous bytes), zero outside the
// map, a batch of loads per thread in flight before their stores (Cin 32: 3,888 chunks per tile,
// 2 batches of 256 x 8; Cin 64: 2,592 per pass, 2 batches of 256 x 6).
// sm_90 (nvcc 13.0 -Xptxas -v): Cin 32 78 registers, Cin 64 86, no spills, no stack.
// Per (tap, k step of 16): 2 ldmatrix.x4 for A, 1 ldmatrix.x4 for B (both n8 tiles), 4 mma.
//
// Value path (where each rounding happens): F and the weights are bf16 already (F rounded by
// the network's features cast, the weights once at upload by head_conv3d_tc_pack, RNE) and
// enter the mma unchanged; products are exact and all 27 x Cin of them per output are summed in
// fp32 by the tensor cores (k in order within an mma, taps in order across mma, passes in
// order); then + bias (fp32), + r (the bf16 residual widened exactly), the clamp, and (as_change)
// 0.5 (v - r), all fp32; output fp32. No intermediate rounding, as in the two-pass head (G is
// fp32): against the CPU engine only the bf16 rounding of F and of the weights and the fp32
// summation order differ.
//
// Cost per output token (Cout 12): 2 x 9 x 3 Cin x 16 FLOP issued on tensor cores (Cin 32: 27.6
// K, 20.7 K useful: 12 of 16 N; Cin 64: 55.3 K); DRAM 3 x 2 Cin B of features (the halo re-reads
// 27 %, mostly from L2) + 24 B of residual read, 48 B written: Cin 32 at 4K (1920 x 1080 tokens)
// 57 GFLOP issued and 0.56 GB, ~0.13 ms at 4.3 TB/s; shared-memory reads 2.6 KB per token
// (ldmatrix), ~0.16 ms at 128 B / clock / SM on an H200. Cin 64 doubles the FLOP, the feature
// bytes and the ldmatrix reads.
//
// Model v2's alignment: F_{t-1} and F_{t+1} are read moved onto F_t through window t's shift maps
// (Args.shift; tile_shift.h: the shifts halved with floor, reads clamped to the map), one 8-byte
// map read per 16-byte chunk on top, so no moved copy of either map exists (shift_tiles wrote two,
// 4 x 2 Cin B per token of DRAM traffic, before).
//
// Limits: Cin 32 or 64, Cout 1..16, F / residual / out any h, w >= 1; F pointers 16-byte aligned;
// anything else is DENOISE_EINVAL with a message (the network runs the two-pass head for other
// widths). The body (head_tc::head_cta) is written against warp_mma.h so that
// tests/emu/head_tc_emu_test.cpp runs this source on the CPU warp emulator.
#include "tile_shift.h"
#include "warp_mma.h"

#include <cstddef>
#include <cstring>


namespace denoise {
namespace cuda {
namespace head_tc {

using namespace warp;

constexpr int kTileH = 16, kTileW = 16, kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHaloH = kTileH + 2, kHaloW = kTileW + 2;
constexpr int kN = 16;  // N: Cout padded with zero weights
constexpr int kMaxCout = kN;

// The plan of the kernel for Cin feature channels (32 or 64; ok false otherwise): ND time taps per
// pass of KP = ND Cin channels, NP passes; row strides (bf16) of the weights (all 3 Cin channels
// of a (tap, n) row) and of a halo token (one pass's KP channels); shared-memory byte offsets;
// the halo's 16-byte chunks per pass and how they are loaded (batches of `batch` per thread).
struct Plan {
    int cin, nd, kp, np, ws, hs, chunks, batch;
    size_t in_off, bias_off, smem;
    bool ok;
};
DN_HD constexpr Plan plan(int cin) {
    Plan P{};
    P.cin = cin;
    P.ok = cin == 32 || cin == 64;
    P.nd = cin == 32 ? 3 : 1;
    P.kp = P.nd * cin;
    P.np = 3 / P.nd;
    P.ws = 3 * cin + 8;
    P.hs = P.kp + 8;
    P.chunks = P.nd * kHaloH * kHaloW * (cin / 8);
    const int nbatch = (P.chunks + 8 * kThreads - 1) / (8 * kThreads);  // at most 8 loads per thread in flight
    P.batch = (P.chunks + nbatch * kThreads - 1) / (nbatch * kThreads);
    P.in_off = (size_t)9 * kN * P.ws * 2;
    P.bias_off = P.in_off + (size_t)kHaloH * kHaloW * P.hs * 2;
    P.smem = P.bias_off + (size_t)kN * 4;
    return P;
}
static_assert(plan(32).smem == 97408 && plan(32).batch == 8, "Cin 32: the layout of models v1 / v2");
static_assert(plan(64).smem == 104320 && plan(64).batch == 6, "Cin 64: the layout the header states");
static_assert(plan(32).in_off % 16 == 0 && plan(32).bias_off % 16 == 0 && plan(64).in_off % 16 == 0 &&
                  plan(64).bias_off % 16 == 0,
              "shared memory regions 16-byte aligned");

DN_HD size_t smem_bytes(int cin) { return cin == 32 || cin == 64 ? plan(cin).smem : 0; }

struct Args {
    const uint16_t *F[3];  // (h, w, Cin) bf16 bits: time taps t-1, t, t+1; 16-byte aligned
    // model v2's alignment: F[dt] read moved by its per-tile shifts halved with floor (tile_shift.h)
    // where shift[dt] is set, through the map's part from the domain's first tile (shift_stride
    // tiles per row, shift_tile tokens per tile side); null: read as it is
    const int32_t *shift[3];
    int shift_stride, shift_tile;
    int h, w;              // token map
    const uint16_t *wk;    // (9, 16, 3 Cin) bf16 bits (head_conv3d_tc_pack's layout)
    const float *bias;     // (Cout) fp32
    int cout;              // 1..16
    const uint16_t *res;   // (h, w, Cout) bf16 bits: the residual (s2d centre frame)
    float *out;            // (h, w, Cout) fp32
    bool as_change;
    int tiles_x, ntiles;
    int cin;               // 32 or 64: head_cta_any's dispatch (the kernels are templates on it)
};

// One CTA (tid 0 .. kThreads - 1) of the persistent grid: tiles cta, cta + ncta, ...
template <int CIN>
DN_DEVI void head_cta(const Args &a, int cta, int ncta, int tid, uint8_t *smem) {
    constexpr Plan P = plan(CIN);
    static_assert(P.ok, "head_cta is built for Cin 32 and 64");
    constexpr int K3 = 3 * CIN;  // weight row length in global memory
    uint16_t *ws = reinterpret_cast<uint16_t *>(smem);
    uint16_t *ins = reinterpret_cast<uint16_t *>(smem + P.in_off);
    float *bs = reinterpret_cast<float *>(smem + P.bias_off);

    // weights: 9 x 16 rows of 3 Cin bf16 (3 Cin / 8 chunks of 16 B) -> rows of P.ws
    for (int i = tid; i < 9 * kN * (K3 / 8); i += kThreads) {
        const int r = i / (K3 / 8), q = i - r * (K3 / 8);
        st4(ws + (size_t)r * P.ws + 8 * q, ldg4(a.wk + (size_t)r * K3 + 8 * q));
    }
    for (int o = tid; o < kN; o += kThreads) bs[o] = o < a.cout ? a.bias[o] : 0.f;

    const int warp_id = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    // A (ldmatrix.x4) row of this lane: matrix lane / 8 = (row half (lane / 8) & 1, k half lane / 16)
    const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lcol = (lane >> 4) * 8;
    // B (ldmatrix.x4, not transposed, rows n of the (n, k) weights): matrix lane / 8 = (k half
    // (lane / 8) & 1, n half lane / 16): registers 0, 1 = b0, b1 of n tile 0, 2, 3 of n tile 1
    const int brow = (lane & 7) + (lane >> 4) * 8, bcol = ((lane >> 3) & 1) * 8;
    constexpr int kQ = CIN / 8;  // 16-byte chunks per token and time tap
    for (int tile = cta; tile < a.ntiles; tile += ncta) {
        const int ty0 = (tile / a.tiles_x) * kTileH, tx0 = (tile % a.tiles_x) * kTileW;
        float acc[2][2][4];
        DN_UNROLL
        for (int p = 0; p < P.np; ++p) {
            sync_cta();  // the weights are staged (first tile), or every warp is done with the last halo
            // halo of time taps p ND .. p ND + ND - 1: chunk i = ((dtl, hy), hx, q): consecutive threads
            // read a halo row of one time tap in order; P.batch loads per thread in flight before their
            // stores
            for (int i0 = tid; i0 < P.chunks; i0 += P.batch * kThreads) {
                u32x4 v[P.batch];
                DN_UNROLL
                for (int b = 0; b < P.batch; ++b) {
                    const int i = i0 + b * kThreads;
                    v[b] = u32x4{0u, 0u, 0u, 0u};
                    const int q = i % kQ, r = i / kQ, hx = r % kHaloW, r2 = r / kHaloW, hy = r2 % kHaloH;
                    const int dt = p * P.nd + r2 / kHaloH;
                    const int y = ty0 + hy - 1, x = tx0 + hx - 1;
                    const uint16_t *src = dt == 0 ? a.F[0] : dt == 1 ? a.F[1] : a.F[2];
                    const int32_t *sh = dt == 0 ? a.shift[0] : dt == 1 ? a.shift[1] : a.shift[2];
                    if (i < P.chunks && y >= 0 && y < a.h && x >= 0 && x < a.w) {
                        int ys = y, xs = x;
                        if (sh) {  // the token of F[dt] moved onto the centre (zero padding stays outside the map)
                            int dy, dx;
                            tile_shift::shift_at(TileShift{sh, a.shift_stride, a.shift_tile}, y, x, dy, dx);
                            tile_shift::feature_source(a.h, a.w, y, x, dy, dx, ys, xs);
                        }
                        v[b] = ldg4(src + ((size_t)ys * a.w + xs) * CIN + 8 * q);
                    }
                }
                DN_UNROLL
                for (int b = 0; b < P.batch; ++b) {
                    const int i = i0 + b * kThreads;
                    const int q = i % kQ, r = i / kQ, hx = r % kHaloW, r2 = r / kHaloW, hy = r2 % kHaloH, dtl = r2 / kHaloH;
                    if (i < P.chunks) st4(ins + (size_t)(hy * kHaloW + hx) * P.hs + dtl * CIN + 8 * q, v[b]);
                }
            }
            sync_cta();
            if (p == 0) {  // the pass loop is unrolled: no accumulator is live while the first halo loads
                DN_UNROLL
                for (int mi = 0; mi < 2; ++mi)
                    DN_UNROLL
                    for (int j = 0; j < 2; ++j)
                        DN_UNROLL
                        for (int e = 0; e < 4; ++e) acc[mi][j][e] = 0.f;
            }
            DN_UNROLL_1
            for (int tap = 0; tap < 9; ++tap) {
                const int ky = tap / 3, kx = tap - 3 * ky;
                // A row: output (tile row 2 warp + mi, column lrow) at tap (ky, kx) = halo (row + ky, column + kx)
                const uint16_t *a0p = ins + (size_t)((2 * warp_id + ky) * kHaloW + lrow + kx) * P.hs + lcol;
                const uint16_t *a1p = a0p + (size_t)kHaloW * P.hs;
                const uint16_t *bp = ws + (size_t)(tap * kN + brow) * P.ws + p * P.kp + bcol;
                DN_UNROLL
                for (int kk = 0; kk < P.kp; kk += 16) {
                    uint32_t fa0[4], fa1[4], fb[4];
                    ldsm_x4(fb, bp + kk);
                    ldsm_x4(fa0, a0p + kk);
                    ldsm_x4(fa1, a1p + kk);
                    mma_bf16(acc[0][0], fa0, fb[0], fb[1]);
                    mma_bf16(acc[0][1], fa0, fb[2], fb[3]);
                    mma_bf16(acc[1][0], fa1, fb[0], fb[1]);
                    mma_bf16(acc[1][1], fa1, fb[2], fb[3]);
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
                const size_t p = ((size_t)y * a.w + x) * a.cout;
                DN_UNROLL
                for (int j = 0; j < 2; ++j)
                    DN_UNROLL
                    for (int e = 0; e < 2; ++e) {
                        const int c = 8 * j + 2 * t + e;
                        if (c >= a.cout) continue;
                        const float r = bf16_lo(a.res[p + c]);
                        const float v = fminf(fmaxf(1.f, r), fmaxf(fminf(-1.f, r), (acc[mi][j][2 * hh + e] + bs[c]) + r));
                        a.out[p + c] = a.as_change ? 0.5f * (v - r) : v;
                    }
            }
        }
    }
}

// head_cta for a.cin (32 or 64; anything else does nothing: refused before).
DN_DEVI void head_cta_any(const Args &a, int cta, int ncta, int tid, uint8_t *smem) {
    switch (a.cin) {
    case 32: head_cta<32>(a, cta, ncta, tid, smem); break;
    case 64: head_cta<64>(a, cta, ncta, tid, smem); break;
    default: break;
    }
}

// fp32 -> bf16 bits, round to nearest even (NaN kept quiet), on the host.
inline uint16_t bf16_bits_rn(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

}  // namespace head_tc

// Host: the kernel's weight layout from PyTorch's (Cout, Cin, 3, 3, 3) fp32 (o, c, dt, ky, kx) ->
// wk (9 taps ky*3 + kx, 16 n = o (zero rows for o >= Cout), 3 Cin k = dt*Cin + c) bf16 bits (RNE).
// wk holds 9 x 16 x 3 Cin values. false (nothing written) for Cin other than 32 or 64 or Cout
// outside 1..16.
bool head_conv3d_tc_pack(const float *w_oitkk, int Cout, int Cin, uint16_t *wk) {
    if (!head_tc::smem_bytes(Cin) || Cout < 1 || Cout > head_tc::kMaxCout) return false;
    for (int tap = 0; tap < 9; ++tap)
        for (int n = 0; n < head_tc::kN; ++n)
            for (int dt = 0; dt < 3; ++dt)
                for (int c = 0; c < Cin; ++c)
                    wk[((size_t)tap * head_tc::kN + n) * 3 * Cin + dt * Cin + c] =
                        n < Cout ? head_tc::bf16_bits_rn(w_oitkk[(((size_t)n * Cin + c) * 3 + dt) * 9 + tap]) : (uint16_t)0;
    return true;
}

}  // namespace cuda
}  // namespace denoise

#if !defined(DENOISE_WARP_EMULATION)

#include <algorithm>

#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

template <int CIN>
__global__ void __launch_bounds__(head_tc::kThreads, 2) head_conv3d_tc_kernel(const head_tc::Args a) {
    extern __shared__ __align__(16) uint8_t smem[];
    head_tc::head_cta<CIN>(a, blockIdx.x, gridDim.x, threadIdx.x, smem);
}

template <int CIN>
int launch(Ctx &ctx, const head_tc::Args &a) {
    const size_t smem = head_tc::plan(CIN).smem;
    int per_sm = 0, sms = 0;
    TRY(smem_kernel(ctx, (const void *)head_conv3d_tc_kernel<CIN>, "head_conv3d_tc_kernel", head_tc::kThreads, smem,
                    &per_sm, &sms));
    const int grid = (int)std::min<int64_t>(a.ntiles, (int64_t)per_sm * sms);
    head_conv3d_tc_kernel<CIN><<<grid, head_tc::kThreads, smem, ctx.stream>>>(a);
    return launch_check(ctx, "head_conv3d_tc_kernel");
}

}  // namespace

size_t head_conv3d_tc_smem(int Cin) { return head_tc::smem_bytes(Cin); }

int head_conv3d_tc_supported(int device, int Cin, std::string *why) {
    const size_t need = head_tc::smem_bytes(Cin);
    if (!need) {
        if (why) *why = "the tensor-core head is built for 32 or 64 feature channels, not " + std::to_string(Cin);
        return DENOISE_EINVAL;
    }
    int optin = 0;
    const cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) {
        if (why) *why = std::string("cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin): ") + cudaGetErrorString(e);
        return DENOISE_EDEVICE;
    }
    if ((size_t)optin < need) {
        if (why)
            *why = "the tensor-core head for " + std::to_string(Cin) + " feature channels needs " + std::to_string(need) +
                   " B of shared memory per block, the device allows " + std::to_string(optin);
        return DENOISE_EINVAL;
    }
    if (why) why->clear();
    return 0;
}

int head_conv3d_tc(Ctx &ctx, const bf16 *const F[3], int h, int w, int Cin, const bf16 *wk, const float *bias, int Cout,
                   const bf16 *residual, float *out, bool as_change, const TileShift *shifts) {
    DN_REQUIRE(F && F[0] && F[1] && F[2] && wk && bias && residual && out, "null pointer");
    DN_REQUIRE(Cin == 32 || Cin == 64, "Cin " + std::to_string(Cin) + " (this kernel is built for 32 and 64)");
    DN_REQUIRE(Cout >= 1 && Cout <= head_tc::kMaxCout, "Cout " + std::to_string(Cout) + " outside 1..16");
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    for (int dt = 0; dt < 3; ++dt)
        DN_REQUIRE(((uintptr_t)F[dt] & 15) == 0, "feature map " + std::to_string(dt) + " not 16-byte aligned");
    DN_REQUIRE(((uintptr_t)wk & 15) == 0, "weights not 16-byte aligned");
    const int64_t tiles_x = (w + head_tc::kTileW - 1) / head_tc::kTileW;
    const int64_t ntiles = tiles_x * ((h + head_tc::kTileH - 1) / head_tc::kTileH);
    DN_REQUIRE(ntiles <= 0x7fffffffLL, "map too large");
    std::string why;
    int rc = head_conv3d_tc_supported(ctx.device, Cin, &why);
    if (rc) return fail(ctx, rc, std::string(__func__) + ": " + why);
    head_tc::Args a{};
    for (int dt = 0; dt < 3; ++dt) a.F[dt] = reinterpret_cast<const uint16_t *>(F[dt]);
    TRY(tile_shifts_check(ctx, shifts, 3, w, a.shift, &a.shift_stride, &a.shift_tile));
    a.h = h;
    a.w = w;
    a.cin = Cin;
    a.wk = reinterpret_cast<const uint16_t *>(wk);
    a.bias = bias;
    a.cout = Cout;
    a.res = reinterpret_cast<const uint16_t *>(residual);
    a.out = out;
    a.as_change = as_change;
    a.tiles_x = (int)tiles_x;
    a.ntiles = (int)ntiles;
    return Cin == 32 ? launch<32>(ctx, a) : launch<64>(ctx, a);
}

}  // namespace cuda
}  // namespace denoise

#endif
