// GELU, tanh approximation (PyTorch's approximate="tanh"), in place on the fc1 output.
// Math: v = x + bias; y = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), fp32 (tanhf), one bf16
// rounding on the store. The bias is normally added by fc1's cuBLASLt epilogue (bias = null here);
// the argument exists for the fallback and the tests.
// Layout: rows x C bf16, two elements per thread (C even). Traffic per token: 2 x 2C B (C = 4 x
// the stage's channels: 256 B read + 256 B written per enc0 token).
#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

__device__ __forceinline__ float gelu_f(float v) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return 0.5f * v * (1.f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void gelu_kernel(__nv_bfloat162 *__restrict__ x, int64_t npairs, int C2, const float *__restrict__ bias) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npairs) return;
    float2 v = __bfloat1622float2(x[i]);
    if (bias) {
        const int c = (int)(i % C2) * 2;
        v.x += bias[c];
        v.y += bias[c + 1];
    }
    x[i] = __floats2bfloat162_rn(gelu_f(v.x), gelu_f(v.y));
}

}  // namespace

int gelu_tanh(Ctx &ctx, bf16 *x, int64_t rows, int C, const float *bias) {
    DN_REQUIRE(x, "null pointer");
    DN_REQUIRE(rows >= 1 && C >= 2 && C % 2 == 0, "rows " + std::to_string(rows) + ", C " + std::to_string(C) +
                                                      " (C must be even)");
    DN_REQUIRE(((uintptr_t)x & 3) == 0, "x not 4-byte aligned");
    const int64_t np = rows * C / 2;
    unsigned blocks;
    DN_REQUIRE(grid_1d(np, 256, &blocks), "grid too large");
    gelu_kernel<<<blocks, 256, 0, ctx.stream>>>(reinterpret_cast<__nv_bfloat162 *>(x), np, C / 2, bias);
    return launch_check(ctx, "gelu_kernel");
}

}  // namespace cuda
}  // namespace denoise
