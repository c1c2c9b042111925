// Weight packing of the fused patch merge / patch expand kernels (kernels/cuda/patch_tc.cu): the
// GEMM operand B in mma.m16n8k16 fragment order, so that a warp reads one 16-byte vector per lane
// per (16-column group, k step of 16) straight from global memory (L1/L2-resident) and needs no
// shared memory for weights whatever the width.
//
// Packed layout of a GEMM with N output columns and reduction length K (both multiples of 16):
// u32 P[ng][ks][lane][4], ng = column group (16 columns), ks = k step, lane l = 4 g + t; P[..][0],
// [1] = the B fragment (b0, b1) of columns 16 ng + g, P[..][2], [3] that of columns 16 ng + 8 + g:
// b0 = bf16 (k 16 ks + 2 t, + 1), b1 = (k 16 ks + 2 t + 8, + 9), the lower k in the low half. N K
// bf16 in all (the size of the plain matrix).
//
// Index permutations folded into the packing (weights/denoise_train/model.py's s2d_nhwc / d2s_nhwc put channel
// c of sub-pixel j = 2 dy + dx at c * 4 + j):
//  - merge: the kernel's K index is sub-pixel-major, k' = j C + c (a run of 16 k' is 16 consecutive
//    channels of one source token); B(n, k') = W[n][c * 4 + j], and the LayerNorm's gamma / beta
//    are permuted the same way.
//  - expand: the expand GEMM's column index is sub-pixel-major, u' = j Cu + c (Cu = C2 / 4: an
//    n8 tile lands in one sub-pixel's consecutive channels); B(u', k) = W[c * 4 + j][k], bias too.
// Host-only header (plain C++: the engine's upload and the CPU emulation test).
#ifndef DENOISE_CUDA_PATCH_TC_H
#define DENOISE_CUDA_PATCH_TC_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace denoise {
namespace cuda {
namespace patch_tc {

// fp32 -> bf16 bits, round to nearest even (NaN stays NaN), as __float2bfloat16_rn.
inline uint16_t bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) | 0x40u) & 0xffffu);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// B(n, k) for n < N, k < K (N, K multiples of 16) -> the packed fragments (N K bf16 bits).
template <class F>
std::vector<uint16_t> pack_b(int N, int K, F &&B) {
    std::vector<uint16_t> p((size_t)N * K);
    const int ks_n = K / 16;
    for (int ng = 0; ng < N / 16; ++ng)
        for (int ks = 0; ks < ks_n; ++ks)
            for (int l = 0; l < 32; ++l) {
                const int g = l / 4, t = l % 4;
                uint16_t *o = &p[(((size_t)ng * ks_n + ks) * 32 + l) * 8];
                for (int h = 0; h < 2; ++h) {
                    const int n = 16 * ng + 8 * h + g, k = 16 * ks + 2 * t;
                    o[4 * h + 0] = bf16_bits(B(n, k));
                    o[4 * h + 1] = bf16_bits(B(n, k + 1));
                    o[4 * h + 2] = bf16_bits(B(n, k + 8));
                    o[4 * h + 3] = bf16_bits(B(n, k + 9));
                }
            }
    return p;
}

// Patch merge: W (Co, 4C) row-major fp32 (the reduction linear, PyTorch layout), gamma / beta (4C)
// of its LayerNorm. *wp: packed (Co 4C bf16), *g / *b: gamma / beta in k' order.
inline void pack_merge(const float *W, int C, int Co, const float *gamma, const float *beta, std::vector<uint16_t> *wp,
                       std::vector<float> *g, std::vector<float> *b) {
    const int K = 4 * C;
    *wp = pack_b(Co, K, [&](int n, int k) { return W[(size_t)n * K + (k % C) * 4 + k / C]; });
    g->resize(K);
    b->resize(K);
    for (int k = 0; k < K; ++k) {
        (*g)[k] = gamma[(k % C) * 4 + k / C];
        (*b)[k] = beta[(k % C) * 4 + k / C];
    }
}

// Patch expand + skip linear: We (C2, C) and its bias (C2) (the expand linear), Ws (Co, Ck) (the
// skip linear over [d2s(up) | skip], Ck = C2 / 4 + Cs). *we / *be: packed expand weight (C2 C)
// and bias in u' order; *ws: packed skip weight (Co (Ck + Cs)) over the kernel's operand
// [d2s(up) | skip_hi | skip_lo] (the skip map split into two bf16 parts, patch_tc.cu): columns
// [Wu | Ws | Ws] of Ws = [Wu | Ws].
inline void pack_expand(const float *We, const float *bias_e, int C, int C2, const float *Ws, int Ck, int Co,
                        std::vector<uint16_t> *we, std::vector<float> *be, std::vector<uint16_t> *ws) {
    const int Cu = C2 / 4, Cs = Ck - Cu;
    *we = pack_b(C2, C, [&](int u, int k) { return We[(size_t)((u % Cu) * 4 + u / Cu) * C + k]; });
    be->resize(C2);
    for (int u = 0; u < C2; ++u) (*be)[u] = bias_e[(u % Cu) * 4 + u / Cu];
    *ws = pack_b(Co, Ck + Cs, [&](int n, int k) { return Ws[(size_t)n * Ck + (k < Ck ? k : k - Cs)]; });
}

}  // namespace patch_tc
}  // namespace cuda
}  // namespace denoise

#endif
