// denoise-cuda-bench: model v2's alignment ops alone (bench_align).
#include "cuda_bench.h"

namespace cuda_bench {

// Model v2's alignment ops alone on a W x H frame (padded to 64), R and tile of the model when it
// aligns, else the trained v2 setting (24, 64): luma_pyramid, block_match of one pair and of a
// window's 2r pairs in one launch (moving smooth content, frame k of the window moved by
// (3, -5) (k - r) px), shift_tiles_s2d of a frame, shift_tiles of a c0-channel map (halved
// shifts); median of iters, and their sum per output frame as the whole-frame plan with 2r + 1
// luma pyramids runs them (1 pyramid: the window's new frame; one 2r-pair block_match; 2r frame
// warps, 2 feature warps; the one-pair line is for comparison, not in the sum; the window's one
// luma conversion, frame_in with a luma plane only, is not in it either).
int bench_align(const Model &M, int W, int H, int iters) {
    const int R = M.cfg.align ? M.cfg.align : 24, T = M.cfg.align ? M.cfg.align_tile : 64;
    const int m = std::max(M.cfg.pad_multiple, T), hp = (H + m - 1) / m * m, wp = (W + m - 1) / m * m;
    const int h2 = hp / 2, w2 = wp / 2, C = M.cfg.channels[0], rr = M.cfg.fusion_radius, taps = 2 * rr;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const size_t np = cuda::luma_pyramid_floats(hp, wp), maps = (size_t)(hp / T) * (wp / T) * 2;
    std::vector<float *> pyr(taps + 1, nullptr);
    std::vector<int32_t *> sh(std::max(taps, 1), nullptr);
    cuda::bf16 *x = nullptr, *xm = nullptr, *F = nullptr, *Fm = nullptr;
    for (auto &p : pyr) CK(cuda::dev_alloc(ctx, (void **)&p, np * 4, "luma pyramid"));
    for (auto &s : sh) CK(cuda::dev_alloc(ctx, (void **)&s, maps * 4, "shift map"));
    CK(cuda::dev_alloc(ctx, (void **)&x, (size_t)h2 * w2 * 12 * 2, "frame"));
    CK(cuda::dev_alloc(ctx, (void **)&xm, (size_t)h2 * w2 * 12 * 2, "moved frame"));
    CK(cuda::dev_alloc(ctx, (void **)&F, (size_t)h2 * w2 * C * 2, "feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&Fm, (size_t)h2 * w2 * C * 2, "moved feature map"));
    // the window's pyramids: pyr[0] the centre, pyr[1 + j] the j-th other tap
    std::vector<const float *> others(pyr.begin() + 1, pyr.end());
    {  // smooth content (a sum of sinusoids), frame k moved by (3, -5) (k - r) px
        std::vector<float> L(np);
        for (int f = 0; f <= taps; ++f) {
            const int k = f == 0 ? rr : f - 1 < rr ? f - 1 : f, d = k - rr;
            for (int y = 0; y < hp; ++y)
                for (int xx = 0; xx < wp; ++xx) {
                    const double Y = y + 3 * d, X = xx - 5 * d;
                    L[(size_t)y * wp + xx] = (float)(0.4 * std::sin(0.071 * X + 0.4 * std::sin(0.05 * Y)) +
                                                     0.3 * std::cos(0.093 * Y - 0.02 * X) + 0.1 * std::sin(0.31 * X * 0.7 + 0.27 * Y));
                }
            CU(cudaMemcpyAsync(pyr[f], L.data(), np * 4, cudaMemcpyHostToDevice, ctx.stream));
            CK(cuda::luma_pyramid(ctx, pyr[f], hp, wp));
            CU(cudaStreamSynchronize(ctx.stream));  // L is refilled for the next frame
        }
        CK(cuda::block_match(ctx, pyr[0], others.data(), sh.data(), taps, hp, wp, R, T));
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
    const std::string window = "block_match (" + std::to_string(taps) + " pairs)";
    const Op ops[] = {
        {"luma_pyramid", [&] { return cuda::luma_pyramid(ctx, pyr[0], hp, wp); }, 1},
        {"block_match (1 pair)", [&] { return cuda::block_match(ctx, pyr[0], others.data(), sh.data(), 1, hp, wp, R, T); }, 0},
        {window.c_str(), [&] { return cuda::block_match(ctx, pyr[0], others.data(), sh.data(), taps, hp, wp, R, T); }, 1},
        {"shift_tiles_s2d", [&] { return cuda::shift_tiles_s2d(ctx, x, h2, w2, sh[0], wp / T, T, xm); }, (double)taps},
        {"shift_tiles (C, halved)", [&] { return cuda::shift_tiles(ctx, F, h2, w2, C, sh[0], wp / T, T / 2, true, Fm); }, 2},
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
