// GPU checks of the CUDA engine (built only with ./configure --enable-cuda-engine; run by
// tools/check_gpu.sh). Not GoogleTest: one line per check, then "N passed, N failed".
//
//  1. every CUDA op against its CPU op (kernels/cpu/) on fresh random inputs (uniform, not
//     zeros), outputs poisoned with NaN bytes before each launch and every element checked to be
//     written (finite); relative L2 < 1e-2 and a stated max abs per op;
//  2. the whole network (one U-Net pass + head) on a random clip with the random-weight golden
//     file, CUDA Net vs CPU unet_forward/head_forward;
//  3. the golden sequences (tests/data/golden_tensors.safetensors) through the public API with
//     backend CUDA vs the CPU engine and vs the PyTorch output;
//  4. the trained weights on the sample clips (raw rgb48le made by check_gpu.sh) with AWGN
//     sigma 20 through the API: PSNR of the CUDA output within 0.05 dB of the CPU output's.
// Usage: gpu_check [--ops-only] [--weights FILE] [--sample RAW W H N NAME]...
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../kernels/cpu/ops.h"
#include "../kernels/cpu/unet.h"
#include "../kernels/cuda/network.h"
#include "../kernels/cuda/ops.h"
#include "../kernels/denoise.h"
#include "../kernels/gpu_backend.h"
#include "../kernels/model_config.h"
#include "../kernels/safetensors.h"
#include "engine_test_util.h"

using namespace denoise;
using cuda::bf16;
using denoise_test::data_dir;

