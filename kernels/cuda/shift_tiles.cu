// shift_tiles_s2d and shift_tiles: per-tile whole-pixel warps as copies (model option `align`'s
// moving half, weights/denoise_train/align.py shift_tiles), the GPU twins of
// kernels/cpu/shift_tiles.cpp: out(p) = in(clamp(p + s)), s = (dy, dx) the shift of the tile that
// holds p, reads outside the domain clamped to its edge. Pure copies of bf16 samples: the CPU's
// values on the same input, bit for bit. The engine moves neither the fusion window's frames
// (the fusion conv reads them through their maps) nor, with the tensor-core head, F_{t-1} and
// F_{t+1}: a read through the map costs no DRAM round trip of a whole frame. The gathers are
// tile_shift.h's, shared with those readers; these copies serve the two-pass head's maps
// (shift_tiles) and align_check's and the bench's reference (shift_tiles_s2d).
//
// shift_tiles_s2d: the full-resolution frame behind an s2d network input (h2, w2, 12): pixel
// (Y, X) of colour c is token (Y / 2, X / 2), channel c*4 + (Y & 1)*2 + (X & 1), so an odd shift
// moves samples between channels. One thread per output token gathers its 3 colour quads
// (tile_shift::s2d_quad: one 8-byte read of a source token for an even shift inside the map, else
// 4 two-byte reads) and writes 24 B as three 8-byte words.
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
// 3840 x 2176, 100 MB per frame and 267 MB per 32-channel map, 0.033 and 0.089 ms of DRAM time at
// 3.0 TB/s (measured on an H100: 0.043 and 0.099 ms).
#include "common.cuh"
#include "tile_shift.h"
#include "warp_mma.h"

namespace denoise {
namespace cuda {

namespace {


__global__ void shift_s2d_kernel(const bf16 *__restrict__ in, int h2, int w2, const int32_t *__restrict__ shifts,
                                 int stride, int tile, bf16 *__restrict__ out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h2 * w2) return;
    const int y2 = (int)(i / w2), x2 = (int)(i % w2);
    int dy, dx;
    tile_shift::shift_at(TileShift{shifts, stride, tile / 2}, y2, x2, dy, dx);
    const uint16_t *src = reinterpret_cast<const uint16_t *>(in);
    uint2 *o = reinterpret_cast<uint2 *>(out + i * 12);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const uint64_t q = tile_shift::s2d_quad(src, h2, w2, y2, x2, c, dy, dx);
        o[c] = make_uint2((unsigned)q, (unsigned)(q >> 32));
    }
}

__global__ void shift_map_kernel(const bf16 *__restrict__ in, int h, int w, int C, const int32_t *__restrict__ shifts,
                                 int stride, int tile, bool halve, bf16 *__restrict__ out) {
    const int per = C / 8;  // 16-byte words per token
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)h * w * per) return;
    const int64_t tok = i / per;
    const int k = (int)(i % per);
    const int y = (int)(tok / w), x = (int)(tok % w);
    int dy, dx, ys, xs;
    tile_shift::shift_at(TileShift{shifts, stride, tile}, y, x, dy, dx);
    if (halve) {
        tile_shift::feature_source(h, w, y, x, dy, dx, ys, xs);  // align.py align_features: floor(s / 2)
    } else {
        ys = clampi(y + dy, 0, h - 1);
        xs = clampi(x + dx, 0, w - 1);
    }
    reinterpret_cast<uint4 *>(out)[i] = reinterpret_cast<const uint4 *>(in)[((int64_t)ys * w + xs) * per + k];
}

}  // namespace

int tile_shifts_check(Ctx &ctx, const TileShift *shifts, int nframes, int w, const int32_t **map, int *stride,
                        int *tile) {
    *stride = *tile = 0;
    for (int k = 0; k < nframes; ++k) map[k] = nullptr;
    if (!shifts) return 0;
    for (int k = 0; k < nframes; ++k) {
        const TileShift &s = shifts[k];
        if (!s.map) continue;
        DN_REQUIRE(((uintptr_t)s.map & 7) == 0, "shift map " + std::to_string(k) + " not 8-byte aligned");
        DN_REQUIRE(s.tile >= 1 && s.stride >= (w + s.tile - 1) / s.tile,
                   "shift map " + std::to_string(k) + ": tiles of " + std::to_string(s.tile) + " tokens, " +
                       std::to_string(s.stride) + " per row, for a map " + std::to_string(w) + " tokens wide");
        DN_REQUIRE(!*tile || (s.tile == *tile && s.stride == *stride),
                   "shift maps of one launch with different tiles or strides");
        *tile = s.tile;
        *stride = s.stride;
        map[k] = s.map;
    }
    return 0;
}

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
