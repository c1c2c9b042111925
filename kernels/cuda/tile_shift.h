// Model v2's per-tile whole-pixel shifts applied where a map is read (align's moving half,
// weights/denoise_train/align.py shift_tiles: out(p) = in(clamp(p + s)), s the shift of the tile
// holding p, reads clamped to the map's edge), so that no moved copy of a frame or feature map is
// written: the fusion conv (conv3x3_tc.cu, conv3x3.cu) gathers the window's frames through their
// maps, the tensor-core head (head_tc.cu) F_{t-1} and F_{t+1}, and shift_tiles.cu's copies (the
// two-pass head's moved maps, align_check's reference) use the same functions. Pure index math and
// copies of bf16 samples: a gathered sample is the CPU's shift_tiles / shift_tiles_s2d value bit for
// bit.
//
// TileShift is plain C++ (ops.h, the host side, includes it); the functions are device code
// and, under DENOISE_WARP_EMULATION, plain C++ (tests/emu run the consumers' kernel bodies on the
// CPU).
#ifndef DENOISE_CUDA_TILE_SHIFT_H
#define DENOISE_CUDA_TILE_SHIFT_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace denoise {
namespace cuda {

// The shifts a consumer applies to one of its input maps. map: (rows, stride, 2) int32 (dy, dx)
// per tile in full-resolution pixels (block_match's output), pointing at the tile that holds the
// consumer's token (0, 0) (a tile domain's first tile, or the frame's); null: the map is read
// unshifted. tile: the tile side in tokens (align_tile / 2: s2d frames and level-0 feature maps
// are both at token resolution). An s2d frame moves by (dy, dx) full-resolution pixels (an odd
// shift moves samples between its channels); a feature map by (dy, dx) halved with floor tokens
// (align.py align_features).
struct TileShift {
    const int32_t *map = nullptr;
    int stride = 0;  // tiles per row of the whole map
    int tile = 0;    // tokens per tile side
};

}  // namespace cuda
}  // namespace denoise

#if defined(__CUDACC__) || defined(DENOISE_WARP_EMULATION)
#include "warp_mma.h"

namespace denoise {
namespace cuda {
namespace tile_shift {

#if defined(DENOISE_WARP_EMULATION)
inline int ctz(unsigned v) { return __builtin_ctz(v); }
inline uint16_t ld_u16(const uint16_t *p) { return *p; }
inline uint64_t ld_u64(const uint16_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline void ld_shift(const int32_t *p, int &dy, int &dx) {
    dy = p[0];
    dx = p[1];
}
#else
DN_DEVI int ctz(unsigned v) { return __ffs((int)v) - 1; }
// read-only data (frames and maps the launch does not write): the non-coherent path
DN_DEVI uint16_t ld_u16(const uint16_t *p) { return __ldg(reinterpret_cast<const unsigned short *>(p)); }
DN_DEVI uint64_t ld_u64(const uint16_t *p) { return __ldg(reinterpret_cast<const unsigned long long *>(p)); }
DN_DEVI void ld_shift(const int32_t *p, int &dy, int &dx) {
    const int2 v = __ldg(reinterpret_cast<const int2 *>(p));
    dy = v.x;
    dx = v.y;
}
#endif

// The shift (dy, dx) of the tile holding token (y, x) (y, x >= 0). Tiles of a power of two
// tokens (align_tile 16 / 32 / 64 / 128) by shifts, without the integer division's instruction
// sequence (the branch is uniform across the launch).
DN_DEVI void shift_at(const TileShift &s, int y, int x, int &dy, int &dx) {
    int ty, tx;
    if (!(s.tile & (s.tile - 1))) {
        const int k = ctz((unsigned)s.tile);
        ty = y >> k;
        tx = x >> k;
    } else {
        ty = y / s.tile;
        tx = x / s.tile;
    }
    ld_shift(s.map + ((size_t)ty * s.stride + tx) * 2, dy, dx);
}

// Colour quad c (c 0..2) of token (y, x) of the s2d frame f (h2, w2, 12) bf16 moved by (dy, dx)
// full-resolution pixels: the 4 samples c*4 + (py*2 + px), py, px in {0, 1}, of pixels (2y + py,
// 2x + px) read at pixel (clamp(2y + py + dy), clamp(2x + px + dx)) of the 2 h2 x 2 w2 frame, as
// 4 bf16 in one little-endian word (sample py*2 + px in bits 16 (py*2 + px)). An even shift with no
// clamp takes one source token's quad (one 8-byte read; the token's quads are 8-byte aligned when
// f is); otherwise each sample from its own token and channel.
DN_DEVI uint64_t s2d_quad(const uint16_t *f, int h2, int w2, int y, int x, int c, int dy, int dx) {
    const int H = 2 * h2, W = 2 * w2;
    const int Y0 = clampi(2 * y + dy, 0, H - 1), Y1 = clampi(2 * y + 1 + dy, 0, H - 1);
    const int X0 = clampi(2 * x + dx, 0, W - 1), X1 = clampi(2 * x + 1 + dx, 0, W - 1);
    if (!(Y0 & 1) && Y1 == Y0 + 1 && !(X0 & 1) && X1 == X0 + 1)
        return ld_u64(f + ((size_t)(Y0 >> 1) * w2 + (X0 >> 1)) * 12 + 4 * c);
    const uint16_t *r0 = f + (size_t)(Y0 >> 1) * w2 * 12 + 4 * c + (Y0 & 1) * 2;
    const uint16_t *r1 = f + (size_t)(Y1 >> 1) * w2 * 12 + 4 * c + (Y1 & 1) * 2;
    const int o0 = (X0 >> 1) * 12 + (X0 & 1), o1 = (X1 >> 1) * 12 + (X1 & 1);
    return (uint64_t)ld_u16(r0 + o0) | (uint64_t)ld_u16(r0 + o1) << 16 | (uint64_t)ld_u16(r1 + o0) << 32 |
           (uint64_t)ld_u16(r1 + o1) << 48;
}

// The token (ys, xs) of an h x w feature map that token (y, x) reads when moved by the full-
// resolution shift (dy, dx): (clamp(y + floor(dy / 2)), clamp(x + floor(dx / 2))).
DN_HD void feature_source(int h, int w, int y, int x, int dy, int dx, int &ys, int &xs) {
    ys = clampi(y + (dy >> 1), 0, h - 1);  // >> 1 of a negative int: floor (two's complement)
    xs = clampi(x + (dx >> 1), 0, w - 1);
}

}  // namespace tile_shift
}  // namespace cuda
}  // namespace denoise
#endif  // __CUDACC__ || DENOISE_WARP_EMULATION

#endif
