// Space-to-depth 2x2 and its inverse on NHWC maps (pixel_unshuffle / pixel_shuffle semantics
// with channel index c*4 + dy*2 + dx, the convention of the frame conversion, patch merge and
// patch expand). Pure permutations: one read and one write of the map; rows are parallel.
#include "ops.h"
#include "../common/parallel.h"

namespace denoise {
namespace cpu {

void s2d_nhwc(const float *in, int h, int w, int C, float *out) {
    const int ho = h / 2, wo = w / 2;
    parallel_for(ho, grain_for(ho), [&](int64_t y0_, int64_t y1_) {
    for (int y = (int)y0_; y < (int)y1_; ++y)
        for (int x = 0; x < wo; ++x) {
            float *o = out + ((int64_t)y * wo + x) * 4 * C;
            for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx) {
                    const float *i = in + ((int64_t)(2 * y + dy) * w + 2 * x + dx) * C;
                    for (int c = 0; c < C; ++c) o[c * 4 + dy * 2 + dx] = i[c];
                }
        }
    });
}

void d2s_nhwc(const float *in, int h, int w, int C4, float *out) {
    const int C = C4 / 4, wo = 2 * w;
    parallel_for(h, grain_for(h), [&](int64_t y0_, int64_t y1_) {
    for (int y = (int)y0_; y < (int)y1_; ++y)
        for (int x = 0; x < w; ++x) {
            const float *i = in + ((int64_t)y * w + x) * C4;
            for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx) {
                    float *o = out + ((int64_t)(2 * y + dy) * wo + 2 * x + dx) * C;
                    for (int c = 0; c < C; ++c) o[c] = i[c * 4 + dy * 2 + dx];
                }
        }
    });
}

}  // namespace cpu
}  // namespace denoise
