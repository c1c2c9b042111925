// GELU, tanh approximation (F.gelu(approximate="tanh")):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Elementwise in place on the MLP hidden map (n x 4C floats): one read and one write. tanhf is the
// cost; at 4C = 128 channels it is ~15% of an MLP, which is why it is not fused into the GEMM here.
#include "ops.h"

#include <cmath>

namespace denoise {
namespace cpu {

void gelu_tanh(float *x, int64_t n) {
    const float k0 = 0.7978845608028654f;  // sqrt(2/pi)
    const float k1 = 0.044715f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
    }
}

}  // namespace cpu
}  // namespace denoise
