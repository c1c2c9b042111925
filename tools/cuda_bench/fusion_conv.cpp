// denoise-cuda-bench --fusion-conv: the fusion conv alone, direct vs tensor core (bench_fusion_conv).
#include "cuda_bench.h"

namespace cuda_bench {

// The public API on `frames` yuv420p frames; memory CUDA uses the primary context and a stream.
// --fusion-conv: the input fusion conv alone (5 frames + sigma -> Co channels: 32, models v1 / v2,
// and 64, the v3 study's wide64; random bf16 frames and weights) on a token map of W x H: the
// direct form (CUDA cores) and the tensor-core implicit GEMM side by side in one run, each timed
// with CUDA events after 3 warm-ups, median of `iters`, interleaved; GFLOP = 2 x 9 x 61 x Co per
// token (useful MACs), GB = the frames read once (5 x 24 B per token) + the fp32 output written
// (4 Co B per token); and the largest difference between the two outputs (both fp32 accumulation
// of the same bf16 values: ~1e-5 expected).
int bench_fusion_conv(int w, int h, int iters, int Co) {
    const int nf = 5, Cin = 61;
    const size_t n = (size_t)w * h;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    std::vector<cuda::bf16 *> fr(nf);
    cuda::bf16 *wk = nullptr;
    float *bias = nullptr, *out[2] = {nullptr, nullptr};
    auto bf16_bits = [](uint32_t i, float scale) {  // a deterministic value in [-scale, scale) as bf16 bits
        const float v = scale * ((float)((i * 2654435761u) >> 8) / 8388608.f - 1.f);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return (uint16_t)(u >> 16);
    };
    {
        std::vector<uint16_t> host(n * 12);
        for (int k = 0; k < nf; ++k) {
            CK(cuda::dev_alloc(ctx, (void **)&fr[k], n * 12 * 2, "frames"));
            for (size_t i = 0; i < host.size(); ++i) host[i] = bf16_bits((uint32_t)(i + k * 7919), 1.f);
            CU(cudaMemcpy(fr[k], host.data(), host.size() * 2, cudaMemcpyHostToDevice));
        }
        std::vector<uint16_t> hw((size_t)9 * Cin * Co);
        for (size_t i = 0; i < hw.size(); ++i) hw[i] = bf16_bits((uint32_t)i + 1, 0.1f);
        std::vector<float> hb(Co);
        for (int o = 0; o < Co; ++o) hb[o] = 0.01f * o;
        CK(cuda::dev_alloc(ctx, (void **)&wk, hw.size() * 2, "weights"));
        CK(cuda::dev_alloc(ctx, (void **)&bias, Co * 4, "bias"));
        CU(cudaMemcpy(wk, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(bias, hb.data(), Co * 4, cudaMemcpyHostToDevice));
        for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, n * Co * 4, "out"));
        CU(cudaDeviceSynchronize());
    }
    using Fn = int (*)(cuda::Ctx &, const cuda::bf16 *const *, int, float, int, int, const cuda::bf16 *, const float *,
                       int, float *, const cuda::TileShift *);
    const Fn fns[2] = {cuda::fusion_conv3x3_direct, cuda::fusion_conv3x3_tc};
    const char *names[2] = {"direct", "tensor-core"};
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<float> ms[2];
    for (int i = 0; i < 3 + iters; ++i)
        for (int v = 0; v < 2; ++v) {
            CU(cudaEventRecord(a, ctx.stream));
            CK(fns[v](ctx, (const cuda::bf16 *const *)fr.data(), nf, 20.f / 255.f, h, w, wk, bias, Co, out[v], nullptr));
            CU(cudaEventRecord(b, ctx.stream));
            CU(cudaEventSynchronize(b));
            float t = 0;
            CU(cudaEventElapsedTime(&t, a, b));
            if (i >= 3) ms[v].push_back(t);
        }
    double max_diff = 0, max_ref = 0;
    {
        std::vector<float> o0(n * Co), o1(n * Co);
        CU(cudaMemcpy(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < o0.size(); ++i) {
            const double d = std::fabs((double)o0[i] - o1[i]);
            max_diff = std::isfinite(d) ? std::max(max_diff, d) : INFINITY;
            max_ref = std::max(max_ref, (double)std::fabs(o0[i]));
        }
    }
    const double gflop = 2.0 * 9 * Cin * Co * n / 1e9, gb = (120.0 + 4.0 * Co) * n / 1e9;
    for (int v = 0; v < 2; ++v) {
        std::sort(ms[v].begin(), ms[v].end());
        const double med = ms[v][ms[v].size() / 2];
        std::printf("cuda-bench fusion-conv Co %d %5dx%-5d tokens %-11s %8.3f ms (min %.3f)  %6.2f GFLOP  %7.2f TFLOP/s  "
                    "%7.1f GB/s\n",
                    Co, w, h, names[v], med, ms[v][0], gflop, gflop / med, gb / med * 1000.0);
        g_rows.push_back({"fusion conv Co " + std::to_string(Co) + " " + std::to_string(w) + "x" + std::to_string(h) + " " +
                              names[v],
                          med, 1000.0 / med, ctx.peak / 1073741824.0});
    }
    std::printf("cuda-bench fusion-conv Co %d %5dx%-5d tokens max |direct - tensor-core| %.2e (max |out| %.2e)%s\n", Co, w,
                h, max_diff, max_ref, max_diff <= 1e-3 * std::max(1.0, max_ref) ? "" : "  MISMATCH");
    std::fflush(stdout);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cuda::ctx_destroy(ctx);
    return max_diff <= 1e-3 * std::max(1.0, max_ref) ? 0 : 1;
}

}  // namespace cuda_bench
