// Vectorisable exp for the hot elementwise loops (GELU, softmax). glibc's expf/tanhf are scalar
// calls the compiler cannot vectorise without -ffast-math; they were ~45% of a U-Net pass.
#ifndef DENOISE_CPU_FAST_MATH_H
#define DENOISE_CPU_FAST_MATH_H

#include <cstdint>
#include <cstring>

// Hot loops are compiled twice, for x86-64-v3 (AVX2 + FMA) and for the build's baseline, and the
// loader picks one at run time (GCC/clang target_clones, an ifunc), so a generic -O2 build of
// libdenoise still runs AVX2 code where the CPU has it. Must sit on a function that contains no
// OpenMP region: GCC outlines the region body before cloning, and the outlined body would stay
// baseline. Hence the pattern "OpenMP loop in the op, DENOISE_HOT kernel per chunk".
// no-trapping-math: without it GCC will not if-convert the float clamps/selects in these loops
// (a compare could raise an FP exception flag that nobody reads), and they stay scalar.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DENOISE_NO_CLONES)
#define DENOISE_HOT __attribute__((target_clones("arch=x86-64-v3", "default"), optimize("no-trapping-math")))
#elif defined(__x86_64__) && defined(__clang__) && !defined(DENOISE_NO_CLONES)
#define DENOISE_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define DENOISE_HOT __attribute__((optimize("no-trapping-math")))
#else
#define DENOISE_HOT
#endif

namespace denoise {
namespace cpu {

// exp(x) for x in [-87, 88] (clamped outside), max relative error ~2e-7 (Cephes' expf
// polynomial after the reduction x = n ln2 + r, |r| <= ln2/2, 2^n built in the exponent bits).
// Branch-free so that loops calling it vectorise.
__attribute__((always_inline)) static inline float fast_expf(float x) {
    x = x > -87.0f ? x : -87.0f;
    x = x < 88.0f ? x : 88.0f;
    // n = round(x / ln2) by the 1.5 * 2^23 trick (floorf does not vectorise at -O2); exact for
    // |x / ln2| < 2^22, and any rounding of a tie keeps |r| <= ln2/2.
    const float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    // ln2 split in two for an exact-enough r (Cody-Waite).
    float r = x - fn * 0.693359375f;
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t n = (int32_t)fn;
    const int32_t bits = (n + 127) << 23;
    return p * __builtin_bit_cast(float, bits);
}

}  // namespace cpu
}  // namespace denoise

#endif
