// shift_tiles_s2d and shift_tiles: per-tile whole-pixel warps (model option `align`'s moving
// half, weights/denoise_train/align.py shift_tiles), the GPU twins of kernels/cpu/shift_tiles.cpp: out(p) =
// in(clamp(p + s)), s = (dy, dx) the shift of the tile that holds p, reads outside the domain
// clamped to its edge. Pure copies of bf16 samples: the CPU's values on the same input, bit for
// bit.
//
// shift_tiles_s2d: the full-resolution frame behind an s2d network input (h2, w2, 12): pixel
// (Y, X) of colour c is token (Y / 2, X / 2), channel c*4 + (Y & 1)*2 + (X & 1), so an odd shift
// moves samples between channels. One thread per output token gathers its 12 samples from up to
// 4 source tokens (24 B written as three 8-byte words).
// shift_tiles: an NHWC map (h, w, C) at its own resolution (the head's feature maps); the shifts
// optionally halved with floor on the way (align.py align_features: torch.div(s, 2, "floor")).
// One thread per 16 bytes (8 channels) of an output token: a tile row of a feature map is one
// contiguous run in both maps unless the clamp bites.
// Domains: both ops run on a whole padded frame or on a tile domain of it; the shift map is the
// whole frame's, `shifts` points at the domain's first tile and `stride` is the map's tiles per
// row. Clamping to the domain's edge equals clamping to the frame's where the domain reaches the
// frame's edge; elsewhere the tiles plan's halo keeps the clamped reads out of the interior's
// reach (docs/cuda.md, "Alignment").
// Traffic: one read and one write of each map (24 B per s2d token, 2 C B per feature token): at
// 1920 x 1088, 12.5 MB per frame and 33 MB per 32-channel map, each a few microseconds of DRAM
// time on an H200. sm_90 (nvcc 13.0 -Xptxas -v): 28 and 26 registers, no spills, no stack.
#include "common.cuh"
#include "warp_mma.h"

namespace denoise {
namespace cuda {

namespace {


// floor(s / 2) (weights/denoise_train/align.py align_features)
__device__ __forceinline__ int floor_half(int s) { return s >> 1; }

__global__ void shift_s2d_kernel(const bf16 *__restrict__ in, int h2, int w2, const int32_t *__restrict__ shifts,
                                 int stride, int tile, bf16 *__restrict__ out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h2 * w2) return;
    const int y2 = (int)(i / w2), x2 = (int)(i % w2);
    const int H = 2 * h2, W = 2 * w2, t2 = tile / 2;
    const int32_t *s = shifts + ((size_t)(y2 / t2) * stride + x2 / t2) * 2;
    const int sy = s[0], sx = s[1];
    const uint16_t *src = reinterpret_cast<const uint16_t *>(in);
    __align__(8) uint16_t v[12];
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
        const int Y = clampi(2 * y2 + dy + sy, 0, H - 1);
#pragma unroll
        for (int dx = 0; dx < 2; ++dx) {
            const int X = clampi(2 * x2 + dx + sx, 0, W - 1);
            const uint16_t *p = src + ((size_t)(Y / 2) * w2 + X / 2) * 12 + (Y & 1) * 2 + (X & 1);
#pragma unroll
            for (int c = 0; c < 3; ++c) v[c * 4 + dy * 2 + dx] = p[c * 4];
        }
    }
    uint2 *o = reinterpret_cast<uint2 *>(out + i * 12);
    const uint2 *q = reinterpret_cast<const uint2 *>(v);
    o[0] = q[0];
    o[1] = q[1];
    o[2] = q[2];
}

__global__ void shift_map_kernel(const bf16 *__restrict__ in, int h, int w, int C, const int32_t *__restrict__ shifts,
                                 int stride, int tile, bool halve, bf16 *__restrict__ out) {
    const int per = C / 8;  // 16-byte words per token
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h * w * per) return;
    const int64_t tok = i / per;
    const int k = (int)(i % per);
    const int y = (int)(tok / w), x = (int)(tok % w);
    const int32_t *s = shifts + ((size_t)(y / tile) * stride + x / tile) * 2;
    int sy = s[0], sx = s[1];
    if (halve) {
        sy = floor_half(sy);
        sx = floor_half(sx);
    }
    const int ys = clampi(y + sy, 0, h - 1), xs = clampi(x + sx, 0, w - 1);
    reinterpret_cast<uint4 *>(out)[i] = reinterpret_cast<const uint4 *>(in)[((int64_t)ys * w + xs) * per + k];
}

}  // namespace

int shift_tiles_s2d(Ctx &ctx, const bf16 *in, int h2, int w2, const int32_t *shifts, int stride, int tile, bf16 *out) {
    DN_REQUIRE(in && shifts && out, "null pointer");
    DN_REQUIRE(((uintptr_t)out & 7) == 0, "out not 8-byte aligned");
    DN_REQUIRE(tile >= 2 && tile % 2 == 0 && h2 > 0 && w2 > 0 && (2 * h2) % tile == 0 && (2 * w2) % tile == 0,
               "tile " + std::to_string(tile) + " px (even) does not divide the domain " + std::to_string(2 * w2) + "x" +
                   std::to_string(2 * h2));
    DN_REQUIRE(stride >= 2 * w2 / tile, "shift map of " + std::to_string(stride) + " tiles per row, the domain has " +
                                            std::to_string(2 * w2 / tile));
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)h2 * w2, 256, &blocks), "grid too large");
    shift_s2d_kernel<<<blocks, 256, 0, ctx.stream>>>(in, h2, w2, shifts, stride, tile, out);
    return launch_check(ctx, "shift_s2d_kernel");
}

int shift_tiles(Ctx &ctx, const bf16 *in, int h, int w, int C, const int32_t *shifts, int stride, int tile, bool halve,
                bf16 *out) {
    DN_REQUIRE(in && shifts && out, "null pointer");
    DN_REQUIRE(C > 0 && C % 8 == 0, "C " + std::to_string(C) + " not a multiple of 8");
    DN_REQUIRE((((uintptr_t)in | (uintptr_t)out) & 15) == 0, "maps not 16-byte aligned");
    DN_REQUIRE(tile >= 1 && h > 0 && w > 0 && h % tile == 0 && w % tile == 0,
               "tile " + std::to_string(tile) + " does not divide the map " + std::to_string(w) + "x" + std::to_string(h));
    DN_REQUIRE(stride >= w / tile, "shift map of " + std::to_string(stride) + " tiles per row, the map has " +
                                       std::to_string(w / tile));
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)h * w * (C / 8), 256, &blocks), "grid too large");
    shift_map_kernel<<<blocks, 256, 0, ctx.stream>>>(in, h, w, C, shifts, stride, tile, halve, out);
    return launch_check(ctx, "shift_map_kernel");
}

}  // namespace cuda
}  // namespace denoise
