// denoise-cuda-bench: model v2's alignment ops alone (bench_align).
#include "cuda_bench.h"

namespace cuda_bench {

// Model v2's alignment ops alone on a W x H frame (padded to 64), R and tile of the model when it
// aligns, else the trained v2 setting (24, 64): luma_pyramid, block_match of a pair (moving
// smooth content), shift_tiles_s2d of a frame, shift_tiles of a c0-channel map (halved shifts);
// median of iters, and their sum per output frame as the whole-frame plan runs them (2r + 1
// pyramids, 2r block matchings and frame warps, 2 feature warps; the 2r + 1 luma conversions,
// frame_in with a luma plane only, are not in it).
int bench_align(const Model &M, int W, int H, int iters) {
    const int R = M.cfg.align ? M.cfg.align : 24, T = M.cfg.align ? M.cfg.align_tile : 64;
    const int m = std::max(M.cfg.pad_multiple, T), hp = (H + m - 1) / m * m, wp = (W + m - 1) / m * m;
    const int h2 = hp / 2, w2 = wp / 2, C = M.cfg.channels[0], taps = 2 * M.cfg.fusion_radius;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const size_t np = cuda::luma_pyramid_floats(hp, wp), maps = (size_t)(hp / T) * (wp / T) * 2;
    float *pyr[2] = {nullptr, nullptr};
    cuda::bf16 *x = nullptr, *xm = nullptr, *F = nullptr, *Fm = nullptr;
    int32_t *sh = nullptr;
    for (auto &p : pyr) CK(cuda::dev_alloc(ctx, (void **)&p, np * 4, "luma pyramid"));
    CK(cuda::dev_alloc(ctx, (void **)&x, (size_t)h2 * w2 * 12 * 2, "frame"));
    CK(cuda::dev_alloc(ctx, (void **)&xm, (size_t)h2 * w2 * 12 * 2, "moved frame"));
    CK(cuda::dev_alloc(ctx, (void **)&F, (size_t)h2 * w2 * C * 2, "feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&Fm, (size_t)h2 * w2 * C * 2, "moved feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&sh, maps * 4, "shift map"));
    {  // smooth content (a sum of sinusoids), the other frame moved by (5, -7) px
        std::vector<float> L[2];
        for (int f = 0; f < 2; ++f) {
            L[f].resize(np);
            for (int y = 0; y < hp; ++y)
                for (int xx = 0; xx < wp; ++xx) {
                    const double Y = y + 5 * f, X = xx - 7 * f;
                    L[f][(size_t)y * wp + xx] = (float)(0.4 * std::sin(0.071 * X + 0.4 * std::sin(0.05 * Y)) +
                                                        0.3 * std::cos(0.093 * Y - 0.02 * X) + 0.1 * std::sin(0.31 * X * 0.7 + 0.27 * Y));
                }
            CU(cudaMemcpyAsync(pyr[f], L[f].data(), np * 4, cudaMemcpyHostToDevice, ctx.stream));
            CK(cuda::luma_pyramid(ctx, pyr[f], hp, wp));
        }
        CK(cuda::block_match(ctx, pyr[0], pyr[1], hp, wp, R, T, sh));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    struct Op {
        const char *name;
        std::function<int()> run;
        double per_frame;
    };
    const Op ops[] = {
        {"luma_pyramid", [&] { return cuda::luma_pyramid(ctx, pyr[0], hp, wp); }, (double)taps + 1},
        {"block_match", [&] { return cuda::block_match(ctx, pyr[0], pyr[1], hp, wp, R, T, sh); }, (double)taps},
        {"shift_tiles_s2d", [&] { return cuda::shift_tiles_s2d(ctx, x, h2, w2, sh, wp / T, T, xm); }, (double)taps},
        {"shift_tiles (C, halved)", [&] { return cuda::shift_tiles(ctx, F, h2, w2, C, sh, wp / T, T / 2, true, Fm); }, 2},
    };
    double total = 0;
    for (const Op &o : ops) {
        for (int i = 0; i < 3; ++i) CK(o.run());
        std::vector<float> ms;
        if (time_each(ctx, a, b, iters, [&](int) { return o.run(); }, &ms)) return 1;
        const double med = ms[ms.size() / 2];
        total += med * o.per_frame;
        std::printf("cuda-bench %5dx%-5d align %-24s R %d tile %d (C %d): %8.4f ms (min %.4f), x %.0f per output frame\n",
                    W, H, o.name, R, T, C, med, ms[0], o.per_frame);
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " align " + o.name, med, 1000.0 / med,
                          ctx.peak / 1073741824.0});
    }
    // the sum per output frame only for a model that aligns (tools/bench.sh adds it to kernel-only)
    if (M.cfg.align)
        std::printf("cuda-bench %5dx%-5d align per output frame: %.3f ms\n", W, H, total);
    else
        std::printf("cuda-bench %5dx%-5d align (not this model's work: it does not align): %.3f ms per frame\n", W, H,
                    total);
    std::fflush(stdout);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cuda::ctx_destroy(ctx);
    return 0;
}

}  // namespace cuda_bench
