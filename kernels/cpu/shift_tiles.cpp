// Per-tile whole-pixel warp (the moving half of model option `align`, weights/denoise_train/align.py
// shift_tiles): out(p) = in(clamp(p + s_tile(p))), one shift (dy, dx) per tile, reads outside the
// map clamped to its edge.
//
// shift_tiles: an NHWC map at its own resolution (the head's feature maps F_{t-1} and F_{t+1},
// halved shifts on tiles of align_tile / 2). A source row is one clamped row; inside a tile the
// C-float samples of a row are contiguous unless the shifted run leaves the map, so a tile row is
// one copy of tile * C floats (per-sample copies only where the clamp bites).
// shift_tiles_s2d: the full-resolution frame behind the engine's space-to-depth network input
// (the fusion window's frames, full-resolution shifts on tiles of align_tile): pixel (Y, X) of
// colour c is token (Y / 2, X / 2), channel c*4 + (Y & 1)*2 + (X & 1), so an odd shift moves
// samples between channels; per output pixel the 3 colour samples are gathered from the source
// pixel's token.
// Traffic: one read and one write of the map (no arithmetic); rows are parallel.
#include <algorithm>
#include <cstring>

#include "denoise.h"
#include "ops.h"
#include "../common/parallel.h"

namespace denoise {
namespace cpu {

int shift_tiles(const float *in, int h, int w, int C, const int32_t *shifts, int tile, float *out) {
    if (!in || !shifts || !out || h <= 0 || w <= 0 || C <= 0 || tile <= 0 || h % tile || w % tile)
        return DENOISE_EINVAL;
    const int tw = w / tile;
    parallel_for(h, grain_for(h), [&](int64_t y0, int64_t y1) {
        for (int y = (int)y0; y < (int)y1; ++y) {
            const int32_t *s = shifts + (size_t)(y / tile) * tw * 2;
            float *o = out + (size_t)y * w * C;
            for (int tx = 0; tx < tw; ++tx) {
                const int sy = s[2 * tx], sx = s[2 * tx + 1];
                const float *row = in + (size_t)std::clamp(y + sy, 0, h - 1) * w * C;
                const int x0 = tx * tile;
                if (x0 + sx >= 0 && x0 + sx + tile <= w) {
                    std::memcpy(o + (size_t)x0 * C, row + (size_t)(x0 + sx) * C, sizeof(float) * tile * C);
                    continue;
                }
                for (int x = x0; x < x0 + tile; ++x)
                    std::memcpy(o + (size_t)x * C, row + (size_t)std::clamp(x + sx, 0, w - 1) * C, sizeof(float) * C);
            }
        }
    });
    return 0;
}

int shift_tiles_s2d(const float *in, int h2, int w2, const int32_t *shifts, int tile, float *out) {
    const int H = 2 * h2, W = 2 * w2;
    if (!in || !shifts || !out || h2 <= 0 || w2 <= 0 || tile <= 0 || tile % 2 || H % tile || W % tile)
        return DENOISE_EINVAL;
    const int tw = W / tile, t2 = tile / 2;
    parallel_for(h2, grain_for(h2), [&](int64_t r0, int64_t r1) {
        for (int y2 = (int)r0; y2 < (int)r1; ++y2) {
            const int32_t *s = shifts + (size_t)(y2 / t2) * tw * 2;
            float *orow = out + (size_t)y2 * w2 * 12;
            for (int dy = 0; dy < 2; ++dy)
                for (int tx = 0; tx < tw; ++tx) {
                    const int Y = std::clamp(2 * y2 + dy + s[2 * tx], 0, H - 1), sx = s[2 * tx + 1];
                    const float *irow = in + (size_t)(Y / 2) * w2 * 12 + (Y & 1) * 2;
                    for (int x2 = tx * t2; x2 < (tx + 1) * t2; ++x2)
                        for (int dx = 0; dx < 2; ++dx) {
                            const int X = std::clamp(2 * x2 + dx + sx, 0, W - 1);
                            const float *src = irow + (size_t)(X / 2) * 12 + (X & 1);
                            float *o = orow + (size_t)x2 * 12 + dy * 2 + dx;
                            o[0] = src[0];
                            o[4] = src[4];
                            o[8] = src[8];
                        }
                }
        }
    });
    return 0;
}

}  // namespace cpu
}  // namespace denoise
