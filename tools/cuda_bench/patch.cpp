// denoise-cuda-bench --patch: the patch merges and expands, op sequence vs fused kernels (bench_patch).
#include "cuda_bench.h"

namespace cuda_bench {

// --patch: the U-Net's two patch merges and two patch expands alone, on the token grids of a W x H
// frame (padded to the model's multiple), with the model's weights and random maps U(-2, 2): the
// correct-first op sequence (Net::merge / Net::expand's ops on the whole map in one chunk) and the
// fused tensor-core kernel (patch_tc.cu) side by side in one run, each timed with CUDA events
// after 3 warm-ups, median of `iters`, interleaved; GFLOP = the GEMMs' 2 x MACs, GB = the fused
// kernel's DRAM traffic (the fp32 maps read once and the fp32 result written once); and the rel L2
// between the two outputs (they differ by bf16 roundings only: ~1e-4; above 1e-2 is a failure).
int bench_patch(const Model &M, int W, int H, int iters) {
    const ModelConfig &cfg = M.cfg;
    const ModelWeights &Wt = M.w;
    const int m = cfg.pad_multiple, h0 = (H + m - 1) / m * m / 2, w0 = (W + m - 1) / m * m / 2;
    const int c0 = cfg.channels[0], c1 = cfg.channels[1], c2 = cfg.channels[2];
    const int64_t n0 = (int64_t)h0 * w0, n1 = n0 / 4, n2 = n0 / 16;
    const float eps = (float)cfg.ln_eps;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    auto up = [&](const void *host, size_t bytes, void **dst) -> int {
        CK(cuda::dev_alloc(ctx, dst, bytes, "bench_patch"));
        CU(cudaMemcpyAsync(*dst, host, bytes, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        return 0;
    };
    auto bf = [](const float *p, size_t n) {
        std::vector<uint16_t> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = cuda::patch_tc::bf16_bits(p[i]);
        return v;
    };
    struct Merge {
        const char *name;
        int C, Co, H, W;
        cuda::bf16 *w16, *wp;
        float *g, *b, *gp, *bp;
        float *x;
    } mg[2] = {{"merge0", c0, Wt.merge0_red.out, h0, w0}, {"merge1", c1, Wt.merge1_red.out, h0 / 2, w0 / 2}};
    struct Expand {
        const char *name;
        int C, C2, Cs, Co, h, w;
        cuda::bf16 *we16, *be16, *ws16, *wep, *wsp;
        float *bs, *bep;
        float *lo, *skip;
    } ex[2] = {{"expand1", c2, Wt.expand1.out, c1, Wt.skip1.out, h0 / 4, w0 / 4},
               {"expand0", c1, Wt.expand0.out, c0, Wt.skip0.out, h0 / 2, w0 / 2}};
    const NormW *mn[2] = {&Wt.merge0_norm, &Wt.merge1_norm};
    const LinearW *mr[2] = {&Wt.merge0_red, &Wt.merge1_red}, *ee[2] = {&Wt.expand1, &Wt.expand0},
                  *es[2] = {&Wt.skip1, &Wt.skip0};
    float *x[3] = {nullptr, nullptr, nullptr};
    {
        const int64_t nn[3] = {n0, n1, n2};
        const int cc[3] = {c0, c1, c2};
        for (int l = 0; l < 3; ++l) {
            std::vector<float> v((size_t)nn[l] * cc[l]);
            for (size_t i = 0; i < v.size(); ++i) v[i] = 4.f * ((float)((uint32_t)(i * 2654435761u) >> 8) / 16777216.f) - 2.f;
            if (up(v.data(), v.size() * 4, (void **)&x[l])) return 1;
        }
    }
    if (!ee[0]->b || !ee[1]->b || !es[0]->b || !es[1]->b) {
        std::fprintf(stderr, "denoise-cuda-bench: the expand / skip linears have no bias\n");
        return 1;
    }
    for (int i = 0; i < 2; ++i) {
        Merge &g = mg[i];
        const int K = 4 * g.C;
        std::vector<uint16_t> wp;
        std::vector<float> gp, bp;
        cuda::patch_tc::pack_merge(mr[i]->w, g.C, g.Co, mn[i]->g, mn[i]->b, &wp, &gp, &bp);
        const std::vector<uint16_t> w16 = bf(mr[i]->w, (size_t)g.Co * K);
        if (up(w16.data(), w16.size() * 2, (void **)&g.w16) || up(wp.data(), wp.size() * 2, (void **)&g.wp) ||
            up(mn[i]->g, K * 4, (void **)&g.g) || up(mn[i]->b, K * 4, (void **)&g.b) || up(gp.data(), K * 4, (void **)&g.gp) ||
            up(bp.data(), K * 4, (void **)&g.bp))
            return 1;
        g.x = x[i];
        Expand &e = ex[i];
        const int Ck = e.C2 / 4 + e.Cs;
        std::vector<uint16_t> wep, wsp;
        std::vector<float> bep;
        cuda::patch_tc::pack_expand(ee[i]->w, ee[i]->b, e.C, e.C2, es[i]->w, Ck, e.Co, &wep, &bep, &wsp);
        // the sequence's skip weight as Net uploads it: [Wu | Ws | Ws] over [d2s(up) | skip_hi | skip_lo]
        std::vector<float> wz((size_t)e.Co * (Ck + e.Cs));
        for (int n = 0; n < e.Co; ++n)
            for (int k = 0; k < Ck + e.Cs; ++k) wz[(size_t)n * (Ck + e.Cs) + k] = es[i]->w[(size_t)n * Ck + (k < Ck ? k : k - e.Cs)];
        const std::vector<uint16_t> we16 = bf(ee[i]->w, (size_t)e.C2 * e.C), be16 = bf(ee[i]->b, e.C2),
                                    ws16 = bf(wz.data(), wz.size());
        if (up(we16.data(), we16.size() * 2, (void **)&e.we16) || up(be16.data(), be16.size() * 2, (void **)&e.be16) ||
            up(ws16.data(), ws16.size() * 2, (void **)&e.ws16) || up(wep.data(), wep.size() * 2, (void **)&e.wep) ||
            up(wsp.data(), wsp.size() * 2, (void **)&e.wsp) || up(es[i]->b, e.Co * 4, (void **)&e.bs) ||
            up(bep.data(), e.C2 * 4, (void **)&e.bep))
            return 1;
        e.lo = x[2 - i];
        e.skip = x[1 - i];
    }
    // chunk buffers of the sequence (one chunk) and the two outputs
    const int64_t ea = std::max({n1 * 4 * c0, n2 * 4 * c1, n2 * c2, 4 * n2 * (ex[0].C2 / 4 + 2 * ex[0].Cs), n1 * c1,
                                 4 * n1 * (ex[1].C2 / 4 + 2 * ex[1].Cs)}),
                  eq = std::max(n2 * ex[0].C2, n1 * ex[1].C2), eo = std::max({n1 * mg[0].Co, 4 * n1 * ex[1].Co, 4 * n2 * ex[0].Co});
    cuda::bf16 *a = nullptr, *q = nullptr;
    float *out[2] = {nullptr, nullptr};
    CK(cuda::dev_alloc(ctx, (void **)&a, (size_t)ea * 2, "chunk a"));
    CK(cuda::dev_alloc(ctx, (void **)&q, (size_t)eq * 2, "chunk q"));
    for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, (size_t)eo * 4, "out"));
    auto run = [&](int op, int v) -> int {  // op 0, 1: merges, 2, 3: expands; v 0: sequence, 1: fused
        if (op < 2) {
            const Merge &g = mg[op];
            if (v) return cuda::patch_merge_tc(ctx, g.x, g.H, g.W, g.C, g.wp, g.gp, g.bp, g.Co, eps, out[1]);
            const int64_t nt = (int64_t)(g.H / 2) * (g.W / 2);
            int rc = cuda::merge_s2d_layernorm(ctx, g.x, g.H, g.W, g.C, g.g, g.b, eps, a);
            return rc ? rc : cuda::linear(ctx, a, nt, 4 * g.C, 4 * g.C, g.w16, nullptr, g.Co, out[0], true, g.Co, 0.f);
        }
        const Expand &e = ex[op - 2];
        const int Kz = e.C2 / 4 + 2 * e.Cs;
        if (v)
            return cuda::patch_expand_tc(ctx, e.lo, e.h, e.w, e.C, e.wep, e.bep, e.C2, e.skip, e.Cs, e.wsp, e.bs, e.Co, out[1]);
        const int64_t nt = (int64_t)e.h * e.w;
        int rc = cuda::cast_to_bf16(ctx, e.lo, nt * e.C, a);
        if (!rc) rc = cuda::linear(ctx, a, nt, e.C, e.C, e.we16, e.be16, e.C2, q, false, e.C2, 0.f);
        if (!rc) rc = cuda::d2s_concat(ctx, q, e.h, e.w, e.C2, e.skip, e.Cs, a);
        return rc ? rc : cuda::linear(ctx, a, 4 * nt, Kz, Kz, e.ws16, e.bs, e.Co, out[0], true, e.Co, 0.f);
    };
    cudaEvent_t ea_, eb_;
    CU(cudaEventCreate(&ea_));
    CU(cudaEventCreate(&eb_));
    int bad = 0;
    double tot[2] = {0, 0};
    for (int op = 0; op < 4; ++op) {
        std::vector<float> ms[2];
        for (int i = 0; i < 3 + iters; ++i)
            for (int v = 0; v < 2; ++v) {
                CU(cudaEventRecord(ea_, ctx.stream));
                CK(run(op, v));
                CU(cudaEventRecord(eb_, ctx.stream));
                CU(cudaEventSynchronize(eb_));
                float t = 0;
                CU(cudaEventElapsedTime(&t, ea_, eb_));
                if (i >= 3) ms[v].push_back(t);
            }
        int64_t nout;
        double gflop, gb;
        std::string what;
        if (op < 2) {
            const Merge &g = mg[op];
            nout = (int64_t)(g.H / 2) * (g.W / 2);
            gflop = 2.0 * nout * 4 * g.C * g.Co / 1e9;
            gb = (16.0 * g.C + 4.0 * g.Co) * nout / 1e9;
            what = std::string(g.name) + " C " + std::to_string(g.C) + "->" + std::to_string(g.Co);
            nout *= g.Co;
        } else {
            const Expand &e = ex[op - 2];
            const int64_t nl = (int64_t)e.h * e.w;
            gflop = (2.0 * e.C * e.C2 + 8.0 * (e.C2 / 4 + 2 * e.Cs) * e.Co) * nl / 1e9;  // skip map in two bf16 parts
            gb = (4.0 * e.C + 16.0 * e.Cs + 16.0 * e.Co) * nl / 1e9;
            what = std::string(e.name) + " C " + std::to_string(e.C) + "+" + std::to_string(e.Cs) + "->" + std::to_string(e.Co);
            nout = 4 * nl * e.Co;
        }
        std::vector<float> o0((size_t)nout), o1((size_t)nout);
        CU(cudaMemcpyAsync(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaMemcpyAsync(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        double num = 0, den = 0;
        for (size_t i = 0; i < o0.size(); ++i) {
            num += ((double)o1[i] - o0[i]) * ((double)o1[i] - o0[i]);
            den += (double)o0[i] * o0[i];
        }
        const double rel = den > 0 ? std::sqrt(num / den) : INFINITY;
        const bool ok = rel < 1e-2;  // NaN fails too
        bad |= !ok;
        double med[2];
        for (int v = 0; v < 2; ++v) {
            std::sort(ms[v].begin(), ms[v].end());
            med[v] = ms[v][ms[v].size() / 2];
            tot[v] += med[v];
        }
        std::printf("cuda-bench patch %5dx%-5d %-22s %7.2f GFLOP %7.3f GB | sequence %8.4f ms (min %.4f) | fused %8.4f ms "
                    "(min %.4f) %6.0f GB/s %6.1f TFLOP/s | %5.1fx | rel L2 %.1e%s\n",
                    W, H, what.c_str(), gflop, gb, med[0], ms[0][0], med[1], ms[1][0], gb / med[1] * 1e3, gflop / med[1],
                    med[0] / med[1], rel, ok ? "" : "  MISMATCH");
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " " + what + " sequence", med[0], 0, 0});
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " " + what + " fused", med[1], 0, 0});
    }
    std::printf("cuda-bench patch %5dx%-5d all four: sequence %.4f ms, fused %.4f ms per frame (%.1fx)\n", W, H, tot[0], tot[1],
                tot[0] / tot[1]);
    std::fflush(stdout);
    cudaEventDestroy(ea_);
    cudaEventDestroy(eb_);
    cuda::ctx_destroy(ctx);
    return bad;
}

}  // namespace cuda_bench