namespace {

int g_pass = 0, g_fail = 0;
std::mt19937 rng(20240611);

void result(bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::printf("%s ", ok ? "PASS" : "FAIL");
    std::vprintf(fmt, ap);
    std::printf("\n");
    va_end(ap);
    std::fflush(stdout);
    (ok ? g_pass : g_fail)++;
}

// ---- host bf16 (round to nearest even), independent of cuda_bf16.h's host paths
uint16_t f2bf(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
std::vector<float> rnd(size_t n, float lo = -1.f, float hi = 1.f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto &x : v) x = d(rng);
    return v;
}
std::vector<float> round_bf(std::vector<float> v) {
    for (auto &x : v) x = bf2f(f2bf(x));
    return v;
}

struct Dev {
    void *p = nullptr;
    size_t bytes = 0;
    explicit Dev(size_t b) : bytes(b) {
        if (cudaMalloc(&p, b ? b : 16) != cudaSuccess) {
            std::fprintf(stderr, "cudaMalloc(%zu) failed\n", b);
            std::exit(1);
        }
    }
    ~Dev() { cudaFree(p); }
    float *f() { return (float *)p; }
    bf16 *h() { return (bf16 *)p; }
};
void up_f(Dev &d, const std::vector<float> &v) { cudaMemcpy(d.p, v.data(), v.size() * 4, cudaMemcpyHostToDevice); }
void up_bf(Dev &d, const std::vector<float> &v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f2bf(v[i]);
    cudaMemcpy(d.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
}
std::vector<float> down_f(Dev &d, size_t n) {
    std::vector<float> v(n);
    cudaMemcpy(v.data(), d.p, n * 4, cudaMemcpyDeviceToHost);
    return v;
}
std::vector<float> down_bf(Dev &d, size_t n) {
    std::vector<uint16_t> h(n);
    cudaMemcpy(h.data(), d.p, n * 2, cudaMemcpyDeviceToHost);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = bf2f(h[i]);
    return v;
}

// Compare: every element finite (written), rel L2 < 1e-2, max abs <= max_abs.
void check(const char *name, const std::vector<float> &got, const std::vector<float> &ref, double max_abs,
           int rc = 0, const std::string &err = "") {
    if (rc) {
        result(false, "%-34s rc %d: %s", name, rc, err.c_str());
        return;
    }
    size_t nonfinite = 0;
    for (float v : got) nonfinite += !std::isfinite(v);
    auto d = denoise_test::compare(got.data(), ref.data(), (int64_t)ref.size());
    const bool ok = got.size() == ref.size() && nonfinite == 0 && d.rel_l2 < 1e-2 && d.max_abs <= max_abs;
    result(ok, "%-34s n %-9zu unwritten %-4zu rel_l2 %.2e (< 1e-2)  max_abs %.2e (<= %.0e)", name, ref.size(),
           nonfinite, d.rel_l2, d.max_abs, max_abs);
}

// ------------------------------------------------------------------------------------------
void ops_checks(cuda::Ctx &ctx) {
    cudaStream_t st = ctx.stream;
    auto sync = [&]() { return cudaStreamSynchronize(st) == cudaSuccess ? 0 : DENOISE_EDEVICE; };

    {  // convert_in: 70 x 37 frame -> 128 x 64 padded
        const int H = 37, W = 70, hp = 64, wp = 128, h2 = 32, w2 = 64;
        auto v = rnd((size_t)3 * H * W, 0.f, 1.f);
        Dev din(v.size() * 4), dout((size_t)h2 * w2 * 12 * 2);
        up_f(din, v);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::convert_in(ctx, din.f(), H, W, hp, wp, dout.h());
        rc = rc ? rc : sync();
        auto refl = [](int i, int n) { int p = 2 * (n - 1); i %= p; return i >= n ? p - i : i; };
        std::vector<float> ref((size_t)h2 * w2 * 12);
        for (int y = 0; y < h2; ++y)
            for (int x = 0; x < w2; ++x)
                for (int c = 0; c < 3; ++c)
                    for (int dy = 0; dy < 2; ++dy)
                        for (int dx = 0; dx < 2; ++dx)
                            ref[((size_t)y * w2 + x) * 12 + c * 4 + dy * 2 + dx] =
                                2.f * v[((size_t)c * H + refl(2 * y + dy, H)) * W + refl(2 * x + dx, W)] - 1.f;
        check("convert_in 70x37 -> 128x64", down_bf(dout, ref.size()), ref, 4e-3, rc, ctx.err);
    }
    {  // fusion conv 3x3, 5 frames + sigma
        const int h = 32, w = 48, nf = 5, Cin = 61, Co = 32;
        std::vector<std::vector<float>> fr;
        std::vector<Dev *> dfr;
        std::vector<const bf16 *> fp;
        for (int k = 0; k < nf; ++k) {
            fr.push_back(round_bf(rnd((size_t)h * w * 12)));
            dfr.push_back(new Dev(fr.back().size() * 2));
            up_bf(*dfr.back(), fr.back());
            fp.push_back(dfr.back()->h());
        }
        auto wt = rnd((size_t)Co * Cin * 9, -0.1f, 0.1f);  // OIHW
        auto b = rnd(Co, -0.1f, 0.1f);
        std::vector<float> wk((size_t)9 * Cin * Co);
        cpu::conv3x3_pack(wt.data(), Co, Cin, wk.data());
        Dev dwk(wk.size() * 2), db(Co * 4), dout((size_t)h * w * Co * 4);
        up_bf(dwk, wk);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        const float sigma = 25.f;
        int rc = cuda::fusion_conv3x3(ctx, fp.data(), nf, sigma / 255.f, h, w, dwk.h(), db.f(), Co, dout.f());
        rc = rc ? rc : sync();
        std::vector<const float *> frp;
        for (auto &f : fr) frp.push_back(f.data());
        std::vector<float> fin((size_t)h * w * Cin), ref((size_t)h * w * Co), work(cpu::conv3x3_work_floats(h, w, Cin, Co));
        cpu::build_fusion_input(frp.data(), nf, h, w, sigma, fin.data());
        cpu::conv3x3(fin.data(), h, w, Cin, wk.data(), b.data(), Co, ref.data(), work.data());
        check("fusion_conv3x3 61->32 48x32", down_f(dout, ref.size()), ref, 2e-2, rc, ctx.err);
        for (Dev *d : dfr) delete d;
    }
    for (int C : {32, 128, 256}) {  // layernorm rows
        const int64_t n = 333;
        auto x = rnd((size_t)n * C, -2.f, 3.f), g = rnd(C, 0.5f, 1.5f), b = rnd(C, -0.5f, 0.5f);
        Dev dx(x.size() * 4), dg(C * 4), db(C * 4), dout(x.size() * 2);
        up_f(dx, x);
        up_f(dg, g);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::layernorm_rows(ctx, dx.f(), n, C, dg.f(), db.f(), 1e-5f, dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref(x.size());
        cpu::layernorm(x.data(), ref.data(), n, C, g.data(), b.data(), 1e-5f);
        char name[64];
        std::snprintf(name, sizeof name, "layernorm_rows C=%d", C);
        check(name, down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    for (int shift : {0, 4}) {  // layernorm + shifted window gather
        const int H = 16, W = 24, C = 64;
        auto x = rnd((size_t)H * W * C, -2.f, 2.f), g = rnd(C, 0.5f, 1.5f), b = rnd(C, -0.5f, 0.5f);
        Dev dx(x.size() * 4), dg(C * 4), db(C * 4), dout(x.size() * 2);
        up_f(dx, x);
        up_f(dg, g);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::layernorm_window(ctx, dx.f(), H, W, C, 8, shift, dg.f(), db.f(), 1e-5f, dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref(x.size());
        cpu::window_gather_layernorm(x.data(), H, W, C, 8, shift, g.data(), b.data(), 1e-5f, ref.data());
        char name[64];
        std::snprintf(name, sizeof name, "layernorm_window shift=%d", shift);
        check(name, down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    for (int variant = 0; variant < 4; ++variant) {  // linear
        // 0: bf16 out + bias epilogue; 1: fp32 out, beta 1, bias; 2: as 0 with the bias kernel;
        // 3: no bias, K 256 -> 128 fp32 (merge reduction)
        const int64_t n = 1000;
        const int K = variant == 3 ? 256 : 64, N = variant == 3 ? 128 : 192;
        const bool f32 = variant == 1 || variant == 3;
        auto x = round_bf(rnd((size_t)n * K)), wt = rnd((size_t)N * K, -0.2f, 0.2f), b = rnd(N, -0.5f, 0.5f);
        auto acc = rnd((size_t)n * N);
        Dev dx(x.size() * 2), dw(wt.size() * 2), db(N * 4), dout((size_t)n * N * 4);
        up_bf(dx, x);
        up_bf(dw, wt);
        if (f32) up_f(db, b); else up_bf(db, b);
        if (variant == 1) up_f(dout, acc); else cuda::poison(ctx, dout.p, dout.bytes);
        ctx.no_bias_epilogue = variant == 2;
        const void *bias = variant == 3 ? nullptr : db.p;
        int rc = cuda::linear(ctx, dx.h(), n, K, K, dw.h(), bias, N, dout.p, f32, N, variant == 1 ? 1.f : 0.f);
        ctx.no_bias_epilogue = false;
        rc = rc ? rc : sync();
        std::vector<float> ref = variant == 1 ? acc : std::vector<float>((size_t)n * N);
        cpu::linear(x.data(), n, K, K, wt.data(), K, variant == 3 ? nullptr : b.data(), N, ref.data(),
                    variant == 1 ? 1.f : 0.f);
        static const char *names[] = {"linear bf16 out + bias epilogue", "linear fp32 out beta=1 + bias",
                                      "linear bf16 out + bias kernel", "linear 256->128 fp32 no bias"};
        check(names[variant], f32 ? down_f(dout, ref.size()) : down_bf(dout, ref.size()), ref, 5e-2, rc, ctx.err);
    }
    {  // GELU
        const int64_t rows = 257;
        const int C = 128;
        auto x = round_bf(rnd((size_t)rows * C, -4.f, 4.f)), b = rnd(C, -0.5f, 0.5f);
        Dev dx(x.size() * 2), db(C * 4);
        up_bf(dx, x);
        up_f(db, b);
        int rc = cuda::gelu_tanh(ctx, dx.h(), rows, C, db.f());
        rc = rc ? rc : sync();
        std::vector<float> ref = x;
        cpu::gelu_tanh(ref.data(), rows, C, b.data());
        check("gelu_tanh + bias (in place)", down_bf(dx, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    for (int shift : {0, 4}) {  // window attention
        const int H = 16, W = 24, heads = 2, C = 64, N = 64;
        const int64_t n = (int64_t)H * W;
        auto qkv = round_bf(rnd((size_t)n * 3 * C, -1.5f, 1.5f)), qb = rnd(3 * C, -0.2f, 0.2f);
        auto table = rnd((size_t)15 * 15 * heads, -1.f, 1.f);
        std::vector<float> relb((size_t)heads * N * N);
        cpu::gather_relative_bias(table.data(), 8, heads, relb.data());
        Dev dq(qkv.size() * 2), dqb(qb.size() * 4), drb(relb.size() * 4), dout((size_t)n * C * 2);
        up_bf(dq, qkv);
        up_f(dqb, qb);
        up_f(drb, relb);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::window_attention(ctx, dq.h(), dqb.f(), H, W, C, heads, 8, shift, drb.f(), dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref((size_t)n * C);
        cpu::window_attention(qkv.data(), qb.data(), H, W, C, heads, 8, shift, relb.data(), ref.data());
        char name[64];
        std::snprintf(name, sizeof name, "window_attention 2 heads shift=%d", shift);
        check(name, down_bf(dout, ref.size()), ref, 2e-2, rc, ctx.err);
    }
    for (int shift : {0, 4}) {  // scatter add (residual of the attention branch)
        const int H = 16, W = 24, C = 32;
        auto win = round_bf(rnd((size_t)H * W * C)), x = rnd((size_t)H * W * C), b = rnd(C);
        Dev dw(win.size() * 2), dx(x.size() * 4), db(C * 4);
        up_bf(dw, win);
        up_f(dx, x);
        up_f(db, b);
        int rc = cuda::window_scatter_add(ctx, dw.h(), db.f(), H, W, C, 8, shift, dx.f());
        rc = rc ? rc : sync();
        std::vector<float> ref = x;
        cpu::window_scatter_add(win.data(), b.data(), H, W, C, 8, shift, ref.data());
        char name[64];
        std::snprintf(name, sizeof name, "window_scatter_add shift=%d", shift);
        check(name, down_f(dx, ref.size()), ref, 1e-5, rc, ctx.err);
    }
    {  // patch merge front half: s2d + LN(4C)
        const int H = 32, W = 48, C = 32;
        auto x = rnd((size_t)H * W * C, -2.f, 2.f), g = rnd(4 * C, 0.5f, 1.5f), b = rnd(4 * C, -0.5f, 0.5f);
        Dev dx(x.size() * 4), dg(g.size() * 4), db(b.size() * 4), dout(x.size() * 2);
        up_f(dx, x);
        up_f(dg, g);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::merge_s2d_layernorm(ctx, dx.f(), H, W, C, dg.f(), db.f(), 1e-5f, dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref(x.size());
        cpu::s2d_nhwc(x.data(), H, W, C, ref.data());
        cpu::layernorm(ref.data(), ref.data(), (int64_t)(H / 2) * (W / 2), 4 * C, g.data(), b.data(), 1e-5f);
        check("merge_s2d_layernorm C=32", down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    {  // expand back half + skip concat
        const int h = 8, w = 12, C4 = 256, Cs = 64, Cu = C4 / 4, Co = Cu + Cs;
        auto up = round_bf(rnd((size_t)h * w * C4)), skip = rnd((size_t)4 * h * w * Cs);
        Dev du(up.size() * 2), ds(skip.size() * 4), dout((size_t)4 * h * w * Co * 2);
        up_bf(du, up);
        up_f(ds, skip);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::d2s_concat(ctx, du.h(), h, w, C4, ds.f(), Cs, dout.h());
        rc = rc ? rc : sync();
        std::vector<float> d2s((size_t)4 * h * w * Cu), ref((size_t)4 * h * w * Co);
        cpu::d2s_nhwc(up.data(), h, w, C4, d2s.data());
        for (int64_t p = 0; p < 4 * h * w; ++p) {
            for (int c = 0; c < Cu; ++c) ref[p * Co + c] = d2s[p * Cu + c];
            for (int c = 0; c < Cs; ++c) ref[p * Co + Cu + c] = skip[p * Cs + c];
        }
        check("d2s_concat 256/4 + 64", down_bf(dout, ref.size()), ref, 8e-3, rc, ctx.err);
    }
    {  // head stencil on a given G
        const int h = 16, w = 24, Co = 12, Gc = 112;
        auto G = rnd((size_t)h * w * Gc, -0.3f, 0.3f), b = rnd(Co, -0.2f, 0.2f), res = round_bf(rnd((size_t)h * w * Co));
        Dev dG(G.size() * 4), db(Co * 4), dr(res.size() * 2), dout(res.size() * 4);
        up_f(dG, G);
        up_f(db, b);
        up_bf(dr, res);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::head_stencil(ctx, dG.f(), Gc, h, w, db.f(), Co, dr.h(), dout.f());
        rc = rc ? rc : sync();
        std::vector<float> ref(res.size());
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int o = 0; o < Co; ++o) {
                    float a = b[o];
                    for (int ky = 0; ky < 3; ++ky)
                        for (int kx = 0; kx < 3; ++kx) {
                            int yy = y + ky - 1, xx = x + kx - 1;
                            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                            a += G[((size_t)yy * w + xx) * Gc + (ky * 3 + kx) * Co + o];
                        }
                    const size_t i = ((size_t)y * w + x) * Co + o;
                    ref[i] = std::min(1.f, std::max(-1.f, a + res[i]));
                }
        check("head_stencil 112 -> 12", down_f(dout, ref.size()), ref, 1e-5, rc, ctx.err);
    }
    {  // convert_out
        const int h2 = 32, w2 = 64, H = 61, W = 125;
        auto o = rnd((size_t)h2 * w2 * 12), c = round_bf(rnd((size_t)h2 * w2 * 12));
        Dev dO(o.size() * 4), dc(c.size() * 2), dd((size_t)3 * H * W * 4);
        up_f(dO, o);
        up_bf(dc, c);
        cuda::poison(ctx, dd.p, dd.bytes);
        int rc = cuda::convert_out(ctx, dO.f(), dc.h(), h2, w2, H, W, dd.f());
        rc = rc ? rc : sync();
        std::vector<float> ref((size_t)3 * H * W);
        for (int col = 0; col < 3; ++col)
            for (int Y = 0; Y < H; ++Y)
                for (int X = 0; X < W; ++X) {
                    const size_t i = ((size_t)(Y / 2) * w2 + X / 2) * 12 + col * 4 + (Y & 1) * 2 + (X & 1);
                    ref[((size_t)col * H + Y) * W + X] = 0.5f * (o[i] - c[i]);
                }
        check("convert_out 125x61 crop", down_f(dd, ref.size()), ref, 1e-6, rc, ctx.err);
    }
    {  // shape checks refuse instead of reading out of bounds
        Dev d(1024);
        int rc1 = cuda::window_attention(ctx, d.h(), nullptr, 12, 16, 64, 2, 8, 0, d.f(), d.h());
        int rc2 = cuda::head_stencil(ctx, d.f(), 100, 4, 4, d.f(), 12, d.h(), d.f());
        int rc3 = cuda::linear(ctx, d.h(), 4, 32, 16, d.h(), nullptr, 8, d.p, false, 8, 0.f);
        result(rc1 == DENOISE_EINVAL && rc2 == DENOISE_EINVAL && rc3 == DENOISE_EINVAL,
               "%-34s window 12 rows, G 100 < 108 ch, lda < K -> EINVAL (%d %d %d)", "shape checks refuse", rc1,
               rc2, rc3);
        ctx.err.clear();
    }
}

// ------------------------------------------------------------------------------------------
void network_check(cuda::Ctx &ctx, const cpu::UNetWeights &W, const char *label, int h, int w) {
    const ModelConfig &cfg = W.cfg;
    const int c0 = cfg.channels[0], nf = 2 * cfg.fusion_radius + 1;
    cuda::Net net;
    int rc = net.upload(ctx, W);
    if (!rc) rc = net.resize(ctx, h, w);
    if (rc) {
        result(false, "network %s: %s", label, ctx.err.c_str());
        return;
    }
    // 7 random frames (bf16-exact), F_{t-1}, F_t, F_{t+1} on both engines, then the head.
    std::vector<std::vector<float>> fr;
    std::vector<Dev *> dfr;
    for (int k = 0; k < nf + 2; ++k) {
        fr.push_back(round_bf(rnd((size_t)h * w * 12, -0.9f, 0.9f)));
        dfr.push_back(new Dev(fr.back().size() * 2));
        up_bf(*dfr.back(), fr.back());
    }
    const float sigma = 20.f;
    cpu::Workspace ws;
    std::vector<float> fin((size_t)h * w * cfg.fusion_in_channels());
    std::vector<std::vector<float>> Fc(3, std::vector<float>((size_t)h * w * c0));
    std::vector<Dev *> Fg;
    bool ok = true;
    for (int s = 0; s < 3; ++s) {
        std::vector<const float *> cw;
        std::vector<const bf16 *> gw;
        for (int k = 0; k < nf; ++k) {
            cw.push_back(fr[s + k].data());
            gw.push_back(dfr[s + k]->h());
        }
        cpu::build_fusion_input(cw.data(), nf, h, w, sigma, fin.data());
        cpu::unet_forward(W, fin.data(), h, w, Fc[s].data(), ws);
        Fg.push_back(new Dev(Fc[s].size() * 2));
        cuda::poison(ctx, Fg.back()->p, Fg.back()->bytes);
        rc = net.features(ctx, gw.data(), nf, sigma, Fg.back()->h());
        if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
        char name[96];
        std::snprintf(name, sizeof name, "network %s F_s (s=%d) %dx%d", label, s, w, h);
        const int before = g_fail;
        check(name, down_bf(*Fg.back(), Fc[s].size()), Fc[s], 0.25, rc, ctx.err);
        ok = ok && g_fail == before;
    }
    if (ok) {
        std::vector<float> ref((size_t)h * w * 12);
        const float *Fp[3] = {Fc[0].data(), Fc[1].data(), Fc[2].data()};
        const float *centre = fr[nf / 2 + 1].data();
        cpu::head_forward(W, Fp, centre, h, w, ref.data(), ws);
        Dev dout(ref.size() * 4);
        cuda::poison(ctx, dout.p, dout.bytes);
        const bf16 *Fd[3] = {Fg[0]->h(), Fg[1]->h(), Fg[2]->h()};
        rc = net.head(ctx, Fd, dfr[nf / 2 + 1]->h(), dout.f());
        if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
        char name[96];
        std::snprintf(name, sizeof name, "network %s head output", label);
        check(name, down_f(dout, ref.size()), ref, 0.1, rc, ctx.err);
    }
    for (Dev *d : dfr) delete d;
    for (Dev *d : Fg) delete d;
}

// Run a whole sequence (N, 3, H, W) of [0,1] planes through the API; returns outputs in [0,1]
// (v + delta) or an empty vector with the error printed.
std::vector<float> run_api(const std::string &weights, DenoiseBackend be, const std::vector<float> &v, int N, int H,
                           int Wd, float sigma, std::string *err) {
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p{weights.c_str(), be, 0, sigma, Wd, H, 0};
    std::vector<float> out;
    int rc = denoise_open(e, &p);
    if (rc) {
        *err = denoise_last_error(e);
        denoise_free(&e);
        return out;
    }
    if (denoise_backend(e) != be) {
        *err = "backend not in use";
        denoise_free(&e);
        return out;
    }
    const size_t fs = (size_t)3 * H * Wd, ps = (size_t)H * Wd;
    out.assign((size_t)N * fs, NAN);
    std::vector<float> d(fs);
    float *dp[3] = {&d[0], &d[ps], &d[2 * ps]};
    int t = 0;
    auto drain = [&]() {
        int r;
        while ((r = denoise_pull(e, dp, Wd)) == 0) {
            for (size_t i = 0; i < fs; ++i) out[t * fs + i] = v[t * fs + i] + d[i];
            ++t;
        }
        return r;
    };
    for (int f = 0; f < N && !rc; ++f) {
        const float *pl[3] = {&v[f * fs], &v[f * fs + ps], &v[f * fs + 2 * ps]};
        rc = denoise_push(e, pl, Wd);
        if (!rc) {
            int r = drain();
            if (r != DENOISE_EAGAIN) rc = r;
        }
    }
    if (!rc) rc = denoise_flush(e);
    if (!rc) {
        int r = drain();
        if (r != DENOISE_EOF) rc = r;
    }
    if (rc || t != N) {
        *err = std::string("rc ") + std::to_string(rc) + " after " + std::to_string(t) + " frames: " + denoise_last_error(e);
        out.clear();
    }
    denoise_free(&e);
    return out;
}

void golden_api_checks() {
    StFile g;
    std::string err;
    if (!load_safetensors(data_dir() + "/golden_tensors.safetensors", &g, &err)) {
        result(false, "golden tensors: %s", err.c_str());
        return;
    }
    const std::string wpath = data_dir() + "/golden_weights.safetensors";
    for (const char *key : {"seq", "seq1", "seq2"}) {
        const StTensor &in = g.tensors.at(std::string(key) + ".input");
        const StTensor &ref = g.tensors.at(std::string(key) + ".output");
        const int N = (int)in.shape[0], H = (int)in.shape[2], Wd = (int)in.shape[3];
        const float sigma = g.tensors.at(std::string(key) + ".sigma").data[0];
        std::vector<float> v(in.data.size());
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * (in.data[i] + 1.f);
        std::string e1, e2;
        auto cpu_out = run_api(wpath, DENOISE_BACKEND_CPU, v, N, H, Wd, sigma, &e1);
        auto gpu_out = run_api(wpath, DENOISE_BACKEND_CUDA, v, N, H, Wd, sigma, &e2);
        char name[96];
        std::snprintf(name, sizeof name, "api golden %s N=%d %dx%d vs CPU", key, N, Wd, H);
        if (cpu_out.empty() || gpu_out.empty()) {
            result(false, "%-34s %s %s", name, e1.c_str(), e2.c_str());
            continue;
        }
        std::vector<float> a(gpu_out.size()), b(cpu_out.size()), r(ref.data.size());
        for (size_t i = 0; i < a.size(); ++i) {  // network units
            a[i] = 2.f * gpu_out[i] - 1.f;
            b[i] = 2.f * cpu_out[i] - 1.f;
        }
        check(name, a, b, 0.1);
        std::snprintf(name, sizeof name, "api golden %s vs PyTorch", key);
        check(name, a, ref.data, 0.1);
    }
}

double psnr(const std::vector<float> &a, const std::vector<float> &ref) {
    double se = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        double d = std::min(1.f, std::max(0.f, a[i])) - ref[i];
        se += d * d;
    }
    return 10.0 * std::log10(1.0 / (se / a.size()));
}

void sample_check(const std::string &weights, const std::string &raw, int Wd, int H, int N, const std::string &name) {
    std::ifstream f(raw, std::ios::binary);
    std::vector<uint16_t> px((size_t)N * H * Wd * 3);
    if (!f.read((char *)px.data(), px.size() * 2)) {
        result(false, "sample %s: cannot read %zu bytes from %s", name.c_str(), px.size() * 2, raw.c_str());
        return;
    }
    // rgb48le packed -> planes in [0,1]; AWGN sigma 20 (8-bit code values), fixed seed.
    const size_t ps = (size_t)H * Wd, fs = 3 * ps;
    std::vector<float> clean((size_t)N * fs), noisy((size_t)N * fs);
    std::mt19937 g(1234);
    std::normal_distribution<float> nd(0.f, 20.f / 255.f);
    for (int t = 0; t < N; ++t)
        for (size_t p = 0; p < ps; ++p)
            for (int c = 0; c < 3; ++c) {
                const float v = px[((size_t)t * ps + p) * 3 + c] / 65535.f;
                clean[t * fs + c * ps + p] = v;
                noisy[t * fs + c * ps + p] = v + nd(g);
            }
    std::string e1, e2;
    auto cpu_out = run_api(weights, DENOISE_BACKEND_CPU, noisy, N, H, Wd, 20.f, &e1);
    auto gpu_out = run_api(weights, DENOISE_BACKEND_CUDA, noisy, N, H, Wd, 20.f, &e2);
    if (cpu_out.empty() || gpu_out.empty()) {
        result(false, "sample %s: %s %s", name.c_str(), e1.c_str(), e2.c_str());
        return;
    }
    const double pn = psnr(noisy, clean), pc = psnr(cpu_out, clean), pg = psnr(gpu_out, clean);
    auto d = denoise_test::compare(gpu_out.data(), cpu_out.data(), (int64_t)cpu_out.size());
    const bool ok = std::fabs(pg - pc) <= 0.05;
    result(ok, "sample %-26s %dx%d N=%d PSNR noisy %.3f cpu %.3f cuda %.3f dB |diff| %.4f (<= 0.05); max_abs %.2e",
           name.c_str(), Wd, H, N, pn, pc, pg, std::fabs(pg - pc), d.max_abs);
}

}  // namespace

int main(int argc, char **argv) {
    bool ops_only = false;
    std::string weights;
    struct Sample { std::string raw, name; int w, h, n; };
    std::vector<Sample> samples;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--ops-only") ops_only = true;
        else if (a == "--weights" && i + 1 < argc) weights = argv[++i];
        else if (a == "--sample" && i + 5 < argc) {
            samples.push_back({argv[i + 1], argv[i + 5], std::atoi(argv[i + 2]), std::atoi(argv[i + 3]),
                               std::atoi(argv[i + 4])});
            i += 5;
        } else {
            std::fprintf(stderr, "usage: gpu_check [--ops-only] [--weights FILE] [--sample RAW W H N NAME]...\n");
            return 2;
        }
    }
    std::string why;
    if (cuda_probe(0, &why)) {
        std::printf("no usable GPU: %s\n0 passed, 0 failed\n", why.c_str());
        return 77;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device 0: %s, compute capability %d.%d, %.1f GiB\n", prop.name, prop.major, prop.minor,
                prop.totalGlobalMem / 1073741824.0);
    cuda::Ctx ctx;
    if (cuda::ctx_create(ctx, 0)) {
        std::printf("context: %s\n0 passed, 1 failed\n", ctx.err.c_str());
        return 1;
    }
    ops_checks(ctx);
    if (!ops_only) {
        StFile wf;
        ModelConfig cfg;
        cpu::UNetWeights W;
        std::string err;
        if (load_safetensors(data_dir() + "/golden_weights.safetensors", &wf, &err) &&
            parse_model_config(wf.metadata["config"], &cfg, &err) && cpu::bind_weights(wf, cfg, &W, &err)) {
            network_check(ctx, W, "golden-weights", 64, 96);
            network_check(ctx, W, "golden-weights", 32, 32);
        } else {
            result(false, "golden weights: %s", err.c_str());
        }
        if (!weights.empty()) {
            StFile tf;
            ModelConfig tc;
            cpu::UNetWeights TW;
            if (load_safetensors(weights, &tf, &err) && parse_model_config(tf.metadata["config"], &tc, &err) &&
                cpu::bind_weights(tf, tc, &TW, &err))
                network_check(ctx, TW, "trained", 96, 160);
            else
                result(false, "trained weights: %s", err.c_str());
        }
        golden_api_checks();
        for (const auto &s : samples) sample_check(weights, s.raw, s.w, s.h, s.n, s.name);
    }
    cuda::ctx_destroy(ctx);
    std::printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
