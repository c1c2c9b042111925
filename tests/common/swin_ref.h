// Test helpers for the fused Swin block: the tiles the kernel is built for, random block weights
// scaled like trained ones, random residual maps, and the CPU reference block built from kernels/cpu ops exactly as
// kernels/cpu/unet.cpp's swin_block runs them (the fp32 reference of the project).
#ifndef DENOISE_TESTS_SWIN_REF_H
#define DENOISE_TESTS_SWIN_REF_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "bf16.h"
#include "cpu/ops.h"
#include "cpu/unet.h"
#include "cuda/swin_block_desc.h"
#include "model.h"

namespace swin_ref {

// A tile plan of the fused block kernel (swin_tile): C channels, head dim HD, TW windows per CTA,
// NW warps, QA 1: q projected in the attention phase, MA: accumulator tiles per warp at most.
struct FusedTile {
    int C, HD, TW, NW, QA = 0, MA = 16;
};
// A kernel built (SWIN_FUSED_KERNELS): its tile plan, PF (first weight fragments before the
// barriers) and CTAS (0: ptxas's register heuristic, n: built for n CTAs per SM).
struct FusedKernel {
    FusedTile t;
    int PF = 0, CTAS = 0;
};

// The kernels kernels/cuda/swin_block_fused.cu builds (SWIN_FUSED_KERNELS), in its order.
inline std::vector<FusedKernel> instantiated_kernels() {
    std::vector<FusedKernel> v;
#define SWIN_REF_KERNEL(C, HD, TW, NW, QA, MA, PF, CTAS) v.push_back({{C, HD, TW, NW, QA, MA}, PF, CTAS});
    SWIN_FUSED_KERNELS(SWIN_REF_KERNEL)
#undef SWIN_REF_KERNEL
    return v;
}

// Their tile plans, each once, in that order.
inline std::vector<FusedTile> instantiated_tiles() {
    std::vector<FusedTile> v;
    for (const FusedKernel &k : instantiated_kernels()) {
        bool seen = false;
        for (const FusedTile &t : v)
            seen = seen || (t.C == k.t.C && t.HD == k.t.HD && t.TW == k.t.TW && t.NW == k.t.NW && t.QA == k.t.QA && t.MA == k.t.MA);
        if (!seen) v.push_back(k.t);
    }
    return v;
}

// One block's parameters in PyTorch layout, owned here; `w` points into them.
struct RandomBlock {
    int C = 0, heads = 0;
    std::vector<float> n1g, n1b, n2g, n2b, qkvw, qkvb, projw, projb, fc1w, fc1b, fc2w, fc2b, table;
    denoise::BlockW w;

