// Output head, stencil pass (the project's own two-pass form of conv3d 3x3x3, c0 -> 12; c0 32 in
// models v1 / v2, any width of the network: this pass does not see it).
//
// Pass 1 (network.cu, through linear.cu): the temporal GEMM G (h*w, 112) fp32 =
// sum_dt F_dt (h*w, c0) bf16 x Wt_dt^T, Wt_dt (112, c0) bf16 with row (ky*3 + kx)*12 + o holding
// tap (dt, ky, kx) of output o; rows 108..111 are zero (N padded to a multiple of 16). Three
// cuBLASLt calls, beta 0, 1, 1 (fp32 accumulation across the time taps).
// Why: read per position, the 27-tap conv needs a 27 x c0 operand window for 12 outputs (a few
// FLOP per byte, operand-bound); as a GEMM the operand is each feature map once (2 c0 B per token
// per time tap) for 108 outputs, and the spatial taps move to this cheap pass.
// Pass 2 (here): out[y, x, o] = clamp(bias[o] + r + sum_{ky,kx} G[y+ky-1, x+kx-1, (ky*3+kx)*12 + o],
//   min(-1, r), max(1, r)), r = residual[y, x, o], G zero outside the map (the conv's spatial zero
// padding): the clamp range is widened to the input sample (weights/denoise_train/model.py output_clamp), so the
// clamp moves no out-of-range input by itself. One thread per output token, 12 fp32 accumulators; the nine shifted
// 48-byte reads of G rows y-1..y+1 come mostly from L1/L2, so G is read about once from DRAM.
// Value path: fp32 from the three time taps (GEMM accumulator) through the nine spatial taps, the
// bias and the residual (bf16 s2d frame); no intermediate rounding (G is fp32), so against the
// CPU reference only the bf16 rounding of F and of the weights remains. With as_change the
// kernel stores the change 0.5 (o - residual) that frame_out turns into samples (the residual's
// bf16 rounding cancels there).
// Bands: G holds only map rows g0.. (the network computes it in bands of rows to bound its
// memory); rows outside the map still count as zero, rows of the map outside G are never read.
// Traffic per token: 448 B (G) + 24 B (residual) read, 48 B written.
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

constexpr int kMaxCout = 16;

__global__ void head_stencil_kernel(const float *__restrict__ G, int Gc, int g0, int h, int w, int r0, int64_t n,
                                    const float *__restrict__ bias, int Cout, const bf16 *__restrict__ res,
                                    float *__restrict__ out, bool as_change) {
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= n) return;
    const int y = r0 + (int)(q / w), x = (int)(q % w);
    const int64_t p = (int64_t)y * w + x;
    float acc[kMaxCout];
#pragma unroll
    for (int o = 0; o < kMaxCout; ++o) acc[o] = o < Cout ? bias[o] : 0.f;
#pragma unroll
    for (int ky = 0; ky < 3; ++ky) {
        const int yy = y + ky - 1;
        if (yy < 0 || yy >= h) continue;
#pragma unroll
        for (int kx = 0; kx < 3; ++kx) {
            const int xx = x + kx - 1;
            if (xx < 0 || xx >= w) continue;
            const float *g = G + ((size_t)(yy - g0) * w + xx) * Gc + (ky * 3 + kx) * Cout;
#pragma unroll
            for (int o = 0; o < kMaxCout; ++o)
                if (o < Cout) acc[o] += g[o];
        }
    }
#pragma unroll
    for (int o = 0; o < kMaxCout; ++o)
        if (o < Cout) {
            const size_t i = (size_t)p * Cout + o;
            const float r = __bfloat162float(res[i]);
            const float v = fminf(fmaxf(1.f, r), fmaxf(fminf(-1.f, r), acc[o] + r));
            out[i] = as_change ? 0.5f * (v - r) : v;
        }
}

}  // namespace

int head_stencil(Ctx &ctx, const float *G, int Gc, int g0, int h, int w, int r0, int r1, const float *bias, int Cout,
                 const bf16 *residual, float *out, bool as_change) {
    DN_REQUIRE(G && bias && residual && out, "null pointer");
    DN_REQUIRE(Cout >= 1 && Cout <= kMaxCout, "Cout " + std::to_string(Cout) + " outside 1..16");
    DN_REQUIRE(Gc >= 9 * Cout, "G has " + std::to_string(Gc) + " channels, the stencil reads 9 x " +
                                   std::to_string(Cout) + " = " + std::to_string(9 * Cout));
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    DN_REQUIRE(r0 >= 0 && r0 < r1 && r1 <= h, "rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                                                   ") outside the map's " + std::to_string(h));
    DN_REQUIRE(g0 >= 0 && g0 <= (r0 > 0 ? r0 - 1 : 0), "G starts at row " + std::to_string(g0) + ", after row " +
                                                            std::to_string(r0 > 0 ? r0 - 1 : 0) + " the stencil reads");
    const int64_t n = (int64_t)(r1 - r0) * w;
    unsigned blocks;
    DN_REQUIRE(grid_1d(n, 128, &blocks), "grid too large");
    head_stencil_kernel<<<blocks, 128, 0, ctx.stream>>>(G, Gc, g0, h, w, r0, n, bias, Cout, residual, out, as_change);
    return launch_check(ctx, "head_stencil_kernel");
}

}  // namespace cuda
}  // namespace denoise
