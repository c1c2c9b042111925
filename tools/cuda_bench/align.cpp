// denoise-cuda-bench: model v2's alignment ops alone (bench_align).
#include "cuda_bench.h"
#include "cuda/tile_shift.h"

#include <map>

namespace cuda_bench {

// Model v2's alignment ops alone on a W x H frame (padded to 64), R and tile of the model when it
// aligns, else the trained v2 setting (24, 64): luma_pyramid, block_match of one pair and of a
// window's 2r pairs in one launch (moving smooth content, frame k of the window moved by
// (3, -5) (k - r) px: odd and even shifts), and the consumers that read through the shift maps
// (the engine writes no moved copy): the fusion conv of the 2r + 1 frames (c0 outputs, zero
// weights: the timing does not depend on them) as they are and through the window's maps, the
// tensor-core head (when the device runs it for c0) on three maps as they are and with F_{t-1},
// F_{t+1} through maps; shift_tiles_s2d of a frame and shift_tiles of a c0-channel map (halved
// shifts), the moved copies the engine made before (now only for the two-pass head's maps; for
// comparison, not in the sum). Median of iters each; the sum per output frame as the whole-frame
// plan with 2r + 1 luma pyramids runs it: 1 pyramid (the window's new frame), one 2r-pair
// block_match, and what reading through the maps adds to the fusion conv and to the head (the
// differences of the medians); the one-pair line is for comparison, and the window's one luma
// conversion (frame_in with a luma plane only) is not in it either.
int bench_align(const Model &M, int W, int H, int iters) {
    const int R = M.cfg.align ? M.cfg.align : 24, T = M.cfg.align ? M.cfg.align_tile : 64;
    const int m = std::max(M.cfg.pad_multiple, T), hp = (H + m - 1) / m * m, wp = (W + m - 1) / m * m;
    const int h2 = hp / 2, w2 = wp / 2, C = M.cfg.channels[0], rr = M.cfg.fusion_radius, taps = 2 * rr;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const size_t np = cuda::luma_pyramid_floats(hp, wp), maps = (size_t)(hp / T) * (wp / T) * 2;
    std::vector<float *> pyr(taps + 1, nullptr);
    std::vector<int32_t *> sh(std::max(taps, 1), nullptr);
    const size_t tok = (size_t)h2 * w2;
    const int nf = taps + 1, cin = 12 * nf + 1;
    std::vector<cuda::bf16 *> xs(nf, nullptr), Fs(3, nullptr);
    cuda::bf16 *xm = nullptr, *Fm = nullptr, *wk = nullptr, *hwk = nullptr;
    float *bias = nullptr, *x0 = nullptr, *hout = nullptr;
    for (auto &p : pyr) CK(cuda::dev_alloc(ctx, (void **)&p, np * 4, "luma pyramid"));
    for (auto &s : sh) CK(cuda::dev_alloc(ctx, (void **)&s, maps * 4, "shift map"));
    for (auto &f : xs) CK(cuda::dev_alloc(ctx, (void **)&f, tok * 12 * 2, "frame"));
    for (auto &f : Fs) CK(cuda::dev_alloc(ctx, (void **)&f, tok * C * 2, "feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&xm, tok * 12 * 2, "moved frame"));
    CK(cuda::dev_alloc(ctx, (void **)&Fm, tok * C * 2, "moved feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&wk, (size_t)9 * cin * C * 2, "fusion weights"));
    CK(cuda::dev_alloc(ctx, (void **)&hwk, (size_t)9 * 16 * 3 * C * 2, "head weights"));
    CK(cuda::dev_alloc(ctx, (void **)&bias, (size_t)std::max(C, 16) * 4, "bias"));
    CK(cuda::dev_alloc(ctx, (void **)&x0, tok * C * 4, "fusion conv output"));
    CK(cuda::dev_alloc(ctx, (void **)&hout, tok * 12 * 4, "head output"));
    for (cuda::bf16 *f : xs) CU(cudaMemsetAsync(f, 0x3c, tok * 12 * 2, ctx.stream));  // bf16 0x3c3c: ~0.0115
    for (cuda::bf16 *f : Fs) CU(cudaMemsetAsync(f, 0x3c, tok * C * 2, ctx.stream));
    CU(cudaMemsetAsync(wk, 0, (size_t)9 * cin * C * 2, ctx.stream));
    CU(cudaMemsetAsync(hwk, 0, (size_t)9 * 16 * 3 * C * 2, ctx.stream));
    CU(cudaMemsetAsync(bias, 0, (size_t)std::max(C, 16) * 4, ctx.stream));
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
    // the window's maps as the engine passes them: frame k (not the centre) through pair j's map
    std::vector<cuda::TileShift> wsh(nf);
    for (int k = 0, j = 0; k < nf; ++k)
        if (k != rr) wsh[k] = cuda::TileShift{sh[j++], wp / T, T / 2};
    const cuda::TileShift fsh[3] = {cuda::TileShift{sh[0], wp / T, T / 2}, cuda::TileShift{},
                                    cuda::TileShift{sh[taps > 1 ? 1 : 0], wp / T, T / 2}};
    const cuda::bf16 *Fp[3] = {Fs[0], Fs[1], Fs[2]};
    const bool head_tc = cuda::head_conv3d_tc_supported(ctx.device, C, nullptr) == 0;
    auto conv = [&](bool through) {
        return cuda::fusion_conv3x3(ctx, xs.data(), nf, 20.f / 255.f, h2, w2, wk, bias, C, x0,
                                    through ? wsh.data() : nullptr);
    };
    auto head = [&](bool through) {
        return cuda::head_conv3d_tc(ctx, Fp, h2, w2, C, hwk, bias, 12, xs[rr], hout, true, through ? fsh : nullptr);
    };
    std::vector<Op> ops = {
        {"luma_pyramid", [&] { return cuda::luma_pyramid(ctx, pyr[0], hp, wp); }, 1},
        {"block_match (1 pair)", [&] { return cuda::block_match(ctx, pyr[0], others.data(), sh.data(), 1, hp, wp, R, T); }, 0},
        {window.c_str(), [&] { return cuda::block_match(ctx, pyr[0], others.data(), sh.data(), taps, hp, wp, R, T); }, 1},
        {"fusion conv (as they are)", [&] { return conv(false); }, 0},
        {"fusion conv (through maps)", [&] { return conv(true); }, 0},
    };
    if (head_tc) {
        ops.push_back({"head tc (as they are)", [&] { return head(false); }, 0});
        ops.push_back({"head tc (through maps)", [&] { return head(true); }, 0});
    }
    ops.push_back({"shift_tiles_s2d (copy)", [&] { return cuda::shift_tiles_s2d(ctx, xs[0], h2, w2, sh[0], wp / T, T, xm); }, 0});
    ops.push_back({"shift_tiles (C, halved)", [&] { return cuda::shift_tiles(ctx, Fs[0], h2, w2, C, sh[0], wp / T, T / 2, true, Fm); }, 0});
    double total = 0;
    std::map<std::string, double> med_of;
    for (const Op &o : ops) {
        for (int i = 0; i < 3; ++i) CK(o.run());
        std::vector<float> ms;
        if (time_each(ctx, a, b, iters, [&](int) { return o.run(); }, &ms)) return 1;
        const double med = ms[ms.size() / 2];
        total += med * o.per_frame;
        med_of[o.name] = med;
        std::printf("cuda-bench %5dx%-5d align %-24s R %d tile %d (C %d): %8.4f ms (min %.4f), x %.0f per output frame\n",
                    W, H, o.name, R, T, C, med, ms[0], o.per_frame);
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " align " + o.name, med, 1000.0 / med,
                          ctx.peak / 1073741824.0});
    }
    // what reading through the maps adds to the consumers (may come out slightly negative: noise)
    const double conv_extra = med_of["fusion conv (through maps)"] - med_of["fusion conv (as they are)"];
    const double head_extra = head_tc ? med_of["head tc (through maps)"] - med_of["head tc (as they are)"] : 0.0;
    total += conv_extra + head_extra;
    std::printf("cuda-bench %5dx%-5d align reading through the maps adds: fusion conv %+.4f ms, head %+.4f ms%s\n", W, H,
                conv_extra, head_extra, head_tc ? "" : " (the tensor-core head does not run here for this c0)");
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