    // LayerNorm gamma 1 + N(0, 0.1), beta N(0, 0.05); weights N(0, s) with s = 0.5 / sqrt(fan_in)
    // clamped to [0.02, 0.1]; biases N(0, 0.02); bias table N(0, 0.5) (trained tables reach a few
    // units).
    RandomBlock(int C_, int heads_, int shift, uint32_t seed) : C(C_), heads(heads_) {
        std::mt19937 rng(seed);
        auto normal = [&](std::vector<float> &v, size_t n, float mean, float sd) {
            std::normal_distribution<float> d(mean, sd);
            v.resize(n);
            for (float &x : v) x = d(rng);
        };
        auto wsd = [](int fan_in) { return std::min(0.1f, std::max(0.02f, 0.5f / std::sqrt((float)fan_in))); };
        const int Ch = 4 * C;
        normal(n1g, C, 1.f, 0.1f);
        normal(n1b, C, 0.f, 0.05f);
        normal(n2g, C, 1.f, 0.1f);
        normal(n2b, C, 0.f, 0.05f);
        normal(qkvw, (size_t)3 * C * C, 0.f, wsd(C));
        normal(qkvb, 3 * C, 0.f, 0.02f);
        normal(projw, (size_t)C * C, 0.f, wsd(C));
        normal(projb, C, 0.f, 0.02f);
        normal(fc1w, (size_t)Ch * C, 0.f, wsd(C));
        normal(fc1b, Ch, 0.f, 0.02f);
        normal(fc2w, (size_t)C * Ch, 0.f, wsd(Ch));
        normal(fc2b, C, 0.f, 0.02f);
        normal(table, (size_t)15 * 15 * heads, 0.f, 0.5f);
        w.norm1 = {n1g.data(), n1b.data(), C};
        w.norm2 = {n2g.data(), n2b.data(), C};
        w.qkv = {qkvw.data(), qkvb.data(), C, 3 * C};
        w.proj = {projw.data(), projb.data(), C, C};
        w.fc1 = {fc1w.data(), fc1b.data(), C, Ch};
        w.fc2 = {fc2w.data(), fc2b.data(), Ch, C};
        w.rel_bias.resize((size_t)heads * 64 * 64);
        denoise::gather_relative_bias(table.data(), 8, heads, w.rel_bias.data());
        w.shift = shift;
    }
};

// n values N(0, 1).
inline std::vector<float> random_map(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

// x (H, W, C) += proj(W-MSA(LN1(x))); x += fc2(GELU(fc1(LN2(x)))), the sequence of
// kernels/cpu/unet.cpp's swin_block over the whole map at once.
inline void reference_block(const denoise::BlockW &B, int C, int heads, float *x, int H, int W, float eps) {
    using namespace denoise::cpu;
    const int ws = 8, nwin = (H / ws) * (W / ws), Ch = 4 * C;
    const int64_t n = (int64_t)H * W;
    std::vector<float> win((size_t)n * C), qkv((size_t)n * 3 * C), att((size_t)n * C), hid((size_t)n * Ch);
    window_gather_layernorm(x, H, W, C, ws, B.shift, 0, nwin, B.norm1.g, B.norm1.b, eps, win.data());
    linear(win.data(), n, C, C, B.qkv.w, C, nullptr, 3 * C, qkv.data(), 0.f);
    window_attention(qkv.data(), B.qkv.b, H, W, C, heads, ws, B.shift, 0, nwin, B.rel_bias.data(), att.data());
    linear(att.data(), n, C, C, B.proj.w, C, nullptr, C, win.data(), 0.f);
    window_scatter_add(win.data(), B.proj.b, H, W, C, ws, B.shift, 0, nwin, x);
    layernorm(x, win.data(), n, C, B.norm2.g, B.norm2.b, eps, x, B.fc2.b);  // also x += fc2 bias
    linear(win.data(), n, C, C, B.fc1.w, C, nullptr, Ch, hid.data(), 0.f);
    gelu_tanh(hid.data(), n, Ch, B.fc1.b);
    linear(hid.data(), n, Ch, Ch, B.fc2.w, Ch, nullptr, C, x, 1.f);
}

struct Error {
    double rel_l2 = 0, max_abs = 0;  // of the output against the reference output (finite pairs)
    double delta_rel_l2 = 0;          // of the block's change (out - in) against the reference change
    int64_t nonfinite = 0;            // output elements that are NaN or Inf
    int64_t ref_nonfinite = 0;        // reference elements that are (the reference itself failed)
    int64_t first_nonfinite = -1;     // element index of the first non-finite output (-1: none)
    int64_t worst = -1;               // element index of the largest finite |out - ref|
};

// out, ref: the block's output and the reference's; in: their common input. Pairs where either
// side is non-finite are counted, not summed.
inline Error compare(const float *out, const float *ref, const float *in, int64_t n) {
    double num = 0, den = 0, dnum = 0, dden = 0, m = -1;
    Error e;
    for (int64_t i = 0; i < n; ++i) {
        const bool of = std::isfinite(out[i]), rf = std::isfinite(ref[i]);
        if (!rf) ++e.ref_nonfinite;
        if (!of) {
            if (e.nonfinite++ == 0) e.first_nonfinite = i;
        }
        if (!of || !rf) continue;
        const double d = (double)out[i] - ref[i], dr = (double)ref[i] - in[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
        dnum += d * d;
        dden += dr * dr;
        if (std::fabs(d) > m) {
            m = std::fabs(d);
            e.worst = i;
        }
    }
    e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    e.delta_rel_l2 = dden > 0 ? std::sqrt(dnum / dden) : std::sqrt(dnum);
    e.max_abs = e.nonfinite ? INFINITY : std::max(m, 0.0);
    return e;
}

// Pass criteria shared by the CPU emulation test and the GPU check: relative L2 of the output
// < 1e-2 and of the change < 3e-2, every element of output and reference finite.
constexpr double kRelL2 = 1e-2, kDeltaRelL2 = 3e-2;
inline bool passes(const Error &e) {
    return e.nonfinite == 0 && e.ref_nonfinite == 0 && e.rel_l2 < kRelL2 && e.delta_rel_l2 < kDeltaRelL2;
}

}  // namespace swin_ref

#endif
