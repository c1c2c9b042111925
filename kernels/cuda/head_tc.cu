// head_conv3d_tc: the output head (conv3d 3x3x3 on the feature maps F_{t-1}, F_t, F_{t+1}, 32 ->
// Cout <= 16 channels, spatial zero padding 1) + bias + residual + widened clamp in ONE kernel, an
// implicit GEMM on tensor cores (mma.sync.m16n8k16 bf16, fp32 accumulate; kernels/cuda/warp_mma.h).
// Same result as the two-pass head (three GEMMs into G (h*w, 112) fp32 + head.cu's stencil), which
// stays as the reference path (DENOISE_CUDA_FUSED=0), without G: G costs 448 B written and read
// per token, the whole head here moves 3 x 64 B of features + 2 Cout B of residual in and 4 Cout
// B out per token.
//
// Math: out[y, x, o] = clamp(a + r, min(-1, r), max(1, r)) (weights/denoise_train/model.py output_clamp), r =
// residual[y, x, o], a = bias[o] + sum_{ky, kx} sum_{dt < 3, c < 32} F_dt[y+ky-1, x+kx-1, c]
// W[o, c, dt, ky, kx], F zero outside the map; with as_change the kernel stores 0.5 (out - r)
// instead (frame_out.cu turns it into samples). As a GEMM: M = output tokens, N = Cout padded to
// 16 with zero weights, K = 9 spatial taps x 96 (the three time taps' 32 channels side by side);
// the A operand is read from a halo tile in shared memory at the token shifted by the tap.
// Why this form and not "G for the tile + halo in shared memory, then the 9-tap stencil": both
// issue the same tensor-core work (here 2 x 9 x 96 x 16 = 27.6 KFLOP per token; the G form 2 x
// 96 x 112 = 21.5 K per halo token, x 1.27 halo tokens per output token for a 16 x 16 tile =
// 27.3 K), but the G form needs 112 fp32 per halo token of shared memory (145 KB for 18 x 18) and
// a second pass through it, this one none.
//
// CTA: a 16 x 16 tile of output tokens, 8 warps; warp w owns tile rows 2w and 2w+1 (one m16 tile
// of 16 consecutive columns each) and both n8 tiles (acc: 2 x 2 x 4 fp32 per lane). Persistent:
// the grid is the number of CTAs resident at once, each loops over tiles t, t + grid, ..., so the
// weights are staged once per CTA. Shared memory: weights (9 taps, 16 n, 96 + 8 k) bf16 (29,952
// B), the halo (18 x 18 tokens, 96 + 8 channels) bf16 (67,392 B), the bias (16 fp32): 97,408 B, 2
// CTAs per SM on sm_80 / sm_90 (1 on sm_89). The +8 pads make the row strides 208 B, an odd
// multiple of 16 B, so every ldmatrix row set of 8 is conflict-free. Features are staged with
// 16-byte loads (a halo row of one time tap is 18 x 64 contiguous bytes), zero outside the map,
// 8 loads per thread in flight before their stores (3,888 chunks per tile: 2 batches of 256 x 8).
// sm_90 (nvcc 13.0 -Xptxas -v): 78 registers, no spills, no stack.
// Per (tap, k step of 16): 2 ldmatrix.x4 for A, 1 ldmatrix.x4 for B (both n8 tiles), 4 mma.
//
// Value path (where each rounding happens): F and the weights are bf16 already (F rounded by
// the network's features cast, the weights once at upload by head_conv3d_tc_pack, RNE) and
// enter the mma unchanged; products are exact and all 27 x 32 of them per output are summed in
// fp32 by the tensor cores (k in order within an mma, taps in order across mma); then + bias
// (fp32), + r (the bf16 residual widened exactly), the clamp, and (as_change) 0.5 (v - r), all
// fp32; output fp32. No intermediate rounding, as in the two-pass head (G is fp32): against the
// CPU engine only the bf16 rounding of F and of the weights and the fp32 summation order differ.
//
// Cost per output token (Cout 12): 27.6 KFLOP issued on tensor cores (20.7 K useful: 12 of 16
// N); DRAM 3 x 64 B of features (the halo re-reads 27 %, mostly from L2) + 24 B of residual read,
// 48 B written: at 4K (1920 x 1080 tokens) 57 GFLOP issued and 0.56 GB, ~0.13 ms at 4.3 TB/s;
// shared-memory reads 2.6 KB per token (ldmatrix), ~0.16 ms at 128 B / clock / SM on an H200.
//
// Limits: Cin 32 (the model's base channels), Cout 1..16, F / residual / out any h, w >= 1; F
// pointers 16-byte aligned; anything else is DENOISE_EINVAL with a message. The body
// (head_tc::head_cta) is written against warp_mma.h so that tests/emu/head_tc_emu_test.cpp runs this
// source on the CPU warp emulator.
#include "warp_mma.h"

