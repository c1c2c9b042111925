// denoise-cuda-bench: this run's ceilings, a cuBLASLt bf16 GEMM and a device copy (bench_ceilings).
#include "cuda_bench.h"

namespace cuda_bench {

int bench_ceilings(int iters) {
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const int64_t N = 8192;
    const size_t copy_bytes = (size_t)1 << 30;
    void *a = nullptr, *w = nullptr, *o = nullptr, *s = nullptr, *d = nullptr;
    CK(cuda::dev_alloc(ctx, &a, 2 * N * N, "GEMM A"));
    CK(cuda::dev_alloc(ctx, &w, 2 * N * N, "GEMM W"));
    CK(cuda::dev_alloc(ctx, &o, 2 * N * N, "GEMM out"));
    CK(cuda::dev_alloc(ctx, &s, copy_bytes, "copy source"));
    CK(cuda::dev_alloc(ctx, &d, copy_bytes, "copy destination"));
    {  // random bf16 values in [-1, 1) (zeros would let the tensor cores idle at lower power)
        std::vector<uint16_t> h((size_t)N * N);
        uint32_t x = 2463534242u;
        for (auto &v : h) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const float f = (float)(x >> 8) / 8388608.0f - 1.0f;
            uint32_t u;
            std::memcpy(&u, &f, 4);
            v = (uint16_t)(u >> 16);
        }
        CU(cudaMemcpyAsync(a, h.data(), h.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaMemcpyAsync(w, h.data(), h.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaMemsetAsync(s, 1, copy_bytes, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    auto median_ms = [&](const std::function<int()> &f, double *med) -> int {
        std::vector<float> t;
        for (int i = 0; i < 3; ++i)  // warm-up
            if (f()) return 1;
        if (time_each(ctx, e0, e1, iters, [&](int) { return f(); }, &t)) return 1;
        *med = t[t.size() / 2];
        return 0;
    };
    double gemm_ms = 0, copy_ms = 0;
    if (median_ms([&] {
            return cuda::linear(ctx, (const cuda::bf16 *)a, N, (int)N, (int)N, (const cuda::bf16 *)w, nullptr, (int)N, o,
                                false, (int)N, 0.f);
        }, &gemm_ms)) {
        std::fprintf(stderr, "denoise-cuda-bench: GEMM ceiling: %s\n", ctx.err.c_str());
        return 1;
    }
    if (median_ms([&] { return cuda::cuda_check(ctx, cudaMemcpyAsync(d, s, copy_bytes, cudaMemcpyDeviceToDevice,
                                                                     ctx.stream), "cudaMemcpyAsync (copy ceiling)"); },
                  &copy_ms))
        return 1;
    g_gemm_tflops = 2.0 * N * N * N / (gemm_ms * 1e-3) / 1e12;
    g_copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    std::printf("cuda-bench ceilings: cuBLASLt bf16 GEMM 8192^3 (fp32 accumulate, bf16 out) %.3f ms = %.0f TFLOP/s; "
                "device-to-device copy of 1 GiB %.3f ms = %.0f GB/s (read + write); medians of %d\n",
                gemm_ms, g_gemm_tflops, copy_ms, g_copy_gbs, iters);
    std::fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cuda::ctx_destroy(ctx);
    return 0;
}

}  // namespace cuda_bench
