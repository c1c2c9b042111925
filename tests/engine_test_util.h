// Shared helpers of the engine tests: where the test data lives and how tensors are compared.
#ifndef DENOISE_ENGINE_TEST_UTIL_H
#define DENOISE_ENGINE_TEST_UTIL_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

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

}  // namespace denoise_test

#endif
