// cuda_bench (build/bin/denoise-cuda-bench): speed of the CUDA engine (built only with ./configure --enable-cuda-engine; run by
// tools/bench.sh). For each frame size: the steady-state work of one output frame (convert_in of
// the newest frame, one U-Net pass, the head, convert_out) timed with CUDA events after warm-up,
// median of --iters runs; then the same through the public API (denoise_push/pull with the host
// copies, wall clock). Prints ms/frame, frames/s, peak GPU memory, GFLOP per frame (the formula
// of weights/model.py gflop_per_frame) and achieved TFLOP/s.
// Usage: denoise-cuda-bench [--weights FILE] [--iters N] [--sizes WxH,WxH,...]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/unet.h"
#include "cuda/network.h"
#include "cuda/ops.h"
#include "denoise.h"
#include "gpu_backend.h"
#include "model_config.h"
#include "safetensors.h"

using namespace denoise;

static double gflop_per_frame(const ModelConfig &c, int H, int W) {
    const int m = c.pad_multiple;
    H = (H + m - 1) / m * m;
    W = (W + m - 1) / m * m;
    const double c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2];
    const double n0 = (double)(H / 2) * (W / 2), n1 = n0 / 4, n2 = n0 / 16, N = c.window * c.window, r = c.mlp_ratio;
    auto block = [&](double C, double n) { return n * (3 * C * C + C * C + 2 * r * C * C + 2 * N * C); };
    double macs = n0 * ((2 * c.fusion_radius + 1) * 12 + 1) * c0 * 9;
    macs += block(c0, n0) * (c.depth_enc0 + c.depth_dec0) + block(c1, n1) * (c.depth_enc1 + c.depth_dec1);
    macs += block(c2, n2) * c.depth_mid;
    macs += n1 * 4 * c0 * c1 + n2 * 4 * c1 * c2;
    macs += n2 * c2 * 2 * c2 + n1 * 2 * c1 * c1;
    macs += n1 * c1 * 2 * c1 + n0 * 2 * c0 * c0;
    macs += n0 * c0 * 27 * 12;
    return 2 * macs / 1e9;
}

