// Shared helpers of the engine tests: where the test data lives and how tensors are compared.
#ifndef DENOISE_ENGINE_TEST_UTIL_H
#define DENOISE_ENGINE_TEST_UTIL_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "denoise.h"

namespace denoise_test {

// tests/data: $DENOISE_TEST_DATA, else the compile-time DENOISE_TEST_DATA_DIR, else next to this
// source file (works when the tests are built from the source tree).
inline std::string data_dir() {
    const char *e = std::getenv("DENOISE_TEST_DATA");
    if (e && *e) return e;  // empty counts as unset
#ifdef DENOISE_TEST_DATA_DIR
    return DENOISE_TEST_DATA_DIR;
#else
    std::string f = __FILE__;
    size_t p = f.find_last_of('/');
    return (p == std::string::npos ? std::string(".") : f.substr(0, p)) + "/data";
#endif
}

struct Diff {
    double max_abs = 0, rel_l2 = 0;
};

// max |a - b| and ||a - b|| / ||b|| over n floats.
inline Diff compare(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0, m = 0;
    for (int64_t i = 0; i < n; ++i) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        m = std::fmax(m, std::fabs(d));
        if (std::isnan(a[i])) m = INFINITY;
    }
    return {m, den > 0 ? std::sqrt(num / den) : std::sqrt(num)};
}

// Planar float32 R'G'B' (gbrpf32 with planes R, G, B in that order): what the goldens are pushed
// as. The engine's output is then the denoised value itself, out = in + change.
inline DenoisePixelFormat rgb_f32_format() {
    DenoisePixelFormat f{};
    f.nb_components = 3;
    for (int c = 0; c < 3; ++c) f.comp[c] = {c, 0, 4, 0, 32};
    f.bytes = 4;
    f.is_float = 1;
    return f;
}

// An image of three float planes (R, G, B) with a row pitch of `stride` floats, system R'G'B'.
inline DenoiseImage rgb_f32_image(float *r, float *g, float *b, ptrdiff_t stride) {
    DenoiseImage im{};
    im.data[0] = (uint8_t *)r;
    im.data[1] = (uint8_t *)g;
    im.data[2] = (uint8_t *)b;
    for (int i = 0; i < 3; ++i) im.linesize[i] = stride * (ptrdiff_t)sizeof(float);
    im.color.repr.sys = PL_COLOR_SYSTEM_RGB;
    im.color.repr.levels = PL_COLOR_LEVELS_FULL;
    return im;
}

// Params for the CPU backend on w x h frames of `fmt` (the rest: denoise_params_defaults()).
// `model` must outlive the params.
inline DenoiseParams cpu_params(const char *model, float sigma, int w, int h, const DenoisePixelFormat &fmt,
                                int threads = 0) {
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = model;
    p.backend = DENOISE_BACKEND_CPU;
    p.sigma = sigma;
    p.width = w;
    p.height = h;
    p.format = fmt;
    p.threads = threads;
    return p;
}

}  // namespace denoise_test

#endif
