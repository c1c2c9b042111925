// convert_out: the head's output back to the caller's frame: delta = (o - x_t) / 2 in [0,1] units,
// depth-to-space and cropped to H x W, three fp32 planes (the engine copies them to pinned host
// memory with one async D2H copy, then to the caller's planes).
//
// Math: o (h2, w2, 12) fp32 = clamp(head + s2d(x_t), -1, 1); pixel (Y, X) of colour c is channel
// c*4 + (Y&1)*2 + (X&1) at token (Y/2, X/2); delta = 0.5 (o - centre) with centre the same bf16
// s2d frame the head added, so the delta is the head's correction exactly (until the clamp).
// Layout: one thread per output pixel (Y, X), all three colours: reads 3 x (4 B + 2 B), writes
// 3 x 4 B; consecutive threads write consecutive X (coalesced stores).
#include "common.cuh"

namespace denoise {
namespace cuda {

__global__ void convert_out_kernel(const float *__restrict__ o, const bf16 *__restrict__ centre, int w2, int H, int W,
                                   float *__restrict__ delta) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)H * W) return;
    const int Y = (int)(i / W), X = (int)(i % W);
    const size_t base = ((size_t)(Y >> 1) * w2 + (X >> 1)) * 12 + (Y & 1) * 2 + (X & 1);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const size_t k = base + c * 4;
        delta[(size_t)c * H * W + i] = 0.5f * (o[k] - __bfloat162float(centre[k]));
    }
}

int convert_out(Ctx &ctx, const float *o, const bf16 *centre, int h2, int w2, int H, int W, float *delta) {
    DN_REQUIRE(o && centre && delta, "null pointer");
    DN_REQUIRE(H >= 1 && W >= 1 && H <= 2 * h2 && W <= 2 * w2,
               "frame " + std::to_string(W) + "x" + std::to_string(H) + " larger than the map " +
                   std::to_string(2 * w2) + "x" + std::to_string(2 * h2));
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)H * W, 256, &blocks), "grid too large");
    convert_out_kernel<<<blocks, 256, 0, ctx.stream>>>(o, centre, w2, H, W, delta);
    return launch_check(ctx, "convert_out_kernel");
}

}  // namespace cuda
}  // namespace denoise
