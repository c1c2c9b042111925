// Output head: conv3d 3x3x3 (channels[0] -> 12 channels; time taps F_{t-1}, F_t, F_{t+1}, no time padding;
// spatial zero padding 1) + bias + s2d(x_t) residual r, clamped to [min(-1, r), max(1, r)] (the
// range widened to the input sample: weights/denoise_train/model.py output_clamp).
//
// Two passes (the idea of the project's stencil-head note, own code):
//  1. temporal GEMM: G (h*w, 9*Cout) = sum_dt F_dt (h*w, Cin) x Wt_dt (Cin, 9*Cout), where output
//     channel (ky*3 + kx)*Cout + o of G holds spatial tap (ky, kx) of output channel o. Three
//     sgemms with K = Cin (channels[0]: 32 in models v1/v2), N = 108; the operand is each feature map read once.
//  2. stencil: out[y, x, o] = clamp(bias[o] + res[y, x, o]
//                                    + sum_{ky,kx} G[y+ky-1, x+kx-1, (ky*3+kx)*Cout + o], -1, 1),
//     neighbours outside the map contribute 0 (the conv's zero padding). Nine shifted 12-float
//     reads per position, served from cache (rows y-1..y+1 of G).
// Value path: all 27 taps accumulate in fp32 (3 in the GEMM, 9 partial sums here), like the
// PyTorch reference up to summation order (~1e-6).
#include "ops.h"
#include "../common/parallel.h"

#include <algorithm>

namespace denoise {
namespace cpu {

void head_pack(const float *w, int Cout, int Cin, float *wt) {
    const int N = 9 * Cout;
    for (int dt = 0; dt < 3; ++dt)
        for (int ci = 0; ci < Cin; ++ci)
            for (int ky = 0; ky < 3; ++ky)
                for (int kx = 0; kx < 3; ++kx)
                    for (int o = 0; o < Cout; ++o)
                        wt[((size_t)dt * Cin + ci) * N + (ky * 3 + kx) * Cout + o] =
                            w[((((size_t)o * Cin + ci) * 3 + dt) * 3 + ky) * 3 + kx];
}

size_t head_work_floats(int h, int w, int Cout) { return (size_t)h * w * 9 * Cout; }

void head_conv3d(const float *const F[3], int h, int w, int Cin, const float *wt, const float *bias, int Cout,
                 const float *residual, float *out, float *G) {
    const int N = 9 * Cout;
    const int M = h * w;
    for (int dt = 0; dt < 3; ++dt)
        sgemm_rows(false, M, N, Cin, F[dt], Cin, wt + (size_t)dt * Cin * N, N, dt ? 1.0f : 0.0f, G, N);
    parallel_for(h, grain_for(h), [&](int64_t y0_, int64_t y1_) {
    for (int y = (int)y0_; y < (int)y1_; ++y)
        for (int x = 0; x < w; ++x) {
            float acc[64];
            for (int o = 0; o < Cout; ++o) acc[o] = bias[o];
            for (int ky = 0; ky < 3; ++ky) {
                const int yy = y + ky - 1;
                if (yy < 0 || yy >= h) continue;
                for (int kx = 0; kx < 3; ++kx) {
                    const int xx = x + kx - 1;
                    if (xx < 0 || xx >= w) continue;
                    const float *g = G + ((size_t)yy * w + xx) * N + (ky * 3 + kx) * Cout;
                    for (int o = 0; o < Cout; ++o) acc[o] += g[o];
                }
            }
            const size_t p = ((size_t)y * w + x) * Cout;
            for (int o = 0; o < Cout; ++o) {
                const float r = residual[p + o];
                out[p + o] = std::min(std::max(1.0f, r), std::max(std::min(-1.0f, r), acc[o] + r));
            }
        }
    });
}

}  // namespace cpu
}  // namespace denoise
