// Model v1 on the GPU from the ops of ops.h (weights/model.py's UNet and Denoiser.head_out).
//
// Per Swin block on the fp32 map x (H, W, C), n = H W tokens (model.py SwinBlock):
//   layernorm_window (LN1 + shifted window gather)  -> tb   (n, C)  bf16
//   linear qkv (+ bias epilogue)                    -> qkv  (n, 3C) bf16
//   window_attention (bias table, shift mask)       -> att  (n, C)  bf16
//   linear proj (+ bias)                            -> tb   (n, C)  bf16
//   window_scatter_add (roll back, x += )           -> x    fp32
//   layernorm_rows (LN2)                            -> tb   (n, C)  bf16
//   linear fc1 (+ bias)                             -> hid  (n, 4C) bf16
//   gelu_tanh in place                              -> hid
//   linear fc2 (+ bias, beta = 1: x += in the GEMM) -> x    fp32
// U-Net: fusion_conv3x3 -> x0; enc0; merge_s2d_layernorm + linear -> x1; enc1; -> x2; mid;
// cast x2 + linear expand1 + d2s_concat [up | x1] + linear skip1 -> y1; dec1; cast y1 + expand0
// + d2s_concat [up | x0] + skip0 -> y0; dec0; cast -> F (bf16, the feature ring's format).
// Head: 3 GEMMs into G (n0, 112) fp32 + head_stencil.
#include "network.h"

#include "common.cuh"

#include <algorithm>

