// Residual adds and the fp32 -> bf16 cast.
//
// window_scatter_add: the attention branch's residual: x[map token] += win[window token] (+ bias),
// where map token ((wy ws + i + shift) % H, (wx ws + j + shift) % W) is window (wy, wx) token
// (i, j): Swin's window_reverse + torch.roll(+shift) as index math (the exact inverse of
// layernorm_window's gather), no rolled copy. x fp32 (H, W, C), win fp32 in window order (the proj
// GEMM's fp32 output: the branch reaches the residual stream unrounded, as in the fused block),
// windows [win0, win1) from its start.
// One thread per element; traffic per token 4C B read (win) + 4C B read-modify-write (x).
// (The MLP branch's residual needs no kernel: fc2's GEMM accumulates into x with beta = 1.)
//
// cast_to_bf16: fp32 -> bf16 (round to nearest even), used where a residual-stream map becomes a
// GEMM operand (the expand's input, the features F_s). add_f32: out = a + b.
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

__global__ void scatter_add_kernel(const float *__restrict__ win, const float *__restrict__ bias, int H, int W, int C,
                                   int ws, int shift, int win0, int64_t nel, float *__restrict__ x) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nel) return;
    const int c = (int)(i % C);
    const int64_t t = i / C;
    const int N = ws * ws, nwx = W / ws;
    const int64_t wi = win0 + t / N;
    const int r = (int)(t % N);
    const int wy = (int)(wi / nwx), wx = (int)(wi % nwx);
    const int y = (wy * ws + r / ws + shift) % H, xx = (wx * ws + r % ws + shift) % W;
    float v = win[i];
    if (bias) v += bias[c];
    x[((size_t)y * W + xx) * C + c] += v;
}

__global__ void cast_kernel(const float *__restrict__ in, int64_t n, bf16 *__restrict__ out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void add_kernel(const float *a, const float *b, int64_t n, float *out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

}  // namespace

int window_scatter_add(Ctx &ctx, const float *win, const float *bias, int H, int W, int C, int ws, int shift, int win0,
                       int win1, float *x) {
    DN_REQUIRE(win && x, "null pointer");
    DN_REQUIRE(C >= 1, "C < 1");
    DN_REQUIRE(ws >= 1 && H >= ws && W >= ws && H % ws == 0 && W % ws == 0,
               "map " + std::to_string(W) + "x" + std::to_string(H) + " does not tile into " + std::to_string(ws) +
                   "x" + std::to_string(ws) + " windows");
    DN_REQUIRE(shift >= 0 && shift < ws, "shift " + std::to_string(shift) + " outside [0, ws)");
    const int64_t nwin = (int64_t)(H / ws) * (W / ws);
    DN_REQUIRE(win0 >= 0 && win0 < win1 && win1 <= nwin, "windows [" + std::to_string(win0) + ", " +
                                                             std::to_string(win1) + ") outside [0, " +
                                                             std::to_string(nwin) + ")");
    const int64_t nel = (int64_t)(win1 - win0) * ws * ws * C;
    unsigned blocks;
    DN_REQUIRE(grid_1d(nel, 256, &blocks), "grid too large");
    scatter_add_kernel<<<blocks, 256, 0, ctx.stream>>>(win, bias, H, W, C, ws, shift, win0, nel, x);
    return launch_check(ctx, "scatter_add_kernel");
}

int cast_to_bf16(Ctx &ctx, const float *in, int64_t n, bf16 *out) {
    DN_REQUIRE(in && out, "null pointer");
    DN_REQUIRE(n >= 1, "n < 1");
    unsigned blocks;
    DN_REQUIRE(grid_1d(n, 256, &blocks), "grid too large");
    cast_kernel<<<blocks, 256, 0, ctx.stream>>>(in, n, out);
    return launch_check(ctx, "cast_kernel");
}

int add_f32(Ctx &ctx, const float *a, const float *b, int64_t n, float *out) {
    DN_REQUIRE(a && b && out, "null pointer");
    DN_REQUIRE(n >= 1, "n < 1");
    unsigned blocks;
    DN_REQUIRE(grid_1d(n, 256, &blocks), "grid too large");
    add_kernel<<<blocks, 256, 0, ctx.stream>>>(a, b, n, out);
    return launch_check(ctx, "add_kernel");
}

}  // namespace cuda
}  // namespace denoise
