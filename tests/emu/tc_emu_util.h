// Helpers of the tensor-core kernels' CPU emulation tests (head_tc_emu_test, conv3x3_tc_emu_test,
// patch_tc_emu_test):
// bf16-valued random inputs, running a kernel's CTAs on the warp emulator (tests/emu/warp_emu.h) over
// poisoned shared memory, and the comparison with a double reference.
#ifndef DENOISE_TESTS_TC_EMU_UTIL_H
#define DENOISE_TESTS_TC_EMU_UTIL_H

#include "bf16.h"
#include "warp_emu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tc_emu {

namespace warp = denoise::cuda::warp;

// v rounded to bf16 (round to nearest even), as a float
inline float round_bf16(float v) { return bf16_host::round(v); }

// n values uniform in [lo, hi), each rounded to bf16, so that the kernel's bf16 input and the
// reference's float input are the same numbers
inline std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937 &rng) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float &x : v) x = round_bf16(d(rng));
    return v;
}

// the bf16 bit patterns of v
inline std::vector<uint16_t> bits(const std::vector<float> &v) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = bf16_host::from_float(v[i]);
    return b;
}

// Runs CTAs 0..ncta-1 of `threads` threads, cta(block, tid, smem) each, on `bytes` of shared
// memory filled with 0xFF bytes (NaN as floats and as bf16) before every CTA.
template <class F>
void run_ctas(int ncta, int threads, size_t bytes, F cta) {
    std::vector<warp::u32x4> smem((bytes + 15) / 16);
    uint8_t *sm = reinterpret_cast<uint8_t *>(smem.data());
    for (int b = 0; b < ncta; ++b) {
        std::memset(sm, 0xFF, bytes);
        warp_emu::run_cta(threads, sm, bytes, [&](int tid) { cta(b, tid, sm); });
    }
}

// out against ref: relative L2 and max abs error over the finite outputs; `bad` counts the
// non-finite ones (unwritten outputs keep their NaN poison), `first_bad` the first's index.
struct Diff {
    double rel = 0, max_abs = 0;
    size_t bad = 0, first_bad = SIZE_MAX;
};

// n outputs against a float or double reference
template <class R>
Diff compare(const float *out, const R *ref, size_t n) {
    Diff r;
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            if (!r.bad++) r.first_bad = i;
            continue;
        }
        const double d = (double)out[i] - (double)ref[i];
        d2 += d * d;
        r2 += (double)ref[i] * (double)ref[i];
        r.max_abs = std::max(r.max_abs, std::fabs(d));
    }
    r.rel = std::sqrt(d2 / r2);
    return r;
}

inline Diff compare(const std::vector<float> &out, const std::vector<float> &ref) {
    return compare(out.data(), ref.data(), out.size());
}

}  // namespace tc_emu

#endif
