// Swin window attention (Liu et al. 2021) on NHWC fp32 maps, model.py's WindowAttention and the
// roll / partition / reverse of SwinBlock.forward.
//
// Per window (N = ws*ws = 64 tokens) and head (hd = 32): S = (q * hd^-0.5) k^T + B_h (+ mask),
// P = softmax_row(S), O = P v. The scores of one window-head are 64 x 64 floats (16 KB) and stay
// in L1/L2 with K^T (8 KB); q, k, v are read once from the qkv map and O written once, so the
// traffic is the qkv map (3C per token) plus the output (C per token). The 2 * 64 * C MAC per
// token are done by plain loops whose inner dimension (64 keys or 32 head channels) is contiguous
// so the compiler vectorises them; windows are spread over the pool (parallel.h).
//
// Shifted blocks: the map is rolled by -shift before partitioning; tokens of the rolled map that
// come from different regions (rows [0, H-ws), [H-ws, H-s), [H-s, H), same for columns) must not
// attend to each other. Only windows in the last window row or column contain more than one
// region, so the mask is built per window from the tokens' region ids, and skipped when uniform.
#include "fast_math.h"
#include "ops.h"
#include "../common/parallel.h"
#include "window_partition.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace denoise {
namespace cpu {

void window_gather(const float *map, int H, int W, int C, int ws, int shift, float *win) {
    for_each_window_token(H, W, ws, shift, 0, (H / ws) * (W / ws), [&](size_t m, size_t t) {
        std::memcpy(win + t * C, map + m * C, sizeof(float) * C);
    });
}

void window_scatter_add(const float *win, const float *bias, int H, int W, int C, int ws, int shift, int win0, int win1,
                        float *map) {
    for_each_window_token(H, W, ws, shift, win0, win1, [&](size_t m, size_t t) {
        const float *s = win + t * C;
        float *d = map + m * C;
        if (bias)
            for (int c = 0; c < C; ++c) d[c] += s[c] + bias[c];
        else
            for (int c = 0; c < C; ++c) d[c] += s[c];
    });
}

static inline int region(int p, int n, int ws, int s) { return p < n - ws ? 0 : (p < n - s ? 1 : 2); }

// 8 floats as one value (GCC/clang vector extension): the compiler keeps an array of these with
// constant indices in registers, which plain float loops with runtime bounds do not get.
// aligned(4): rows of the qkv map and scratch are only float-aligned.
// Only used inside always_inline helpers, so the AVX-vs-SSE argument ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32), aligned(4)));

__attribute__((always_inline)) static inline v8f load8(const float *p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
__attribute__((always_inline)) static inline void store8(float *p, v8f v) { std::memcpy(p, &v, sizeof v); }

// Softmax of one score row in place (masked keys get exactly 0); returns 1 / sum.
__attribute__((always_inline)) static inline float softmax_row(float *s, int N, const int *ids, int i, bool masked) {
    if (masked)
        for (int j = 0; j < N; ++j)
            if (ids[j] != ids[i]) s[j] = -INFINITY;
    float m = s[0];
#pragma omp simd reduction(max : m)
    for (int j = 1; j < N; ++j) m = s[j] > m ? s[j] : m;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < N; ++j) {
        s[j] = fast_expf(s[j] - m);
        sum += s[j];
    }
    if (masked) {  // fast_expf clamps -inf to exp(-87); make masked keys exactly 0
        for (int j = 0; j < N; ++j)
            if (ids[j] != ids[i]) {
                sum -= s[j];
                s[j] = 0.f;
            }
    }
    return 1.0f / sum;
}

// One window, all heads. Scratch: qs (N*hd), kt (hd*N), S (N*N) floats, ids (N) ints.
// NC, HDC: compile-time N and head dim (0 = use the runtime values). The model v1 case (64, 32)
// holds a score row in 8 vector registers and an output row in 4; ~2x the generic loops.
template <int NC, int HDC>
__attribute__((always_inline)) static inline void attend_body(const float *base, const float *qkv_bias, float *dst,
                                                              int C, int heads, int ws, const float *bias,
                                                              const int *ids, bool masked, float *qs, float *kt,
                                                              float *S) {
    const int N = NC ? NC : ws * ws, hd = HDC ? HDC : C / heads, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt((float)hd);
    const float *qb = qkv_bias;
    for (int h = 0; h < heads; ++h) {
        const float *bq = qb + h * hd, *bk = qb + C + h * hd, *bv = qb + 2 * C + h * hd;
        for (int t = 0; t < N; ++t) {
            const float *r = base + (size_t)t * C3 + h * hd;
            for (int d = 0; d < hd; ++d) {
                qs[(size_t)t * hd + d] = (r[d] + bq[d]) * scale;
                kt[(size_t)d * N + t] = r[C + d] + bk[d];
            }
        }
        const float *B = bias + (size_t)h * N * N;
        for (int i = 0; i < N; ++i) {
            float *s = S + (size_t)i * N;
            const float *b = B + (size_t)i * N;
            if constexpr (NC != 0 && NC % 8 == 0) {
                v8f acc[NC / 8];
#pragma GCC unroll 16
                for (int jb = 0; jb < NC / 8; ++jb) acc[jb] = load8(b + 8 * jb);
                for (int d = 0; d < hd; ++d) {
                    const float qd = qs[(size_t)i * hd + d];
                    const float *k = kt + (size_t)d * N;
#pragma GCC unroll 16
                    for (int jb = 0; jb < NC / 8; ++jb) acc[jb] += qd * load8(k + 8 * jb);
                }
#pragma GCC unroll 16
                for (int jb = 0; jb < NC / 8; ++jb) store8(s + 8 * jb, acc[jb]);
            } else {
#pragma omp simd
                for (int j = 0; j < N; ++j) s[j] = b[j];
                for (int d = 0; d < hd; ++d) {
                    const float qd = qs[(size_t)i * hd + d];
                    const float *k = kt + (size_t)d * N;
#pragma omp simd
                    for (int j = 0; j < N; ++j) s[j] += qd * k[j];
                }
            }
            const float inv = softmax_row(s, N, ids, i, masked);
            float *o = dst + (size_t)i * C + h * hd;
            if constexpr (HDC != 0 && HDC % 8 == 0) {
                v8f acc[HDC / 8];
#pragma GCC unroll 16
                for (int db = 0; db < HDC / 8; ++db) acc[db] = v8f{};
                for (int j = 0; j < N; ++j) {
                    const float p = s[j];
                    const float *v = base + (size_t)j * C3 + 2 * C + h * hd;
#pragma GCC unroll 16
                    for (int db = 0; db < HDC / 8; ++db) acc[db] += p * load8(v + 8 * db);
                }
#pragma GCC unroll 16
                for (int db = 0; db < HDC / 8; ++db) store8(o + 8 * db, acc[db] * inv + load8(bv + 8 * db));
            } else {
#pragma omp simd
                for (int d = 0; d < hd; ++d) o[d] = 0.f;
                for (int j = 0; j < N; ++j) {
                    const float p = s[j];
                    const float *v = base + (size_t)j * C3 + 2 * C + h * hd;
#pragma omp simd
                    for (int d = 0; d < hd; ++d) o[d] += p * v[d];
                }
#pragma omp simd
                for (int d = 0; d < hd; ++d) o[d] = o[d] * inv + bv[d];
            }
        }
    }
}

DENOISE_HOT static void attend_window_64_32(const float *base, const float *qkv_bias, float *dst, int C, int heads,
                                            int ws, const float *bias, const int *ids, bool masked, float *qs,
                                            float *kt, float *S) {
    attend_body<64, 32>(base, qkv_bias, dst, C, heads, ws, bias, ids, masked, qs, kt, S);
}

DENOISE_HOT static void attend_window_any(const float *base, const float *qkv_bias, float *dst, int C, int heads,
                                          int ws, const float *bias, const int *ids, bool masked, float *qs, float *kt,
                                          float *S) {
    attend_body<0, 0>(base, qkv_bias, dst, C, heads, ws, bias, ids, masked, qs, kt, S);
}

void window_attention(const float *qkv, const float *qkv_bias, int H, int W, int C, int heads, int ws, int shift,
                      int win0, int win1, const float *bias, float *out) {
    const int N = ws * ws, hd = C / heads;
    const int nwx = W / ws;
    parallel_for(win1 - win0, 4, [&](int64_t l0, int64_t l1) {
        // Scratch per thread, reused across calls (attention runs ~10 times per U-Net pass).
        thread_local std::vector<float> qs, kt, S;
        thread_local std::vector<int> ids;
        qs.resize((size_t)N * hd);
        kt.resize((size_t)hd * N);
        S.resize((size_t)N * N);
        ids.resize(N);
        for (int li = (int)l0; li < (int)l1; ++li) {
            const int wi = win0 + li, wy = wi / nwx, wx = wi % nwx;
            bool masked = false;
            if (shift) {
                for (int t = 0; t < N; ++t)
                    ids[t] = region(wy * ws + t / ws, H, ws, shift) * 3 + region(wx * ws + t % ws, W, ws, shift);
                for (int t = 1; t < N; ++t) masked |= ids[t] != ids[0];
            }
            auto fn = (N == 64 && hd == 32) ? attend_window_64_32 : attend_window_any;
            fn(qkv + (size_t)li * N * 3 * C, qkv_bias, out + (size_t)li * N * C, C, heads, ws, bias, ids.data(), masked,
               qs.data(), kt.data(), S.data());
        }
    });
}

}  // namespace cpu
}  // namespace denoise
