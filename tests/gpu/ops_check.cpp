// GPU checks, ops: every CUDA op against its CPU op (kernels/cpu/) on fresh random inputs
// (uniform, not zeros), outputs poisoned with NaN bytes before each launch and every element checked
// to be written; window sub-ranges and head bands as the chunked network runs them; relative L2 <
// 1e-2 and a stated max abs per op. --quick: the same.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "cpu/ops.h"
#include "cpu/unet.h"
#include "harness.h"
#include <memory>

using namespace gpu_check;

namespace {

// 1. ops
void ops_checks(cuda::Ctx &ctx) {
    cudaStream_t st = ctx.stream;
    auto sync = [&]() { return cudaStreamSynchronize(st) == cudaSuccess ? 0 : DENOISE_EDEVICE; };

    // fusion conv 3x3, n frames + sigma: the dispatching entry point, the direct form and the
    // tensor-core implicit GEMM; model v1's shape on a map of whole 16 x 16 tiles and one with tails
    // (and edge-only rows), other fusion radii and widths on the tensor-core path; wide64's Cout 64
    // and a wider c0 on the direct form (a block per group of 32 output channels)
    using FusionFn = int (*)(cuda::Ctx &, const bf16 *const *, int, float, int, int, const bf16 *, const float *, int,
                             float *, const cuda::TileShift *);
    struct FusionCase {
        FusionFn fn;
        const char *path;
        int nf, Co, h, w;
    };
    const FusionCase fusion_cases[] = {
        {cuda::fusion_conv3x3, "", 5, 32, 32, 48},
        {cuda::fusion_conv3x3_direct, " direct", 5, 32, 32, 48},
        {cuda::fusion_conv3x3_tc, " tc", 5, 32, 32, 48},
        {cuda::fusion_conv3x3_direct, " direct", 5, 32, 37, 21},
        {cuda::fusion_conv3x3_tc, " tc", 5, 32, 37, 21},
        {cuda::fusion_conv3x3_tc, " tc", 5, 32, 2, 19},
        {cuda::fusion_conv3x3_tc, " tc", 1, 16, 5, 40},
        {cuda::fusion_conv3x3_tc, " tc", 3, 48, 19, 9},
        {cuda::fusion_conv3x3_tc, " tc", 7, 64, 20, 33},
        {cuda::fusion_conv3x3, "", 5, 64, 37, 21},
        {cuda::fusion_conv3x3_tc, " tc", 5, 64, 37, 21},
        {cuda::fusion_conv3x3_direct, " direct", 5, 64, 37, 21},
        {cuda::fusion_conv3x3_direct, " direct", 5, 256, 19, 9},
    };
    for (const FusionCase &fc : fusion_cases) {
        const int h = fc.h, w = fc.w, nf = fc.nf, Cin = 12 * nf + 1, Co = fc.Co;
        std::vector<std::vector<float>> fr;
        std::vector<std::unique_ptr<Dev>> dfr;
        std::vector<const bf16 *> fp;
        for (int k = 0; k < nf; ++k) {
            fr.push_back(bf16_host::round(rnd((size_t)h * w * 12)));
            dfr.emplace_back(new Dev(fr.back().size() * 2));
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
        int rc = fc.fn(ctx, fp.data(), nf, sigma / 255.f, h, w, dwk.h(), db.f(), Co, dout.f(), nullptr);
        rc = rc ? rc : sync();
        std::vector<const float *> frp;
        for (auto &f : fr) frp.push_back(f.data());
        std::vector<float> fin((size_t)h * w * Cin), ref((size_t)h * w * Co), work(cpu::conv3x3_work_floats(h, w, Cin, Co));
        cpu::build_fusion_input(frp.data(), nf, h, w, sigma, fin.data());
        cpu::conv3x3(fin.data(), h, w, Cin, wk.data(), b.data(), Co, ref.data(), work.data());
        char name[64];
        std::snprintf(name, sizeof name, "fusion_conv3x3%s %d->%d %dx%d", fc.path, Cin, Co, w, h);
        check(name, down_f(dout, ref.size()), ref, 2e-2, rc, ctx.err);
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
    const int H = 16, W = 24, nwin = (H / 8) * (W / 8);
    for (int shift : {0, 4})  // layernorm + shifted window gather, all windows and windows [2, 5)
        for (int part = 0; part < 2; ++part) {
            const int C = 64, w0 = part ? 2 : 0, w1 = part ? 5 : nwin, nt = (w1 - w0) * 64;
            auto x = rnd((size_t)H * W * C, -2.f, 2.f), g = rnd(C, 0.5f, 1.5f), b = rnd(C, -0.5f, 0.5f);
            Dev dx(x.size() * 4), dg(C * 4), db(C * 4), dout((size_t)nt * C * 2);
            up_f(dx, x);
            up_f(dg, g);
            up_f(db, b);
            cuda::poison(ctx, dout.p, dout.bytes);
            int rc = cuda::layernorm_window(ctx, dx.f(), H, W, C, 8, shift, w0, w1, dg.f(), db.f(), 1e-5f, dout.h());
            rc = rc ? rc : sync();
            std::vector<float> ref((size_t)nt * C);
            cpu::window_gather_layernorm(x.data(), H, W, C, 8, shift, w0, w1, g.data(), b.data(), 1e-5f, ref.data());
            char name[64];
            std::snprintf(name, sizeof name, "layernorm_window shift=%d windows %d..%d", shift, w0, w1);
            check(name, down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
        }
    for (int variant = 0; variant < 4; ++variant) {  // linear
        // 0: bf16 out + bias epilogue; 1: fp32 out, beta 1, bias; 2: as 0 with the bias kernel;
        // 3: no bias, K 256 -> 128 fp32 (merge reduction)
        const int64_t n = 1000;
        const int K = variant == 3 ? 256 : 64, N = variant == 3 ? 128 : 192;
        const bool f32 = variant == 1 || variant == 3;
        auto x = bf16_host::round(rnd((size_t)n * K)), wt = rnd((size_t)N * K, -0.2f, 0.2f), b = rnd(N, -0.5f, 0.5f);
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
        auto x = rnd((size_t)rows * C, -4.f, 4.f), b = rnd(C, -0.5f, 0.5f);
        Dev dx(x.size() * 4), db(C * 4), dout(x.size() * 2);
        up_f(dx, x);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::gelu_tanh(ctx, dx.f(), rows, C, db.f(), dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref = x;
        cpu::gelu_tanh(ref.data(), rows, C, b.data());
        check("gelu_tanh + bias (fp32 in, bf16 out)", down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    for (int shift : {0, 4})  // window attention, all windows and windows [1, 4)
        for (int part = 0; part < 2; ++part) {
            const int heads = 2, C = 64, N = 64, w0 = part ? 1 : 0, w1 = part ? 4 : nwin, nt = (w1 - w0) * N;
            auto qkv = bf16_host::round(rnd((size_t)nt * 3 * C, -1.5f, 1.5f)), qb = rnd(3 * C, -0.2f, 0.2f);
            auto table = rnd((size_t)15 * 15 * heads, -1.f, 1.f);
            std::vector<float> relb((size_t)heads * N * N);
            gather_relative_bias(table.data(), 8, heads, relb.data());
            Dev dq(qkv.size() * 2), dqb(qb.size() * 4), drb(relb.size() * 4), dout((size_t)nt * C * 2);
            up_bf(dq, qkv);
            up_f(dqb, qb);
            up_f(drb, relb);
            cuda::poison(ctx, dout.p, dout.bytes);
            int rc = cuda::window_attention(ctx, dq.h(), dqb.f(), H, W, C, heads, 8, shift, w0, w1, drb.f(), dout.h());
            rc = rc ? rc : sync();
            std::vector<float> ref((size_t)nt * C);
            cpu::window_attention(qkv.data(), qb.data(), H, W, C, heads, 8, shift, w0, w1, relb.data(), ref.data());
            char name[64];
            std::snprintf(name, sizeof name, "window_attention shift=%d windows %d..%d", shift, w0, w1);
            check(name, down_bf(dout, ref.size()), ref, 2e-2, rc, ctx.err);
        }
    for (int shift : {0, 4})  // scatter add (residual of the attention branch), windows [2, 6)
        for (int part = 0; part < 2; ++part) {
            const int C = 32, w0 = part ? 2 : 0, w1 = part ? 6 : nwin, nt = (w1 - w0) * 64;
            auto win = rnd((size_t)nt * C), x = rnd((size_t)H * W * C), b = rnd(C);
            Dev dw(win.size() * 4), dx(x.size() * 4), db(C * 4);
            up_f(dw, win);
            up_f(dx, x);
            up_f(db, b);
            int rc = cuda::window_scatter_add(ctx, dw.f(), db.f(), H, W, C, 8, shift, w0, w1, dx.f());
            rc = rc ? rc : sync();
            std::vector<float> ref = x;
            cpu::window_scatter_add(win.data(), b.data(), H, W, C, 8, shift, w0, w1, ref.data());
            char name[64];
            std::snprintf(name, sizeof name, "window_scatter_add shift=%d windows %d..%d", shift, w0, w1);
            check(name, down_f(dx, ref.size()), ref, 1e-5, rc, ctx.err);
        }
    {  // patch merge front half: s2d + LN(4C)
        const int Hm = 32, Wm = 48, C = 32;
        auto x = rnd((size_t)Hm * Wm * C, -2.f, 2.f), g = rnd(4 * C, 0.5f, 1.5f), b = rnd(4 * C, -0.5f, 0.5f);
        Dev dx(x.size() * 4), dg(g.size() * 4), db(b.size() * 4), dout(x.size() * 2);
        up_f(dx, x);
        up_f(dg, g);
        up_f(db, b);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::merge_s2d_layernorm(ctx, dx.f(), Hm, Wm, C, dg.f(), db.f(), 1e-5f, dout.h());
        rc = rc ? rc : sync();
        std::vector<float> ref(x.size());
        cpu::s2d_nhwc(x.data(), Hm, Wm, C, ref.data());
        cpu::layernorm(ref.data(), ref.data(), (int64_t)(Hm / 2) * (Wm / 2), 4 * C, g.data(), b.data(), 1e-5f);
        check("merge_s2d_layernorm C=32", down_bf(dout, ref.size()), ref, 3e-2, rc, ctx.err);
    }
    {  // expand back half + skip concat: [d2s(up) | skip_hi | skip_lo]
        const int h = 8, w = 12, C4 = 256, Cs = 64, Cu = C4 / 4, Co = Cu + 2 * Cs;
        auto upm = bf16_host::round(rnd((size_t)h * w * C4)), skip = rnd((size_t)4 * h * w * Cs);
        Dev du(upm.size() * 2), ds(skip.size() * 4), dout((size_t)4 * h * w * Co * 2);
        up_bf(du, upm);
        up_f(ds, skip);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::d2s_concat(ctx, du.h(), h, w, C4, ds.f(), Cs, dout.h());
        rc = rc ? rc : sync();
        const std::vector<float> got = down_bf(dout, (size_t)4 * h * w * Co), hi_s = bf16_host::round(skip);
        std::vector<float> d2s((size_t)4 * h * w * Cu), ref, ref_lo, got_main, got_lo;
        cpu::d2s_nhwc(upm.data(), h, w, C4, d2s.data());
        for (int64_t p = 0; p < 4 * h * w; ++p) {
            for (int c = 0; c < Cu; ++c) ref.push_back(d2s[p * Cu + c]);
            for (int c = 0; c < Cs; ++c) ref.push_back(skip[p * Cs + c]);
            for (int c = 0; c < Cs; ++c) ref_lo.push_back(skip[p * Cs + c] - hi_s[p * Cs + c]);
            got_main.insert(got_main.end(), got.begin() + p * Co, got.begin() + p * Co + Cu + Cs);
            got_lo.insert(got_lo.end(), got.begin() + p * Co + Cu + Cs, got.begin() + (p + 1) * Co);
        }
        check("d2s_concat 256/4 + 64: d2s, skip hi", got_main, ref, 8e-3, rc, ctx.err);
        check("d2s_concat 256/4 + 64: skip lo (s - hi)", got_lo, ref_lo, 1e-5, rc, ctx.err);
    }
    for (int mode = 0; mode < 3; ++mode) {  // head stencil: whole map; rows [5, 11) of a band; change
        const int h = 16, w = 24, Co = 12, Gc = 112;
        const int r0 = mode == 1 ? 5 : 0, r1 = mode == 1 ? 11 : h, g0 = mode == 1 ? 4 : 0;
        const bool as_change = mode == 2;
        auto G = rnd((size_t)h * w * Gc, -0.3f, 0.3f), b = rnd(Co, -0.2f, 0.2f), res = bf16_host::round(rnd((size_t)h * w * Co, -1.3f, 1.3f));  // residuals beyond [-1, 1] too
        Dev dG(G.size() * 4), db(Co * 4), dr(res.size() * 2), dout(res.size() * 4);
        up(dG, G.data() + (size_t)g0 * w * Gc, (G.size() - (size_t)g0 * w * Gc) * 4);
        up_f(db, b);
        up_bf(dr, res);
        cuda::poison(ctx, dout.p, dout.bytes);
        int rc = cuda::head_stencil(ctx, dG.f(), Gc, g0, h, w, r0, r1, db.f(), Co, dr.h(), dout.f(), as_change);
        rc = rc ? rc : sync();
        std::vector<float> ref, got, all = down_f(dout, res.size());
        for (int y = r0; y < r1; ++y)
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
                    const float r = res[i], v = std::min(std::max(1.f, r), std::max(std::min(-1.f, r), a + r));
                    ref.push_back(as_change ? 0.5f * (v - r) : v);
                    got.push_back(all[i]);
                }
        static const char *names[] = {"head_stencil 112 -> 12", "head_stencil rows 5..11 of a band",
                                      "head_stencil as change"};
        check(names[mode], got, ref, 1e-5, rc, ctx.err);
    }
    {  // shape checks refuse instead of reading out of bounds
        Dev d(1024);
        int rc1 = cuda::window_attention(ctx, d.h(), nullptr, 12, 16, 64, 2, 8, 0, 0, 2, d.f(), d.h());
        int rc2 = cuda::head_stencil(ctx, d.f(), 100, 0, 4, 4, 0, 4, d.f(), 12, d.h(), d.f(), false);
        int rc3 = cuda::linear(ctx, d.h(), 4, 32, 16, d.h(), nullptr, 8, d.p, false, 8, 0.f);
        int rc4 = cuda::layernorm_window(ctx, d.f(), 16, 16, 8, 8, 0, 3, 5, d.f(), d.f(), 1e-5f, d.h());
        int rc5 = cuda::head_stencil(ctx, d.f(), 112, 3, 8, 4, 2, 4, d.f(), 12, d.h(), d.f(), false);
        result(rc1 == DENOISE_EINVAL && rc2 == DENOISE_EINVAL && rc3 == DENOISE_EINVAL && rc4 == DENOISE_EINVAL &&
                   rc5 == DENOISE_EINVAL,
               "%-40s window 12 rows, G 100 < 108 ch, lda < K, windows 3..5 of 4, G after row r0-1 -> EINVAL "
               "(%d %d %d %d %d)",
               "shape checks refuse", rc1, rc2, rc3, rc4, rc5);
        ctx.err.clear();
    }
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        (void)o;
        timed("ops", [&] { ops_checks(ctx); });
    });
}
