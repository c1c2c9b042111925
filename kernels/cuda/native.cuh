// Device helpers for native frame samples (frame_in.cu, frame_out.cu): reading a component's
// sample as a normalised value, the bilinear chroma taps, and the colour matrix products, written
// with explicitly rounded operations (__fmul_rn, __fadd_rn: no fused multiply-add) so that they
// give the same floats as the CPU backend's C++ (x86-64 without FMA) for the same inputs.
#ifndef DENOISE_CUDA_NATIVE_CUH
#define DENOISE_CUDA_NATIVE_CUH

#include "common.cuh"

namespace denoise {
namespace cuda {

// Address of component c's sample word (x, y).
__device__ __forceinline__ const uint8_t *sample_ptr(const DevFrame &f, const DenoiseComponent &c, int x, int y) {
    return f.data[c.plane] + (int64_t)y * f.pitch[c.plane] + c.offset + (int64_t)x * c.step;
}

// The raw little-endian word of `bytes` bytes (1, 2, 4) at p (p aligned to `bytes`).
__device__ __forceinline__ uint32_t load_word(const uint8_t *p, int bytes) {
    if (bytes == 1) return *p;
    if (bytes == 2) return *reinterpret_cast<const uint16_t *>(p);
    return *reinterpret_cast<const uint32_t *>(p);
}

// Normalised value of component c at (x, y): code / (2^depth - 1) for integers (the code is the
// word shifted right by `shift` and masked to `depth` bits), the float itself for floats.
__device__ __forceinline__ float load_value(const DevFrame &f, const DenoiseComponent &c, int bytes, int is_float,
                                            int x, int y) {
    const uint32_t w = load_word(sample_ptr(f, c, x, y), bytes);
    if (is_float) return __uint_as_float(w);
    const uint32_t mask = (1u << c.depth) - 1u;
    return __fmul_rn((float)((w >> c.shift) & mask), __fdiv_rn(1.0f, (float)mask));
}

// denoise.h's float rule before the network: NaN -> 0, +Inf -> 1, -Inf -> 0, finite values
// clamped to [-1, 2].
__device__ __forceinline__ float sanitize(float v) {
    if (isnan(v)) return 0.f;
    if (isinf(v)) return v > 0.f ? 1.f : 0.f;
    return fminf(2.f, fmaxf(-1.f, v));
}

// A gray sample (code value v normalised, or the float) to R'G'B' units: floats through sanitize,
// integers through row 0 of the decoding matrix with neutral chroma (Y' -> the common R'G'B').
__device__ __forceinline__ float gray_value(const FrameColor &col, float v, int is_float) {
    if (is_float) return sanitize(v);
    const float *m = col.dec[0];
    return __fadd_rn(__fadd_rn(__fmul_rn(m[0], v), __fmul_rn(__fadd_rn(m[1], m[2]), col.neutral)), col.dec_off[0]);
}

// One axis of the bilinear chroma upsampling (the filter's make_taps): luma coordinate i reads
// chroma samples i0 (weight 1 - w) and i1 (weight w) of n; chroma sample k sits at luma
// coordinate k * sub + off, off = pos / 256 * (sub - 1), sub = 1 << log2_sub.
struct Tap {
    int i0, i1;
    float w;
};
// The divisions by 256 and by sub are multiplications by the exact powers of two 2^-8 and
// 2^-log2_sub: the same floats as the CPU's pos / 256.0f and (i - off) / sub, without a division.
__device__ __forceinline__ float chroma_offset(int log2_sub, int pos) {
    return __fmul_rn(__fmul_rn((float)pos, 0x1p-8f), (float)((1 << log2_sub) - 1));
}
__device__ __forceinline__ Tap chroma_tap(int i, int n, int log2_sub, int pos) {
    const float off = chroma_offset(log2_sub, pos);
    const float c = __fmul_rn(__fsub_rn((float)i, off), __int_as_float((127 - log2_sub) << 23));  // x 2^-log2_sub
    const int c0 = (int)floorf(c);
    Tap t;
    t.w = __fsub_rn(c, (float)c0);
    t.i0 = min(max(c0, 0), n - 1);
    t.i1 = min(max(c0 + 1, 0), n - 1);
    return t;
}

// a + w (b - a), rounded after each operation.
__device__ __forceinline__ float lerp_rn(float a, float b, float w) { return __fadd_rn(a, __fmul_rn(w, __fsub_rn(b, a))); }

// Row r of a 3x3 matrix times v: (m0 v0 + m1 v1) + m2 v2, rounded after each operation.
__device__ __forceinline__ float dot3_rn(const float m[3], float v0, float v1, float v2) {
    return __fadd_rn(__fadd_rn(__fmul_rn(m[0], v0), __fmul_rn(m[1], v1)), __fmul_rn(m[2], v2));
}

}  // namespace cuda
}  // namespace denoise

#endif
