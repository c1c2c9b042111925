// denoise-cuda-bench --head: the output head alone, tensor-core vs two-pass (bench_head).
#include "cuda_bench.h"

namespace cuda_bench {

// --head: the output head alone (3 feature maps of c0 channels -> 12: c0 32, models v1 / v2, and
// 64, the v3 study's wide64; random bf16 features and
// weights, residual in [-1.2, 1.2]) on a token map of W x H, the change form the engine uses:
// the tensor-core kernel (head_conv3d_tc, the fused path's) and the two-pass head (three cuBLASLt
// GEMMs into G + head_stencil, in the backend's bands of 32 MiB of G: DENOISE_CUDA_FUSED=0's path,
// and its GEMMs alone and its stencil alone) side by side in one run, each timed with CUDA events
// after 3 warm-ups, median of `iters`, interleaved; GFLOP = tensor-core FLOP issued (N padded to 16) and the conv's own (2 x 27 x c0 x
// 12 per token); GB = the least DRAM traffic of each form (ops.h head_conv3d_tc_bytes /
// head_two_pass_bytes: G written and read in the two-pass form); and the largest difference
// between the two outputs (both fp32 sums of the same bf16 products: ~1e-6 expected).
int bench_head(int w, int h, int iters, int c0) {
    const int Co = 12, Gc = 112;
    const size_t n = (size_t)w * h;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    std::string why;
    if (cuda::head_conv3d_tc_supported(ctx.device, c0, &why)) {
        std::fprintf(stderr, "denoise-cuda-bench: %s\n", why.c_str());
        cuda::ctx_destroy(ctx);
        return 1;
    }
    auto bf16_bits = [](uint32_t i, float scale) {  // a deterministic value in [-scale, scale) as bf16 bits
        const float v = scale * ((float)((i * 2654435761u) >> 8) / 8388608.f - 1.f);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return (uint16_t)(u >> 16);
    };
    cuda::bf16 *F[3], *wt[3], *wtc = nullptr, *res = nullptr;
    float *bias = nullptr, *G = nullptr, *out[2] = {nullptr, nullptr};
    const int band = (int)std::max<int64_t>(1, ((int64_t)32 << 20) / ((int64_t)w * Gc * 4) - 2);
    {
        std::vector<uint16_t> host(n * c0);
        for (int k = 0; k < 3; ++k) {
            CK(cuda::dev_alloc(ctx, (void **)&F[k], n * c0 * 2, "features"));
            for (size_t i = 0; i < host.size(); ++i) host[i] = bf16_bits((uint32_t)(i + k * 7919), 1.f);
            CU(cudaMemcpyAsync(F[k], host.data(), host.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
            CU(cudaStreamSynchronize(ctx.stream));
        }
        // PyTorch's head.weight (12, c0, 3, 3, 3), bf16-exact, packed for both forms
        std::vector<float> W((size_t)Co * c0 * 27);
        for (size_t i = 0; i < W.size(); ++i) {
            const uint32_t u = (uint32_t)bf16_bits((uint32_t)i + 1, 0.1f) << 16;
            std::memcpy(&W[i], &u, 4);
        }
        std::vector<uint16_t> hw((size_t)9 * 16 * 3 * c0);
        if (!cuda::head_conv3d_tc_pack(W.data(), Co, c0, hw.data())) return 1;
        CK(cuda::dev_alloc(ctx, (void **)&wtc, hw.size() * 2, "head weights (tensor-core)"));
        CU(cudaMemcpyAsync(wtc, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        for (int dt = 0; dt < 3; ++dt) {
            std::vector<uint16_t> m((size_t)Gc * c0, 0);
            for (int o = 0; o < Co; ++o)
                for (int ci = 0; ci < c0; ++ci)
                    for (int t = 0; t < 9; ++t) {
                        uint32_t u;
                        std::memcpy(&u, &W[(((size_t)o * c0 + ci) * 3 + dt) * 9 + t], 4);
                        m[((size_t)t * Co + o) * c0 + ci] = (uint16_t)(u >> 16);
                    }
            CK(cuda::dev_alloc(ctx, (void **)&wt[dt], m.size() * 2, "head weights (two-pass)"));
            CU(cudaMemcpyAsync(wt[dt], m.data(), m.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
            CU(cudaStreamSynchronize(ctx.stream));
        }
        std::vector<uint16_t> hr(n * Co);
        for (size_t i = 0; i < hr.size(); ++i) hr[i] = bf16_bits((uint32_t)i + 12345, 1.2f);
        CK(cuda::dev_alloc(ctx, (void **)&res, hr.size() * 2, "residual"));
        CU(cudaMemcpyAsync(res, hr.data(), hr.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        std::vector<float> hb(Co);
        for (int o = 0; o < Co; ++o) hb[o] = 0.01f * o;
        CK(cuda::dev_alloc(ctx, (void **)&bias, Co * 4, "bias"));
        CU(cudaMemcpyAsync(bias, hb.data(), Co * 4, cudaMemcpyHostToDevice, ctx.stream));
        CK(cuda::dev_alloc(ctx, (void **)&G, (size_t)(std::min(band, h) + 2) * w * Gc * 4, "head band G"));
        for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, n * Co * 4, "out"));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    // Net::head's two-pass loop; parts: 1 the GEMMs only, 2 the stencil only, 3 both
    auto two_pass = [&](int parts) -> int {
        for (int r0 = 0; r0 < h; r0 += band) {
            const int r1 = std::min(h, r0 + band), g0 = std::max(0, r0 - 1), g1 = std::min(h, r1 + 1);
            if (parts & 1)
                for (int dt = 0; dt < 3; ++dt)
                    CK(cuda::linear(ctx, F[dt] + (size_t)g0 * w * c0, (int64_t)(g1 - g0) * w, c0, c0, wt[dt], nullptr, Gc,
                                    G, true, Gc, dt ? 1.f : 0.f));
            if (parts & 2) CK(cuda::head_stencil(ctx, G, Gc, g0, h, w, r0, r1, bias, Co, res, out[1], true));
        }
        return 0;
    };
    auto tc = [&]() -> int {
        const cuda::bf16 *Fp[3] = {F[0], F[1], F[2]};
        CK(cuda::head_conv3d_tc(ctx, Fp, h, w, c0, wtc, bias, Co, res, out[0], true));
        return 0;
    };
    // the two forms, then the two-pass form's GEMMs alone and its stencil alone
    const char *names[4] = {"tensor-core", "two-pass", "two-pass GEMMs", "two-pass stencil"};
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<float> ms[4];
    for (int i = 0; i < 3 + iters; ++i)
        for (int v = 0; v < 4; ++v) {
            CU(cudaEventRecord(a, ctx.stream));
            if (v ? two_pass(v == 1 ? 3 : v - 1) : tc()) return 1;
            CU(cudaEventRecord(b, ctx.stream));
            CU(cudaEventSynchronize(b));
            float t = 0;
            CU(cudaEventElapsedTime(&t, a, b));
            if (i >= 3) ms[v].push_back(t);
        }
    // the stencil-alone samples read G as the last GEMMs left it: the full two-pass head once more
    // for the comparison
    if (two_pass(3)) return 1;
    double max_diff = 0, max_ref = 0;
    {
        std::vector<float> o0(n * Co), o1(n * Co);
        CU(cudaMemcpyAsync(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaMemcpyAsync(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        for (size_t i = 0; i < o0.size(); ++i) {
            const double d = std::fabs((double)o0[i] - o1[i]);
            max_diff = std::isfinite(d) ? std::max(max_diff, d) : INFINITY;
            max_ref = std::max(max_ref, (double)std::fabs(o1[i]));
        }
    }
    const double gf_tc = cuda::head_conv3d_tc_flop((int64_t)n, c0) / 1e9, gf = cuda::head_conv3d_flop((int64_t)n, Co, c0) / 1e9;
    const double gb[2] = {cuda::head_conv3d_tc_bytes((int64_t)n, Co, c0) / 1e9,
                          cuda::head_two_pass_bytes((int64_t)n, Co, c0) / 1e9};
    double med[2];
    for (int v = 0; v < 2; ++v) {
        std::sort(ms[v].begin(), ms[v].end());
        med[v] = ms[v][ms[v].size() / 2];
        std::printf("cuda-bench head c0 %d %5dx%-5d tokens %-11s %8.3f ms (min %.3f)  %6.2f GFLOP (conv; %.2f issued on "
                    "tensor cores)  %7.2f TFLOP/s  %6.3f GB  %7.1f GB/s%s\n",
                    c0, w, h, names[v], med[v], ms[v][0], gf, gf_tc, gf / med[v], gb[v], gb[v] / med[v] * 1000.0,
                    v ? (" (bands of " + std::to_string(band) + " rows)").c_str() : "");
        g_rows.push_back({"head c0 " + std::to_string(c0) + " " + std::to_string(w) + "x" + std::to_string(h) + " " + names[v],
                          med[v], 1000.0 / med[v], ctx.peak / 1073741824.0});
    }
    const bool ok = max_diff <= 1e-4 * std::max(1.0, max_ref);
    for (int v = 2; v < 4; ++v) {
        std::sort(ms[v].begin(), ms[v].end());
        std::printf("cuda-bench head c0 %d %5dx%-5d tokens %-16s %8.3f ms (min %.3f)\n", c0, w, h, names[v],
                    ms[v][ms[v].size() / 2], ms[v][0]);
    }
    std::printf("cuda-bench head c0 %d %5dx%-5d tokens tensor-core %.2fx faster; max |tensor-core - two-pass| %.2e (max "
                "|out| %.2e)%s\n",
                c0, w, h, med[1] / med[0], max_diff, max_ref, ok ? "" : "  MISMATCH");
    std::fflush(stdout);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cuda::ctx_destroy(ctx);
    return ok ? 0 : 1;
}

}  // namespace cuda_bench
