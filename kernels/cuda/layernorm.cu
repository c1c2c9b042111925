// LayerNorm (PyTorch semantics: biased variance, eps inside the square root) over the channels
// of each token, fp32 in (the residual stream), bf16 out (the next GEMM's operand).
//
// Math: y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var in fp32 over C values;
// two-pass (mean first, then the centred sum of squares) from registers, like the CPU op.
// Layout: one warp per token, lane l holds channels l, l+32, ... (C <= 1024). layernorm_window
// reads token ((wy ws + i + shift) % H, (wx ws + j + shift) % W) for output position (window
// (wy, wx), token (i, j)): Swin's torch.roll(-shift) + window_partition as index math, no copy;
// windows [win0, win1) only (the Swin block runs its attention half in chunks of windows).
// Traffic per token: 4C B read, 2C B written (C = 32: 128 + 64 B); the window gather reads rows
// of ws tokens (ws * 4C = 1 KB contiguous at C = 32), so it stays coalesced.
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

constexpr int kMaxPerLane = 32;  // C <= 1024

__device__ __forceinline__ void ln_warp(const float *__restrict__ src, int C, const float *__restrict__ g,
                                        const float *__restrict__ b, float eps, bf16 *__restrict__ dst, int lane) {
    float v[kMaxPerLane];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const int c = lane + 32 * k;
        v[k] = c < C ? src[c] : 0.f;
        s += v[k];
    }
    const float mean = warp_sum(s) / C;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const int c = lane + 32 * k;
        const float d = c < C ? v[k] - mean : 0.f;
        q += d * d;
    }
    const float rstd = rsqrtf(warp_sum(q) / C + eps);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const int c = lane + 32 * k;
        if (c < C) dst[c] = __float2bfloat16_rn((v[k] - mean) * rstd * g[c] + b[c]);
    }
}

__global__ void layernorm_rows_kernel(const float *__restrict__ x, int64_t n, int C, const float *__restrict__ g,
                                      const float *__restrict__ b, float eps, bf16 *__restrict__ out) {
    const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (t >= n) return;
    ln_warp(x + t * C, C, g, b, eps, out + t * C, threadIdx.x & 31);
}

__global__ void layernorm_window_kernel(const float *__restrict__ x, int H, int W, int C, int ws, int shift, int win0,
                                        int64_t ntok, const float *__restrict__ g, const float *__restrict__ b,
                                        float eps, bf16 *__restrict__ out) {
    const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (t >= ntok) return;
    const int N = ws * ws, nwx = W / ws;
    const int64_t wi = win0 + t / N;
    const int r = (int)(t % N);
    const int wy = (int)(wi / nwx), wx = (int)(wi % nwx);
    const int y = (wy * ws + r / ws + shift) % H, xx = (wx * ws + r % ws + shift) % W;
    ln_warp(x + ((size_t)y * W + xx) * C, C, g, b, eps, out + t * C, threadIdx.x & 31);
}

}  // namespace

int layernorm_rows(Ctx &ctx, const float *x, int64_t n, int C, const float *g, const float *b, float eps, bf16 *out) {
    DN_REQUIRE(x && g && b && out, "null pointer");
    DN_REQUIRE(C >= 1 && C <= 32 * kMaxPerLane, "C " + std::to_string(C) + " outside 1..1024");
    DN_REQUIRE(n >= 1, "no tokens");
    unsigned blocks;
    DN_REQUIRE(grid_1d(n * 32, 256, &blocks), "grid too large");
    layernorm_rows_kernel<<<blocks, 256, 0, ctx.stream>>>(x, n, C, g, b, eps, out);
    return launch_check(ctx, "layernorm_rows_kernel");
}

int layernorm_window(Ctx &ctx, const float *x, int H, int W, int C, int ws, int shift, int win0, int win1,
                     const float *g, const float *b, float eps, bf16 *out) {
    DN_REQUIRE(x && g && b && out, "null pointer");
    DN_REQUIRE(C >= 1 && C <= 32 * kMaxPerLane, "C " + std::to_string(C) + " outside 1..1024");
    DN_REQUIRE(ws >= 1 && H >= ws && W >= ws && H % ws == 0 && W % ws == 0,
               "map " + std::to_string(W) + "x" + std::to_string(H) + " does not tile into " + std::to_string(ws) +
                   "x" + std::to_string(ws) + " windows");
    DN_REQUIRE(shift >= 0 && shift < ws, "shift " + std::to_string(shift) + " outside [0, ws)");
    const int64_t nwin = (int64_t)(H / ws) * (W / ws);
    DN_REQUIRE(win0 >= 0 && win0 < win1 && win1 <= nwin, "windows [" + std::to_string(win0) + ", " +
                                                             std::to_string(win1) + ") outside [0, " +
                                                             std::to_string(nwin) + ")");
    const int64_t ntok = (int64_t)(win1 - win0) * ws * ws;
    unsigned blocks;
    DN_REQUIRE(grid_1d(ntok * 32, 256, &blocks), "grid too large");
    layernorm_window_kernel<<<blocks, 256, 0, ctx.stream>>>(x, H, W, C, ws, shift, win0, ntok, g, b, eps, out);
    return launch_check(ctx, "layernorm_window_kernel");
}

}  // namespace cuda
}  // namespace denoise
