// Host-side bf16 for the tests and tools: round to nearest even, independent of cuda_bf16.h's
// host paths and of the kernels' own helpers (the tests compare against those). NaN becomes the
// canonical quiet NaN 0x7fc0.
#ifndef DENOISE_TESTS_BF16_H
#define DENOISE_TESTS_BF16_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace bf16_host {

// the bf16 bit pattern nearest to f (ties to even)
inline uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// the value of bf16 bits h
inline float to_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// f rounded to bf16, as a float
inline float round(float f) { return to_float(from_float(f)); }

// every element rounded to bf16
inline std::vector<float> round(std::vector<float> v) {
    for (float &x : v) x = round(x);
    return v;
}

}  // namespace bf16_host

#endif
