// LayerNorm over the channels of each token: y = (x - mean) / sqrt(var + eps) * gamma + beta,
// biased variance, as torch.nn.LayerNorm. NHWC fp32, so a token's C channels are contiguous.
// Two passes over each token's C floats (mean, then variance and the affine) from L1; one read
// and one write of the map from memory. Variance is computed about the mean (not E[x^2]-mean^2)
// to keep the 1e-4 parity when |mean| >> std.
#include "ops.h"

#include <algorithm>
#include <cmath>

#include "fast_math.h"
#include "../common/parallel.h"
#include "window_partition.h"

namespace denoise {
namespace cpu {

DENOISE_HOT static void layernorm_token(const float *x, float *y, int C, const float *gamma, const float *beta,
                                        float eps) {
    float mean = 0.f;
#pragma omp simd reduction(+ : mean)
    for (int c = 0; c < C; ++c) mean += x[c];
    mean /= (float)C;
    float var = 0.f;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < C; ++c) {
        const float d = x[c] - mean;
        var += d * d;
    }
    var /= (float)C;
    const float r = 1.0f / std::sqrt(var + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = (x[c] - mean) * r * gamma[c] + beta[c];
}

DENOISE_HOT static void layernorm_rows(const float *in, float *out, int64_t n, int C, const float *gamma,
                                       const float *beta, float eps, float *tgt, const float *add) {
    for (int64_t t = 0; t < n; ++t) {
        layernorm_token(in + t * C, out + t * C, C, gamma, beta, eps);
        if (add) {
            float *x = tgt + t * C;
#pragma omp simd
            for (int c = 0; c < C; ++c) x[c] += add[c];
        }
    }
}

void layernorm(const float *in, float *out, int64_t n, int C, const float *gamma, const float *beta, float eps,
               float *in_add_target, const float *add) {
    const int64_t rows = 256;
    parallel_for(n, rows, [&](int64_t t0, int64_t t1) {
        layernorm_rows(in + t0 * C, out + t0 * C, t1 - t0, C, gamma, beta, eps, add ? in_add_target + t0 * C : nullptr,
                       add);
    });
}

void window_gather_layernorm(const float *map, int H, int W, int C, int ws, int shift, int win0, int win1,
                             const float *gamma, const float *beta, float eps, float *win) {
    for_each_window_token(H, W, ws, shift, win0, win1, [&](size_t m, size_t t) {
        layernorm_token(map + m * C, win + t * C, C, gamma, beta, eps);
    });
}

}  // namespace cpu
}  // namespace denoise
