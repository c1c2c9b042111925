// The whole network of models v1 and v2 on the CPU (weights/denoise_train/model.py's UNet and Denoiser.head_out),
// built from the operators in ops.h. fp32 NHWC throughout. Memory: the workspace holds the three
// skip levels (x0, x1, x2), two token buffers of the largest map (a, b), qkv (3x that), one MLP chunk and
// the head's 108-channel map; at 854x480 (padded 896x512, 448x256 tokens of 32 ch) about 210 MB.
#include "unet.h"

#include <algorithm>
#include <cstring>

#include "ops.h"
#include "../common/parallel.h"

namespace denoise {
namespace cpu {

void pack_model(const Model &m, CpuModel *out) {
    const ModelConfig &cfg = m.cfg;
    const int c0 = cfg.channels[0], hc = cfg.head_out_channels();
    out->model = &m;
    out->fusion_wk.resize((size_t)9 * cfg.fusion_in_channels() * c0);
    conv3x3_pack(m.w.fusion_w, c0, cfg.fusion_in_channels(), out->fusion_wk.data());
    out->head_wt.resize((size_t)3 * c0 * 9 * hc);
    head_pack(m.w.head_w, hc, c0, out->head_wt.data());
}

namespace {
int64_t mlp_chunk_tokens(int Ch);
}

void Workspace::resize(const ModelConfig &cfg, int hh, int ww) {
    if (hh == h && ww == w) return;
    h = hh;
    w = ww;
    const size_t n0 = (size_t)h * w, n1 = n0 / 4, n2 = n0 / 16;
    const int c0 = cfg.channels[0], c1 = cfg.channels[1], c2 = cfg.channels[2];
    // The largest map any step writes to a, b or hidden: a stage's tokens (n_i c_i); patch
    // merging's s2d (n1 4c0 = n0 c0, n2 4c1 = n1 c1) and patch expanding's output and its d2s are
    // the same sizes as the finer level's map. With c[i+1] <= 4 c[i] (model_config.cpp) that is
    // n0 c0; the max keeps the buffers right whatever the widths.
    const size_t big = std::max({n0 * c0, n1 * c1, n2 * c2});
    conv.assign(conv3x3_work_floats(h, w, cfg.fusion_in_channels(), c0), 0.f);
    x0.assign(n0 * c0, 0.f);
    x1.assign(n1 * c1, 0.f);
    x2.assign(n2 * c2, 0.f);
    a.assign(big, 0.f);
    b.assign(big, 0.f);
    qkv.assign(3 * big, 0.f);
    // hidden: one MLP chunk, and the patch merge / expand temporaries (<= big).
    size_t mlp = 0;
    for (int c : cfg.channels) mlp = std::max(mlp, (size_t)mlp_chunk_tokens(cfg.mlp_ratio * c) * cfg.mlp_ratio * c);
    hidden.assign(std::max(big, mlp), 0.f);
    head.assign(head_work_floats(h, w, cfg.head_out_channels()), 0.f);
}

void build_fusion_input(const float *const *frames, int nframes, int h, int w, float sigma, float *out) {
    const int Cin = nframes * 12 + 1;
    const float sm = sigma / 255.0f;
    const int64_t n = (int64_t)h * w;
    parallel_for(n, grain_for(n), [&](int64_t p0_, int64_t p1_) {
    for (int64_t p = (int64_t)p0_; p < (int64_t)p1_; ++p) {
        float *o = out + p * Cin;
        for (int k = 0; k < nframes; ++k) std::memcpy(o + k * 12, frames[k] + p * 12, sizeof(float) * 12);
        o[Cin - 1] = sm;
    }
    });
}

namespace {

// Tokens per MLP chunk: a ~2 MB hidden slice (at least 1024 tokens, so each GEMM stays large).
int64_t mlp_chunk_tokens(int Ch) { return std::max<int64_t>(1024, (int64_t)(2u << 20) / ((int64_t)sizeof(float) * Ch)); }

// x (H, W, C) += proj(W-MSA(LN1(x))); x += fc2(GELU(fc1(LN2(x)))).
void swin_block(const BlockW &B, const ModelConfig &cfg, int C, int heads, float *x, int H, int W, Workspace &ws) {
    const int64_t n = (int64_t)H * W;
    float *win = ws.a.data(), *att = ws.b.data(), *qkv = ws.qkv.data(), *hid = ws.hidden.data();
    const float eps = (float)cfg.ln_eps;
    // Biases ride along with the passes that touch the data anyway (qkv's in the attention, proj's
    // in the scatter, fc1's in the GELU, fc2's in the LN2 pass), so each block is 4 GEMMs and 5
    // OpenMP loops: fewer barriers, which is what costs most on a busy 2-core machine.
    // Attention in chunks of whole windows so that the qkv map (3C per token, 44 MB at 854x480
    // for the whole map) stays in cache between its GEMM and the attention, as the MLP below.
    const int wsz = cfg.window, N = wsz * wsz, nwin = (H / wsz) * (W / wsz);
    const int wchunk = (int)std::max<int64_t>(16, (int64_t)(2u << 20) / ((int64_t)sizeof(float) * 3 * C * N));
    for (int w0 = 0; w0 < nwin; w0 += wchunk) {
        const int w1 = std::min(nwin, w0 + wchunk);
        const int64_t m = (int64_t)(w1 - w0) * N;
        window_gather_layernorm(x, H, W, C, wsz, B.shift, w0, w1, B.norm1.g, B.norm1.b, eps, win);
        linear(win, m, C, C, B.qkv.w, C, nullptr, 3 * C, qkv, 0.f);
        window_attention(qkv, B.qkv.b, H, W, C, heads, wsz, B.shift, w0, w1, B.rel_bias.data(), att);
        linear(att, m, C, C, B.proj.w, C, nullptr, C, win, 0.f);
        window_scatter_add(win, B.proj.b, H, W, C, wsz, B.shift, w0, w1, x);
    }
    layernorm(x, win, n, C, B.norm2.g, B.norm2.b, eps, x, B.fc2.b);  // also x += fc2 bias
    // The MLP runs in token chunks so that its hidden map (mlp_ratio C per token) stays in cache
    // between fc1, the GELU and fc2 instead of making three trips through memory (at 854x480 the
    // whole map is 59 MB; a chunk is ~2 MB).
    const int Ch = cfg.mlp_ratio * C;
    const int64_t chunk = mlp_chunk_tokens(Ch);
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
        const int64_t m = std::min(chunk, n - t0);
        linear(win + t0 * C, m, C, C, B.fc1.w, C, nullptr, Ch, hid, 0.f);
        gelu_tanh(hid, m, Ch, B.fc1.b);
        linear(hid, m, Ch, Ch, B.fc2.w, Ch, nullptr, C, x + t0 * C, 1.f);
    }
}

void run_stage(const StageW &S, const ModelConfig &cfg, float *x, int H, int W, Workspace &ws, const StageHook &hook,
               const char *name) {
    for (size_t i = 0; i < S.blocks.size(); ++i) {
        swin_block(S.blocks[i], cfg, S.C, S.heads, x, H, W, ws);
        if (hook && i + 1 < S.blocks.size()) {
            std::string n = std::string(name) + ".block" + std::to_string(i);
            hook(n.c_str(), x, H, W, S.C);
        }
    }
    if (hook) hook(name, x, H, W, S.C);
}

// s2d (H, W, C) -> LN(4C) -> linear 4C -> C' (no bias) into out (H/2, W/2, C'); C' = 2C in models v1/v2.
void patch_merge(const NormW &nw, const LinearW &red, const ModelConfig &cfg, const float *x, int H, int W, int C,
                 float *out, float *tmp) {
    const int64_t n = (int64_t)(H / 2) * (W / 2);
    s2d_nhwc(x, H, W, C, tmp);
    layernorm(tmp, tmp, n, 4 * C, nw.g, nw.b, (float)cfg.ln_eps);
    linear(tmp, n, 4 * C, 4 * C, red.w, 4 * C, nullptr, red.out, out, 0.f);
}

// up = d2s(linear C -> 4C' (x)) at (2H, 2W, C'); out = [up, skip] x Wskip^T + b (skip (2H, 2W, C'),
// Wskip (C', 2C')), without the concat. C' = C/2 in models v1/v2 (model.py PatchExpand).
void expand_skip(const LinearW &ex, const LinearW &sk, const float *x, int H, int W, int C, const float *skip,
                 float *out, float *tmp, float *up) {
    const int64_t n = (int64_t)H * W;
    linear(x, n, C, C, ex.w, C, ex.b, ex.out, tmp, 0.f);
    d2s_nhwc(tmp, H, W, ex.out, up);
    const int Cu = ex.out / 4, Co = sk.out;
    linear(up, 4 * n, Cu, Cu, sk.w, 2 * Cu, nullptr, Co, out, 0.f);
    linear(skip, 4 * n, Cu, Cu, sk.w + Cu, 2 * Cu, sk.b, Co, out, 1.f);
}

}  // namespace

void unet_forward(const CpuModel &M, const float *fusion_in, int h, int w, float *F, Workspace &ws,
                  const StageHook &hook) {
    const ModelConfig &cfg = M.model->cfg;
    const ModelWeights &Wt = M.model->w;
    ws.resize(cfg, h, w);
    const int c0 = cfg.channels[0], c1 = cfg.channels[1], c2 = cfg.channels[2];
    const int h1 = h / 2, w1 = w / 2, h2 = h / 4, w2 = w / 4;
    float *x0 = ws.x0.data(), *x1 = ws.x1.data(), *x2 = ws.x2.data();

    conv3x3(fusion_in, h, w, cfg.fusion_in_channels(), M.fusion_wk.data(), Wt.fusion_b, c0, x0, ws.conv.data());
    if (hook) hook("fusion", x0, h, w, c0);
    run_stage(Wt.enc0, cfg, x0, h, w, ws, hook, "enc0");

    patch_merge(Wt.merge0_norm, Wt.merge0_red, cfg, x0, h, w, c0, x1, ws.hidden.data());
    if (hook) hook("merge0", x1, h1, w1, c1);
    run_stage(Wt.enc1, cfg, x1, h1, w1, ws, hook, "enc1");

    patch_merge(Wt.merge1_norm, Wt.merge1_red, cfg, x1, h1, w1, c1, x2, ws.hidden.data());
    if (hook) hook("merge1", x2, h2, w2, c2);
    run_stage(Wt.mid, cfg, x2, h2, w2, ws, hook, "mid");

    // Decoder. The blocks use a, b, qkv and hidden as scratch, so the level-1 result y1 is kept
    // in F's storage (h1*w1*c1 <= h*w*c0); the level-0 expand reads y1 into `hidden` before the
    // skip linear writes F, so F can be both.
    float *y1 = F;
    expand_skip(Wt.expand1, Wt.skip1, x2, h2, w2, c2, x1, y1, ws.qkv.data(), ws.b.data());
    if (hook) {
        hook("expand1", ws.b.data(), h1, w1, c1);
        hook("skip1", y1, h1, w1, c1);
    }
    run_stage(Wt.dec1, cfg, y1, h1, w1, ws, hook, "dec1");

    expand_skip(Wt.expand0, Wt.skip0, y1, h1, w1, c1, x0, F, ws.hidden.data(), ws.a.data());
    if (hook) {
        hook("expand0", ws.a.data(), h, w, c0);
        hook("skip0", F, h, w, c0);
    }
    run_stage(Wt.dec0, cfg, F, h, w, ws, hook, "dec0");
}

void head_forward(const CpuModel &M, const float *const F[3], const float *centre, int h, int w, float *out,
                  Workspace &ws) {
    const ModelConfig &cfg = M.model->cfg;
    ws.resize(cfg, h, w);
    head_conv3d(F, h, w, cfg.channels[0], M.head_wt.data(), M.model->w.head_b, cfg.head_out_channels(), centre, out,
                ws.head.data());
}

}  // namespace cpu
}  // namespace denoise