#include <cstddef>
#include <cstring>

namespace denoise {
namespace cuda {
namespace head_tc {

using namespace warp;

constexpr int kTileH = 16, kTileW = 16, kWarps = 8, kThreads = 32 * kWarps;
constexpr int kHaloH = kTileH + 2, kHaloW = kTileW + 2;
constexpr int kCin = 32;                       // channels per feature map
constexpr int kK = 3 * kCin;                   // K per spatial tap: the three time taps
constexpr int kN = 16;                         // N: Cout padded with zero weights
constexpr int kMaxCout = kN;
constexpr int kStride = kK + 8;                // bf16 per halo token / per weight row in smem

struct Args {
    const uint16_t *F[3];  // (h, w, 32) bf16 bits: time taps t-1, t, t+1; 16-byte aligned
    int h, w;              // token map
    const uint16_t *wk;    // (9, 16, 96) bf16 bits (head_conv3d_tc_pack's layout)
    const float *bias;     // (Cout) fp32
    int cout;              // 1..16
    const uint16_t *res;   // (h, w, Cout) bf16 bits: the residual (s2d centre frame)
    float *out;            // (h, w, Cout) fp32
    bool as_change;
    int tiles_x, ntiles;
};

// Shared memory layout (byte offsets, all 16-byte aligned).
constexpr size_t kWOff = 0;
constexpr size_t kInOff = kWOff + (size_t)9 * kN * kStride * 2;
constexpr size_t kBiasOff = kInOff + (size_t)kHaloH * kHaloW * kStride * 2;
constexpr size_t kSmemBytes = kBiasOff + (size_t)kN * 4;
static_assert(kInOff % 16 == 0 && kBiasOff % 16 == 0, "shared memory regions 16-byte aligned");

// One CTA (tid 0 .. kThreads - 1) of the persistent grid: tiles cta, cta + ncta, ...
DN_DEVI void head_cta(const Args &a, int cta, int ncta, int tid, uint8_t *smem) {
    uint16_t *ws = reinterpret_cast<uint16_t *>(smem + kWOff);
    uint16_t *ins = reinterpret_cast<uint16_t *>(smem + kInOff);
    float *bs = reinterpret_cast<float *>(smem + kBiasOff);

    // weights: 9 x 16 rows of 96 bf16 (12 chunks of 16 B) -> rows of kStride
    for (int i = tid; i < 9 * kN * (kK / 8); i += kThreads) {
        const int r = i / (kK / 8), q = i - r * (kK / 8);
        st4(ws + (size_t)r * kStride + 8 * q, ldg4(a.wk + (size_t)r * kK + 8 * q));
    }
    for (int o = tid; o < kN; o += kThreads) bs[o] = o < a.cout ? a.bias[o] : 0.f;

    const int warp_id = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    // A (ldmatrix.x4) row of this lane: matrix lane / 8 = (row half (lane / 8) & 1, k half lane / 16)
    const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lcol = (lane >> 4) * 8;
    // B (ldmatrix.x4, not transposed, rows n of the (n, k) weights): matrix lane / 8 = (k half
    // (lane / 8) & 1, n half lane / 16): registers 0, 1 = b0, b1 of n tile 0, 2, 3 of n tile 1
    const int brow = (lane & 7) + (lane >> 4) * 8, bcol = ((lane >> 3) & 1) * 8;
    constexpr int kQ = kCin / 8;  // 16-byte chunks per token and time tap
    constexpr int kHaloChunks = 3 * kHaloH * kHaloW * kQ, kBatch = 8;  // 3888: 2 batches of 8 per thread
    for (int tile = cta; tile < a.ntiles; tile += ncta) {
        const int ty0 = (tile / a.tiles_x) * kTileH, tx0 = (tile % a.tiles_x) * kTileW;
        sync_cta();  // the weights are staged (first tile), or every warp is done with the last halo
        // halo: chunk i = ((dt, hy), hx, q): consecutive threads read a halo row of one time tap in
        // order; kBatch loads per thread in flight before their stores
        for (int i0 = tid; i0 < kHaloChunks; i0 += kBatch * kThreads) {
            u32x4 v[kBatch];
            DN_UNROLL
            for (int b = 0; b < kBatch; ++b) {
                const int i = i0 + b * kThreads;
                v[b] = u32x4{0u, 0u, 0u, 0u};
                const int q = i % kQ, r = i / kQ, hx = r % kHaloW, r2 = r / kHaloW, hy = r2 % kHaloH, dt = r2 / kHaloH;
                const int y = ty0 + hy - 1, x = tx0 + hx - 1;
                const uint16_t *src = dt == 0 ? a.F[0] : dt == 1 ? a.F[1] : a.F[2];
                if (i < kHaloChunks && y >= 0 && y < a.h && x >= 0 && x < a.w)
                    v[b] = ldg4(src + ((size_t)y * a.w + x) * kCin + 8 * q);
            }
            DN_UNROLL
            for (int b = 0; b < kBatch; ++b) {
                const int i = i0 + b * kThreads;
                const int q = i % kQ, r = i / kQ, hx = r % kHaloW, r2 = r / kHaloW, hy = r2 % kHaloH, dt = r2 / kHaloH;
                if (i < kHaloChunks) st4(ins + (size_t)(hy * kHaloW + hx) * kStride + dt * kCin + 8 * q, v[b]);
            }
        }
        sync_cta();

        float acc[2][2][4];
        DN_UNROLL
        for (int mi = 0; mi < 2; ++mi)
            DN_UNROLL
            for (int j = 0; j < 2; ++j)
                DN_UNROLL
                for (int e = 0; e < 4; ++e) acc[mi][j][e] = 0.f;
        DN_UNROLL_1
        for (int tap = 0; tap < 9; ++tap) {
            const int ky = tap / 3, kx = tap - 3 * ky;
            // A row: output (tile row 2 warp + mi, column lrow) at tap (ky, kx) = halo (row + ky, column + kx)
            const uint16_t *a0p = ins + (size_t)((2 * warp_id + ky) * kHaloW + lrow + kx) * kStride + lcol;
            const uint16_t *a1p = a0p + (size_t)kHaloW * kStride;
            const uint16_t *bp = ws + (size_t)(tap * kN + brow) * kStride + bcol;
            DN_UNROLL
            for (int kk = 0; kk < kK; kk += 16) {
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

// fp32 -> bf16 bits, round to nearest even (NaN kept quiet), on the host.
inline uint16_t bf16_bits_rn(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

}  // namespace head_tc

// Host: the kernel's weight layout from PyTorch's (Cout, 32, 3, 3, 3) fp32 (o, c, dt, ky, kx) ->
// wk (9 taps ky*3 + kx, 16 n = o (zero rows for o >= Cout), 96 k = dt*32 + c) bf16 bits (RNE).
// wk holds 9 x 16 x 96 values. false (nothing written) for Cin != 32 or Cout outside 1..16.
bool head_conv3d_tc_pack(const float *w_oitkk, int Cout, int Cin, uint16_t *wk) {
    if (Cin != head_tc::kCin || Cout < 1 || Cout > head_tc::kMaxCout) return false;
    for (int tap = 0; tap < 9; ++tap)
        for (int n = 0; n < head_tc::kN; ++n)
            for (int dt = 0; dt < 3; ++dt)
                for (int c = 0; c < Cin; ++c)
                    wk[((size_t)tap * head_tc::kN + n) * head_tc::kK + dt * Cin + c] =
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

__global__ void __launch_bounds__(head_tc::kThreads, 2) head_conv3d_tc_kernel(const head_tc::Args a) {
    extern __shared__ __align__(16) uint8_t smem[];
    head_tc::head_cta(a, blockIdx.x, gridDim.x, threadIdx.x, smem);
}

}  // namespace

size_t head_conv3d_tc_smem() { return head_tc::kSmemBytes; }

int head_conv3d_tc_supported(int device, std::string *why) {
    int optin = 0;
    const cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) {
        if (why) *why = std::string("cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin): ") + cudaGetErrorString(e);
        return DENOISE_EDEVICE;
    }
    if ((size_t)optin < head_tc::kSmemBytes) {
        if (why)
            *why = "the tensor-core head needs " + std::to_string(head_tc::kSmemBytes) +
                   " B of shared memory per block, the device allows " + std::to_string(optin);
        return DENOISE_EINVAL;
    }
    if (why) why->clear();
    return 0;
}

int head_conv3d_tc(Ctx &ctx, const bf16 *const F[3], int h, int w, const bf16 *wk, const float *bias, int Cout,
                   const bf16 *residual, float *out, bool as_change) {
    DN_REQUIRE(F && F[0] && F[1] && F[2] && wk && bias && residual && out, "null pointer");
    DN_REQUIRE(Cout >= 1 && Cout <= head_tc::kMaxCout, "Cout " + std::to_string(Cout) + " outside 1..16");
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    for (int dt = 0; dt < 3; ++dt)
        DN_REQUIRE(((uintptr_t)F[dt] & 15) == 0, "feature map " + std::to_string(dt) + " not 16-byte aligned");
    DN_REQUIRE(((uintptr_t)wk & 15) == 0, "weights not 16-byte aligned");
    const int64_t tiles_x = (w + head_tc::kTileW - 1) / head_tc::kTileW;
    const int64_t ntiles = tiles_x * ((h + head_tc::kTileH - 1) / head_tc::kTileH);
    DN_REQUIRE(ntiles <= 0x7fffffffLL, "map too large");
    std::string why;
    int rc = head_conv3d_tc_supported(ctx.device, &why);
    if (rc) return fail(ctx, rc, std::string(__func__) + ": " + why);
    head_tc::Args a{};
    for (int dt = 0; dt < 3; ++dt) a.F[dt] = reinterpret_cast<const uint16_t *>(F[dt]);
    a.h = h;
    a.w = w;
    a.wk = reinterpret_cast<const uint16_t *>(wk);
    a.bias = bias;
    a.cout = Cout;
    a.res = reinterpret_cast<const uint16_t *>(residual);
    a.out = out;
    a.as_change = as_change;
    a.tiles_x = (int)tiles_x;
    a.ntiles = (int)ntiles;
    const size_t smem = head_tc::kSmemBytes;
    int per_sm = 0, sms = 0;
    TRY(smem_kernel(ctx, (const void *)head_conv3d_tc_kernel, "head_conv3d_tc_kernel", head_tc::kThreads, smem, &per_sm,
                    &sms));
    const int grid = (int)std::min<int64_t>(ntiles, (int64_t)per_sm * sms);
    head_conv3d_tc_kernel<<<grid, head_tc::kThreads, smem, ctx.stream>>>(a);
    return launch_check(ctx, "head_conv3d_tc_kernel");
}

}  // namespace cuda
}  // namespace denoise

#endif