#define CK(x)                                                                   \
    do {                                                                        \
        int rc_ = (x);                                                          \
        if (rc_) {                                                              \
            std::fprintf(stderr, "%s failed (%d): %s\n", #x, rc_, ctx.err.c_str()); \
            return 1;                                                           \
        }                                                                       \
    } while (0)
#define CU(x)                                                                            \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static int bench_size(const cpu::UNetWeights &W, const std::string &wpath, int Wd, int H, int iters) {
    const ModelConfig &cfg = W.cfg;
    const int m = cfg.pad_multiple, hp = (H + m - 1) / m * m, wp = (Wd + m - 1) / m * m, h2 = hp / 2, w2 = wp / 2;
    const int nf = 2 * cfg.fusion_radius + 1, c0 = cfg.channels[0];
    size_t free0 = 0, total = 0;
    CU(cudaMemGetInfo(&free0, &total));
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0));
    double ms_med = 0, ms_min = 0;
    size_t peak = 0, wbytes = 0, wsbytes = 0;
    {
        cuda::Net net;
        CK(net.upload(ctx, W));
        CK(net.resize(ctx, h2, w2));
        wbytes = net.weight_bytes();
        wsbytes = net.workspace_bytes();
        // what the engine keeps: 7 input frames (window) + 3 feature maps, the staging planes
        std::vector<void *> bufs;
        auto get = [&](size_t b) { void *p = nullptr; if (cuda::dev_alloc(ctx, &p, b, "bench")) return (void *)nullptr; bufs.push_back(p); return p; };
        std::vector<cuda::bf16 *> fr, F;
        for (int k = 0; k < 2 * cfg.temporal_radius() + 1; ++k) fr.push_back((cuda::bf16 *)get((size_t)h2 * w2 * 12 * 2));
        for (int k = 0; k < 3; ++k) F.push_back((cuda::bf16 *)get((size_t)h2 * w2 * c0 * 2));
        float *planes = (float *)get((size_t)3 * H * Wd * 4), *delta = (float *)get((size_t)3 * H * Wd * 4);
        float *out = (float *)get((size_t)h2 * w2 * 12 * 4);
        for (void *p : bufs) if (!p) { std::fprintf(stderr, "%s\n", ctx.err.c_str()); return 1; }
        CU(cudaMemset(planes, 0, (size_t)3 * H * Wd * 4));
        for (auto *f : fr) CK(cuda::convert_in(ctx, planes, H, Wd, hp, wp, f));
        cudaEvent_t a, b;
        CU(cudaEventCreate(&a));
        CU(cudaEventCreate(&b));
        auto one = [&](int i) -> int {
            CK(cuda::convert_in(ctx, planes, H, Wd, hp, wp, fr[i % fr.size()]));
            CK(net.features(ctx, (const cuda::bf16 *const *)fr.data(), nf, 20.f, F[i % 3]));
            const cuda::bf16 *Fp[3] = {F[0], F[1], F[2]};
            CK(net.head(ctx, Fp, fr[3], out));
            CK(cuda::convert_out(ctx, out, fr[3], h2, w2, H, Wd, delta));
            return 0;
        };
        for (int i = 0; i < 3; ++i) if (one(i)) return 1;  // warm-up (cuBLASLt heuristics, caches)
        CU(cudaStreamSynchronize(ctx.stream));
        std::vector<float> ms;
        for (int i = 0; i < iters; ++i) {
            CU(cudaEventRecord(a, ctx.stream));
            if (one(i)) return 1;
            CU(cudaEventRecord(b, ctx.stream));
            CU(cudaEventSynchronize(b));
            float t = 0;
            CU(cudaEventElapsedTime(&t, a, b));
            ms.push_back(t);
        }
        size_t free1 = 0;
        CU(cudaMemGetInfo(&free1, &total));
        peak = free0 - free1;
        std::sort(ms.begin(), ms.end());
        ms_med = ms[ms.size() / 2];
        ms_min = ms[0];
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        for (void *p : bufs) cudaFree(p);
    }
    cuda::ctx_destroy(ctx);
    const double gf = gflop_per_frame(cfg, H, Wd);
    std::printf("cuda-engine %5dx%-5d kernels: %8.3f ms/frame (min %.3f)  %8.2f frames/s  %7.2f GFLOP/frame  %6.2f TFLOP/s"
                "  GPU mem %.0f MiB (weights %.1f MiB, workspace %.0f MiB)\n",
                Wd, H, ms_med, ms_min, 1000.0 / ms_med, gf, gf / ms_med, peak / 1048576.0, wbytes / 1048576.0,
                wsbytes / 1048576.0);
    std::fflush(stdout);

    // Through the API: push/pull with host copies, wall clock per frame in steady state.
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p{wpath.c_str(), DENOISE_BACKEND_CUDA, 0, 20.f, Wd, H, 0};
    if (denoise_open(e, &p)) {
        std::fprintf(stderr, "api: %s\n", denoise_last_error(e));
        denoise_free(&e);
        return 1;
    }
    std::vector<float> v((size_t)3 * H * Wd, 0.5f), d((size_t)3 * H * Wd);
    const float *pl[3] = {&v[0], &v[(size_t)H * Wd], &v[(size_t)2 * H * Wd]};
    float *dp[3] = {&d[0], &d[(size_t)H * Wd], &d[(size_t)2 * H * Wd]};
    const int warm = 8, n = std::max(8, iters / 2);
    std::chrono::steady_clock::time_point t0;
    int pulled = 0;
    for (int f = 0; f < warm + n + 3; ++f) {
        if (denoise_push(e, pl, Wd)) { std::fprintf(stderr, "api push: %s\n", denoise_last_error(e)); break; }
        int rc;
        while ((rc = denoise_pull(e, dp, Wd)) == 0)
            if (++pulled == warm) t0 = std::chrono::steady_clock::now();
        if (rc != DENOISE_EAGAIN) { std::fprintf(stderr, "api pull: %s\n", denoise_last_error(e)); break; }
    }
    const double api_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                          std::max(1, pulled - warm);
    std::printf("cuda-engine %5dx%-5d api:     %8.3f ms/frame  %8.2f frames/s (push+pull, host copies, %d frames)\n", Wd,
                H, api_ms, 1000.0 / api_ms, pulled - warm);
    denoise_free(&e);
    return 0;
}

int main(int argc, char **argv) {
    std::string wpath = "weights/denoise-v1.safetensors";
    int iters = 30;
    std::string sizes = "960x540,1920x1080,3840x2160";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--weights" && i + 1 < argc) wpath = argv[++i];
        else if (a == "--iters" && i + 1 < argc) iters = std::max(3, std::atoi(argv[++i]));
        else if (a == "--sizes" && i + 1 < argc) sizes = argv[++i];
        else {
            std::fprintf(stderr, "usage: denoise-cuda-bench [--weights FILE] [--iters N] [--sizes WxH,...]\n");
            return 2;
        }
    }
    std::string why;
    if (cuda_probe(0, &why)) {
        std::fprintf(stderr, "denoise-cuda-bench: no usable GPU: %s\n", why.c_str());
        return 77;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device 0: %s (cc %d.%d), weights %s, median of %d\n", prop.name, prop.major, prop.minor,
                wpath.c_str(), iters);
    StFile f;
    ModelConfig cfg;
    cpu::UNetWeights W;
    std::string err;
    if (!load_safetensors(wpath, &f, &err) || !parse_model_config(f.metadata["config"], &cfg, &err) ||
        !cpu::bind_weights(f, cfg, &W, &err)) {
        std::fprintf(stderr, "denoise-cuda-bench: %s\n", err.c_str());
        return 1;
    }
    int rc = 0;
    size_t pos = 0;
    while (pos < sizes.size()) {
        size_t q = sizes.find(',', pos);
        std::string s = sizes.substr(pos, q == std::string::npos ? std::string::npos : q - pos);
        pos = q == std::string::npos ? sizes.size() : q + 1;
        int w = 0, h = 0;
        if (std::sscanf(s.c_str(), "%dx%d", &w, &h) != 2 || w < 1 || h < 1) {
            std::fprintf(stderr, "bad size %s\n", s.c_str());
            return 2;
        }
        rc |= bench_size(W, wpath, w, h, iters);
    }
    return rc;
}