namespace denoise {
namespace cuda {

namespace {

std::vector<bf16> to_bf16(const float *p, size_t n) {
    std::vector<bf16> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = __float2bfloat16_rn(p[i]);
    return v;
}

}  // namespace

#define TRY(x)                  \
    do {                        \
        int rc_ = (x);          \
        if (rc_) return rc_;    \
    } while (0)

Net::~Net() {
    free_ws();
    for (void *p : wallocs_) cudaFree(p);
}

void Net::free_ws() {
    for (void *p : wsallocs_) cudaFree(p);
    wsallocs_.clear();
    wsbytes_ = 0;
    h_ = w_ = 0;
}

template <typename T>
int Net::put(Ctx &ctx, T **dst, const std::vector<T> &host, const char *what) {
    void *p = nullptr;
    TRY(dev_alloc(ctx, &p, host.size() * sizeof(T), what));
    wallocs_.push_back(p);
    wbytes_ += host.size() * sizeof(T);
    *dst = (T *)p;
    return cuda_check(ctx, cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                      "cudaMemcpy (weights)");
}

int Net::put_linear(Ctx &ctx, DevLinear *d, const cpu::LinearW &l, bool bias) {
    d->in = l.in;
    d->out = l.out;
    TRY(put(ctx, &d->w, to_bf16(l.w, (size_t)l.in * l.out), "linear weight"));
    if (bias && l.b) {
        TRY(put(ctx, &d->b32, std::vector<float>(l.b, l.b + l.out), "linear bias"));
        TRY(put(ctx, &d->b16, to_bf16(l.b, l.out), "linear bias"));
    }
    return 0;
}

int Net::put_norm(Ctx &ctx, DevNorm *d, const cpu::NormW &n) {
    TRY(put(ctx, &d->g, std::vector<float>(n.g, n.g + n.n), "layernorm weight"));
    return put(ctx, &d->b, std::vector<float>(n.b, n.b + n.n), "layernorm bias");
}

int Net::put_stage(Ctx &ctx, DevStage *d, const cpu::StageW &s) {
    d->C = s.C;
    d->heads = s.heads;
    d->blocks.resize(s.blocks.size());
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        const cpu::BlockW &b = s.blocks[i];
        DevBlock &o = d->blocks[i];
        TRY(put_norm(ctx, &o.n1, b.norm1));
        TRY(put_norm(ctx, &o.n2, b.norm2));
        TRY(put_linear(ctx, &o.qkv, b.qkv, true));
        TRY(put_linear(ctx, &o.proj, b.proj, true));
        TRY(put_linear(ctx, &o.fc1, b.fc1, true));
        TRY(put_linear(ctx, &o.fc2, b.fc2, true));
        TRY(put(ctx, &o.relb, b.bias, "relative position bias"));
        o.shift = b.shift;
    }
    return 0;
}

int Net::upload(Ctx &ctx, const cpu::UNetWeights &W) {
    if (up_) return 0;
    cfg_ = W.cfg;
    const ModelConfig &c = cfg_;
    DN_REQUIRE(c.window == 8 && c.head_dim == 32 && c.s2d == 2 && c.head_radius == 1 && c.channels[0] == 32,
               "the CUDA engine runs window 8, head dim 32, s2d 2, head radius 1 and 32 base channels");
    DN_REQUIRE(c.head_out_channels() <= 16, "head output channels > 16");
    DN_REQUIRE(2 * c.fusion_radius + 1 <= 8, "fusion window > 8 frames");
    const int c0 = c.channels[0], Cin = c.fusion_in_channels(), hc = c.head_out_channels();
    TRY(put(ctx, &fusion_w_, to_bf16(W.fusion_wk.data(), (size_t)9 * Cin * c0), "fusion weight"));
    TRY(put(ctx, &fusion_b_, std::vector<float>(W.fusion_b, W.fusion_b + c0), "fusion bias"));
    TRY(put_stage(ctx, &enc0_, W.enc0));
    TRY(put_norm(ctx, &merge0_n_, W.merge0_norm));
    TRY(put_linear(ctx, &merge0_r_, W.merge0_red, false));
    TRY(put_stage(ctx, &enc1_, W.enc1));
    TRY(put_norm(ctx, &merge1_n_, W.merge1_norm));
    TRY(put_linear(ctx, &merge1_r_, W.merge1_red, false));
    TRY(put_stage(ctx, &mid_, W.mid));
    TRY(put_linear(ctx, &expand1_, W.expand1, true));
    TRY(put_linear(ctx, &skip1_, W.skip1, true));
    TRY(put_stage(ctx, &dec1_, W.dec1));
    TRY(put_linear(ctx, &expand0_, W.expand0, true));
    TRY(put_linear(ctx, &skip0_, W.skip0, true));
    TRY(put_stage(ctx, &dec0_, W.dec0));
    // Head: cpu::head_pack's 3 x (c0, 9 hc) (K-major) -> per time tap (Gc, c0) row-major (N, K),
    // N = 9 hc padded to a multiple of 16 with zero rows.
    head_gc_ = (9 * hc + 15) / 16 * 16;
    for (int dt = 0; dt < 3; ++dt) {
        std::vector<float> m((size_t)head_gc_ * c0, 0.f);
        for (int ci = 0; ci < c0; ++ci)
            for (int nn = 0; nn < 9 * hc; ++nn)
                m[(size_t)nn * c0 + ci] = W.head_wt[((size_t)dt * c0 + ci) * 9 * hc + nn];
        TRY(put(ctx, &head_w_[dt], to_bf16(m.data(), m.size()), "head weight"));
    }
    TRY(put(ctx, &head_b_, std::vector<float>(W.head_b, W.head_b + hc), "head bias"));
    up_ = true;
    return 0;
}

int Net::resize(Ctx &ctx, int h, int w) {
    if (h == h_ && w == w_) return 0;
    const int unit = 4 * cfg_.window;  // the mid stage (h/4) must tile into windows
    DN_REQUIRE(up_, "weights not uploaded");
    DN_REQUIRE(h >= unit && w >= unit && h % unit == 0 && w % unit == 0,
               "token grid " + std::to_string(w) + "x" + std::to_string(h) + " not a multiple of " +
                   std::to_string(unit));
    free_ws();
    const size_t n0 = (size_t)h * w, n1 = n0 / 4, n2 = n0 / 16;
    const size_t c0 = cfg_.channels[0], c1 = cfg_.channels[1], c2 = cfg_.channels[2], r = cfg_.mlp_ratio;
    const size_t tokC = std::max({n0 * c0, n1 * c1, n2 * c2});
    const size_t tb = std::max({tokC, n1 * 4 * c0, n2 * 4 * c1, n0 * 2 * c0, n1 * 2 * c1, n2 * c2, n1 * c1});
    const size_t hid = std::max({r * tokC, n2 * 2 * c2, n1 * 2 * c1});
    auto get = [&](void **p, size_t bytes, const char *what) {
        int rc = dev_alloc(ctx, p, bytes, what);
        if (!rc) {
            wsallocs_.push_back(*p);
            wsbytes_ += bytes;
        }
        return rc;
    };
    TRY(get((void **)&x0_, n0 * c0 * 4, "x0"));
    TRY(get((void **)&x1_, n1 * c1 * 4, "x1"));
    TRY(get((void **)&x2_, n2 * c2 * 4, "x2"));
    TRY(get((void **)&y1_, n1 * c1 * 4, "y1"));
    TRY(get((void **)&y0_, n0 * c0 * 4, "y0"));
    TRY(get((void **)&tb_, tb * 2, "token buffer"));
    TRY(get((void **)&qkv_, 3 * tokC * 2, "qkv"));
    TRY(get((void **)&att_, tokC * 2, "attention output"));
    TRY(get((void **)&hid_, hid * 2, "MLP hidden"));
    TRY(get((void **)&G_, n0 * head_gc_ * 4, "head G"));
    h_ = h;
    w_ = w;
    return 0;
}

int Net::block(Ctx &ctx, const DevBlock &B, int C, int heads, float *x, int H, int W) {
    const int64_t n = (int64_t)H * W;
    const int ws = cfg_.window, Ch = cfg_.mlp_ratio * C;
    const float eps = (float)cfg_.ln_eps;
    TRY(layernorm_window(ctx, x, H, W, C, ws, B.shift, B.n1.g, B.n1.b, eps, tb_));
    TRY(linear(ctx, tb_, n, C, C, B.qkv.w, B.qkv.b16, 3 * C, qkv_, false, 3 * C, 0.f));
    TRY(window_attention(ctx, qkv_, nullptr, H, W, C, heads, ws, B.shift, B.relb, att_));
    TRY(linear(ctx, att_, n, C, C, B.proj.w, B.proj.b16, C, tb_, false, C, 0.f));
    TRY(window_scatter_add(ctx, tb_, nullptr, H, W, C, ws, B.shift, x));
    TRY(layernorm_rows(ctx, x, n, C, B.n2.g, B.n2.b, eps, tb_));
    TRY(linear(ctx, tb_, n, C, C, B.fc1.w, B.fc1.b16, Ch, hid_, false, Ch, 0.f));
    TRY(gelu_tanh(ctx, hid_, n, Ch, nullptr));
    return linear(ctx, hid_, n, Ch, Ch, B.fc2.w, B.fc2.b32, C, x, true, C, 1.f);
}

int Net::stage(Ctx &ctx, const DevStage &S, float *x, int H, int W) {
    for (const DevBlock &b : S.blocks) TRY(block(ctx, b, S.C, S.heads, x, H, W));
    return 0;
}

int Net::features(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma, bf16 *F) {
    DN_REQUIRE(up_ && h_ > 0, "weights or workspace missing (upload + resize first)");
    DN_REQUIRE(nframes == 2 * cfg_.fusion_radius + 1, "fusion window of " + std::to_string(nframes) + " frames");
    DN_REQUIRE(F, "null F");
    const int h = h_, w = w_, h1 = h / 2, w1 = w / 2, h2 = h / 4, w2 = w / 4;
    const int c0 = cfg_.channels[0], c1 = cfg_.channels[1], c2 = cfg_.channels[2];
    const int64_t n0 = (int64_t)h * w, n1 = n0 / 4, n2 = n0 / 16;
    const float eps = (float)cfg_.ln_eps;
    TRY(fusion_conv3x3(ctx, frames, nframes, sigma / 255.0f, h, w, fusion_w_, fusion_b_, c0, x0_));
    TRY(stage(ctx, enc0_, x0_, h, w));
    TRY(merge_s2d_layernorm(ctx, x0_, h, w, c0, merge0_n_.g, merge0_n_.b, eps, tb_));
    TRY(linear(ctx, tb_, n1, 4 * c0, 4 * c0, merge0_r_.w, nullptr, c1, x1_, true, c1, 0.f));
    TRY(stage(ctx, enc1_, x1_, h1, w1));
    TRY(merge_s2d_layernorm(ctx, x1_, h1, w1, c1, merge1_n_.g, merge1_n_.b, eps, tb_));
    TRY(linear(ctx, tb_, n2, 4 * c1, 4 * c1, merge1_r_.w, nullptr, c2, x2_, true, c2, 0.f));
    TRY(stage(ctx, mid_, x2_, h2, w2));
    // expand1 + skip1
    TRY(cast_to_bf16(ctx, x2_, n2 * c2, tb_));
    TRY(linear(ctx, tb_, n2, c2, c2, expand1_.w, expand1_.b16, 2 * c2, hid_, false, 2 * c2, 0.f));
    TRY(d2s_concat(ctx, hid_, h2, w2, 2 * c2, x1_, c1, tb_));
    TRY(linear(ctx, tb_, n1, c2 / 2 + c1, c2 / 2 + c1, skip1_.w, skip1_.b32, c1, y1_, true, c1, 0.f));
    TRY(stage(ctx, dec1_, y1_, h1, w1));
    // expand0 + skip0
    TRY(cast_to_bf16(ctx, y1_, n1 * c1, tb_));
    TRY(linear(ctx, tb_, n1, c1, c1, expand0_.w, expand0_.b16, 2 * c1, hid_, false, 2 * c1, 0.f));
    TRY(d2s_concat(ctx, hid_, h1, w1, 2 * c1, x0_, c0, tb_));
    TRY(linear(ctx, tb_, n0, c1 / 2 + c0, c1 / 2 + c0, skip0_.w, skip0_.b32, c0, y0_, true, c0, 0.f));
    TRY(stage(ctx, dec0_, y0_, h, w));
    return cast_to_bf16(ctx, y0_, n0 * c0, F);
}

int Net::head(Ctx &ctx, const bf16 *const F[3], const bf16 *centre, float *out) {
    DN_REQUIRE(up_ && h_ > 0, "weights or workspace missing (upload + resize first)");
    DN_REQUIRE(F[0] && F[1] && F[2] && centre && out, "null pointer");
    const int c0 = cfg_.channels[0];
    const int64_t n0 = (int64_t)h_ * w_;
    for (int dt = 0; dt < 3; ++dt)
        TRY(linear(ctx, F[dt], n0, c0, c0, head_w_[dt], nullptr, head_gc_, G_, true, head_gc_, dt ? 1.f : 0.f));
    return head_stencil(ctx, G_, head_gc_, h_, w_, head_b_, cfg_.head_out_channels(), centre, out);
}

}  // namespace cuda
}  // namespace denoise
