// Patch merge (front half) and patch expand (back half) + skip concat of the U-Net.
//
// merge_s2d_layernorm: Swin's 2x2 patch merging before its linear: s2d of the fp32 map (H, W, C)
// to 4C channels (channel c*4 + dy*2 + dx, model.py's s2d_nhwc), LayerNorm over the 4C, bf16 out
// (H/2, W/2, 4C); the linear 4C -> C' (no bias; C' = 2C in models v1 / v2) is linear.cu's. One warp
// per output token.
// Traffic per output token: 16C B read (4 source tokens), 8C B written.
//
// d2s_concat: out (2h, 2w, C4/4 + 2 Cs) bf16 = [d2s(up) | skip_hi | skip_lo]: up (h, w, C4) bf16 is
// the expand linear's output (C -> C4 = 4 Cs), d2s as model.py's d2s_nhwc (out channel c of sub-pixel
// (dy, dx) is up channel c*4 + dy*2 + dx); skip (2h, 2w, Cs) fp32 is the encoder map of the same
// level, written as two bf16 parts hi = bf16(s), lo = bf16(s - hi) (s to about 2^-17 of its size:
// the skip map is the encoder's fp32 stream, and rounding it once to bf16 measurably costs PSNR,
// patch_tc.cu). The skip linear (2Cs -> Cs, its weight's skip columns repeated for lo: Net
// put_linear's dup) then reads the concat as one K = C4/4 + 2 Cs operand. One thread per output
// channel element; traffic per output token: (C4/4) 2 B + 2 Cs 4 B read (the skip map twice,
// mostly from L2), 2 (C4/4 + 2 Cs) B written.
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

constexpr int kMaxPerLane = 32;

__global__ void merge_s2d_ln_kernel(const float *__restrict__ x, int H, int W, int C, const float *__restrict__ g,
                                    const float *__restrict__ b, float eps, bf16 *__restrict__ out) {
    const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int ho = H / 2, wo = W / 2;
    if (t >= (int64_t)ho * wo) return;
    const int lane = threadIdx.x & 31;
    const int y = (int)(t / wo), xx = (int)(t % wo);
    const int C4 = 4 * C;
    float v[kMaxPerLane];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const int oc = lane + 32 * k;
        float a = 0.f;
        if (oc < C4) {
            const int c = oc >> 2, dy = (oc >> 1) & 1, dx = oc & 1;
            a = x[((size_t)(2 * y + dy) * W + 2 * xx + dx) * C + c];
        }
        v[k] = a;
        s += a;
    }
    const float mean = warp_sum(s) / C4;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const float d = lane + 32 * k < C4 ? v[k] - mean : 0.f;
        q += d * d;
    }
    const float rstd = rsqrtf(warp_sum(q) / C4 + eps);
    bf16 *o = out + t * C4;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
        const int oc = lane + 32 * k;
        if (oc < C4) o[oc] = __float2bfloat16_rn((v[k] - mean) * rstd * g[oc] + b[oc]);
    }
}

__global__ void d2s_concat_kernel(const bf16 *__restrict__ up, int h, int w, int C4, const float *__restrict__ skip,
                                  int Cs, bf16 *__restrict__ out) {
    const int Cu = C4 / 4, Co = Cu + 2 * Cs;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int W2 = 2 * w;
    if (i >= (int64_t)4 * h * w * Co) return;
    const int c = (int)(i % Co);
    const int64_t p = i / Co;
    const int Y = (int)(p / W2), X = (int)(p % W2);
    bf16 v;
    if (c < Cu) {
        v = up[((size_t)(Y >> 1) * w + (X >> 1)) * C4 + c * 4 + (Y & 1) * 2 + (X & 1)];
    } else {
        const int k = c - Cu;
        const float s = skip[(size_t)p * Cs + (k < Cs ? k : k - Cs)];
        const bf16 hi = __float2bfloat16_rn(s);
        v = k < Cs ? hi : __float2bfloat16_rn(s - __bfloat162float(hi));
    }
    out[i] = v;
}

}  // namespace

int merge_s2d_layernorm(Ctx &ctx, const float *x, int H, int W, int C, const float *g, const float *b, float eps,
                        bf16 *out) {
    DN_REQUIRE(x && g && b && out, "null pointer");
    DN_REQUIRE(H >= 2 && W >= 2 && H % 2 == 0 && W % 2 == 0,
               "map " + std::to_string(W) + "x" + std::to_string(H) + " not even");
    DN_REQUIRE(C >= 1 && 4 * C <= 32 * kMaxPerLane, "4C " + std::to_string(4 * C) + " outside 4..1024");
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)(H / 2) * (W / 2) * 32, 256, &blocks), "grid too large");
    merge_s2d_ln_kernel<<<blocks, 256, 0, ctx.stream>>>(x, H, W, C, g, b, eps, out);
    return launch_check(ctx, "merge_s2d_ln_kernel");
}

int d2s_concat(Ctx &ctx, const bf16 *up, int h, int w, int C4, const float *skip, int Cs, bf16 *out) {
    DN_REQUIRE(up && skip && out, "null pointer");
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    DN_REQUIRE(C4 >= 4 && C4 % 4 == 0, "up channels " + std::to_string(C4) + " not a multiple of 4");
    DN_REQUIRE(Cs >= 1, "skip channels < 1");
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)4 * h * w * (C4 / 4 + 2 * Cs), 256, &blocks), "grid too large");
    d2s_concat_kernel<<<blocks, 256, 0, ctx.stream>>>(up, h, w, C4, skip, Cs, out);
    return launch_check(ctx, "d2s_concat_kernel");
}

}  // namespace cuda
}  // namespace denoise
