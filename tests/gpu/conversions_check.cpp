// GPU checks, frame conversions: frame_in / frame_out against the CPU backend's FrameConvert for
// every format family (planar, semi-planar, packed, gray, float; 8..16 bit; 4:2:0, 4:2:2, 4:4:4,
// 4:1:0, 4:4:0; colour systems, levels, chroma locations; amounts) on random native frames with
// random bits outside the colour components, the change's padding region poisoned with NaN; tiles
// against the whole frame. --quick: the same.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "api_run.h"
#include "common/blue_noise.h"

using namespace gpu_check;

namespace {

// 2. frame conversions vs the CPU backend's FrameConvert

struct ConvCase {
    const char *fmt;
    int W, H;
    enum pl_color_levels levels;
    int xpos, ypos;
    Amount amount;
};

void conversion_check(cuda::Ctx &ctx, const ConvCase &cc) {
    const Fmt &F = fmt_named(cc.fmt);
    const DenoisePixelFormat &f = F.f;
    const int W = cc.W, H = cc.H, hp = (H + 63) / 64 * 64, wp = (W + 63) / 64 * 64, h2 = hp / 2, w2 = wp / 2;
    const int cw = comp_w(f, 1, W), ch = comp_h(f, 1, H);
    char name[160];
    std::snprintf(name, sizeof name, "%s %dx%d %s loc(%d,%d) amount %.2g/%.2g", cc.fmt, W, H,
                  cc.levels == PL_COLOR_LEVELS_FULL ? "full" : "limited", cc.xpos, cc.ypos, cc.amount.luma,
                  cc.amount.chroma);
    HostFrame fr = new_frame(F, W, H);
    fill_random(fr, f, W, H);
    const DenoiseColor col = color_of(F, cc.levels, cc.xpos, cc.ypos);
    const FrameColor fc = frame_color(f, col);
    const DenoiseImage img = fr.image(col);

    // CPU reference: R'G'B' of the frame, then the change added back
    cpu::FrameConvert conv(f, W, H, f.nb_components == 3 ? cw : W, f.nb_components == 3 ? ch : H);
    cpu::NativeSamples ns, outs;
    conv.read(img, &ns);
    std::vector<float> rgb((size_t)3 * W * H);
    float *rp[3] = {&rgb[0], &rgb[(size_t)W * H], &rgb[(size_t)2 * W * H]};
    conv.to_rgb(ns, fc, rp);

    // GPU input: the compact copy
    const cuda::FrameLayout L = cuda::frame_layout(f, W, H);
    std::vector<uint8_t> compact((size_t)L.bytes);
    cuda::copy_to_compact(L, img, compact.data());
    Dev dnat((size_t)L.bytes), dout((size_t)L.bytes), dx((size_t)h2 * w2 * 12 * 2);
    up(dnat, compact.data(), compact.size());
    const cuda::DevFrame src = cuda::compact_frame(L, dnat.u());

    // frame_in, whole padded frame, and one domain at (64, 128) of 128 x 192 px when it fits
    {
        cuda::poison(ctx, dx.p, dx.bytes);
        int rc = cuda::frame_in(ctx, src, f, fc, W, H, 0, 0, hp, wp, dx.h());
        if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
        std::vector<float> got = down_bf(dx, (size_t)h2 * w2 * 12), ref(got.size());
        for (int y = 0; y < h2; ++y)
            for (int x = 0; x < w2; ++x)
                for (int c = 0; c < 3; ++c)
                    for (int dy = 0; dy < 2; ++dy)
                        for (int dxx = 0; dxx < 2; ++dxx)
                            ref[((size_t)y * w2 + x) * 12 + c * 4 + dy * 2 + dxx] = bf16_host::to_float(bf16_host::from_float(
                                2.f * rp[c][(size_t)reflect(2 * y + dy, H) * W + reflect(2 * x + dxx, W)] - 1.f));
        size_t diff = 0, nonfinite = 0;
        double mx = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            nonfinite += !std::isfinite(got[i]);
            if (got[i] != ref[i]) {
                ++diff;
                mx = std::max(mx, (double)std::fabs(got[i] - ref[i]));
            }
        }
        // at most a few values one bf16 step apart (a float rounding at a bf16 tie)
        const bool ok = !rc && nonfinite == 0 && diff <= got.size() / 10000 && mx <= 1.0 / 64;
        result(ok, "frame_in  %-52s %zu values, %zu differ (max %.2e), %zu unwritten%s%s", name, got.size(), diff, mx,
               nonfinite, rc ? ": " : "", rc ? ctx.err.c_str() : "");
        if (hp >= 192 && wp >= 256) {
            const int oy = 64, ox = 128, hd = 128, wd = 128;
            Dev dt((size_t)hd / 2 * wd / 2 * 12 * 2);
            cuda::poison(ctx, dt.p, dt.bytes);
            rc = cuda::frame_in(ctx, src, f, fc, W, H, oy, ox, hd, wd, dt.h());
            if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
            std::vector<float> t = down_bf(dt, (size_t)hd / 2 * wd / 2 * 12);
            size_t bad = 0;
            for (int y = 0; y < hd / 2; ++y)
                for (int x = 0; x < wd / 2; ++x)
                    for (int k = 0; k < 12; ++k) {
                        const float a = t[((size_t)y * (wd / 2) + x) * 12 + k];
                        const float b = got[((size_t)(y + oy / 2) * w2 + x + ox / 2) * 12 + k];
                        bad += !(a == b || (std::isnan(a) && std::isnan(b)));
                    }
            result(!rc && bad == 0, "frame_in  %-52s domain 128x128 at (128,64) == whole frame's (%zu differ)", name, bad);
        }
    }

    // frame_out: a random change (a third of it exactly 0), the padding of the change poisoned
    std::uniform_real_distribution<float> u(0.f, 1.f), small(-0.03f, 0.03f), big(-0.5f, 0.5f);
    std::vector<float> d((size_t)3 * W * H);
    for (float &v : d) {
        const float r = u(rng);
        v = r < 0.33f ? 0.f : r < 0.9f ? small(rng) : big(rng);
    }
    std::vector<float> change((size_t)h2 * w2 * 12, NAN);
    for (int c = 0; c < 3; ++c)
        for (int Y = 0; Y < H; ++Y)
            for (int X = 0; X < W; ++X)
                change[((size_t)(Y / 2) * w2 + X / 2) * 12 + c * 4 + (Y & 1) * 2 + (X & 1)] = d[((size_t)c * H + Y) * W + X];
    std::vector<float> noise((size_t)kBlueNoiseSize * kBlueNoiseSize);
    for (float &v : noise) v = std::min(0.99999994f, u(rng));
    Dev dch(change.size() * 4), dnoise(noise.size() * 4);
    up_f(dch, change);
    up_f(dnoise, noise);

    std::vector<float> dcopy = d;
    float *dp[3] = {&dcopy[0], &dcopy[(size_t)W * H], &dcopy[(size_t)2 * W * H]};
    conv.add_change(ns, fc, dp, cc.amount, noise.data(), &outs);
    HostFrame cpu_fr = fr, gpu_fr = fr, tile_fr = fr;
    conv.write(outs, cpu_fr.image(col));

    auto run_out = [&](HostFrame &dst_fr, bool tiled) -> int {
        up(dout, compact.data(), compact.size());  // non-colour bits as the input's
        const cuda::DevFrame dst = cuda::compact_frame(L, dout.u());
        int rc = 0;
        if (!tiled) {
            rc = cuda::frame_out(ctx, dch.f(), 0, 0, hp, wp, src, dst, f, fc, W, H, 0, H, 0, W, cc.amount, dnoise.f());
        } else {  // 64 px tiles, domains with a 64 px halo, the change cut out of the whole one
            for (int ty = 0; ty < H && !rc; ty += 64)
                for (int tx = 0; tx < W && !rc; tx += 64) {
                    const int oy = std::max(0, ty - 64), ox = std::max(0, tx - 64);
                    const int hd = std::min(hp, ty + 128) - oy, wd = std::min(wp, tx + 128) - ox;
                    std::vector<float> part((size_t)hd / 2 * wd / 2 * 12);
                    for (int y = 0; y < hd / 2; ++y)
                        std::memcpy(&part[(size_t)y * (wd / 2) * 12], &change[((size_t)(y + oy / 2) * w2 + ox / 2) * 12],
                                    (size_t)wd / 2 * 12 * 4);
                    Dev dp2(part.size() * 4);
                    up_f(dp2, part);
                    rc = cuda::frame_out(ctx, dp2.f(), oy, ox, hd, wd, src, dst, f, fc, W, H, ty, ty + 64, tx, tx + 64,
                                         cc.amount, dnoise.f());
                    if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
                }
        }
        if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
        std::vector<uint8_t> back((size_t)L.bytes);
        cudaDeviceSynchronize();
        cudaMemcpy(back.data(), dout.p, back.size(), cudaMemcpyDeviceToHost);
        cuda::copy_from_compact(L, back.data(), dst_fr.image(col));
        return rc;
    };
    int rc = run_out(gpu_fr, false);
    // compare every colour sample, and every byte of every plane (non-colour bits kept)
    size_t n = 0, differ = 0;
    double mx = 0;
    for (int c = 0; c < f.nb_components; ++c)
        for (int y = 0; y < comp_h(f, c, H); ++y)
            for (int x = 0; x < comp_w(f, c, W); ++x) {
                ++n;
                const double a = get_value(gpu_fr, f, c, x, y), b = get_value(cpu_fr, f, c, x, y);
                const bool same = f.is_float ? !std::memcmp(sample_at(gpu_fr, f, c, x, y), sample_at(cpu_fr, f, c, x, y), 4)
                                             : a == b;
                if (!same) {
                    ++differ;
                    const double e = f.is_float ? std::fabs(a - b) : std::fabs((double)get_code(gpu_fr, f, c, x, y) -
                                                                               (double)get_code(cpu_fr, f, c, x, y));
                    mx = std::max(mx, std::isnan(e) ? INFINITY : e);
                }
            }
    size_t other = 0;
    for (int i = 0; i < F.nb_planes; ++i)
        for (size_t k = 0; k < cpu_fr.plane[i].size(); ++k) other += cpu_fr.plane[i][k] != gpu_fr.plane[i][k];
    // integers: at most 1 code value on at most 0.1% of the samples; floats: 1e-6 relative
    const bool ok = !rc && (f.is_float ? mx <= 1e-5 : mx <= 1.0) && differ <= n / 1000;
    result(ok, "frame_out %-52s %zu samples, %zu differ (max %.3g %s), bytes differing %zu%s%s", name, n, differ, mx,
           f.is_float ? "abs" : "code values", other, rc ? ": " : "", rc ? ctx.err.c_str() : "");
    if (W >= 128 && H >= 128) {
        rc = run_out(tile_fr, true);
        size_t bad = 0;
        for (int i = 0; i < F.nb_planes; ++i)
            for (size_t k = 0; k < tile_fr.plane[i].size(); ++k) bad += tile_fr.plane[i][k] != gpu_fr.plane[i][k];
        result(!rc && bad == 0, "frame_out %-52s 64 px tiles + halo == whole frame (%zu bytes differ)%s%s", name, bad,
               rc ? ": " : "", rc ? ctx.err.c_str() : "");
    }
}

void conversion_checks(cuda::Ctx &ctx) {
    const Amount one{1.f, 1.f}, part{0.6f, 0.25f};
    const std::vector<ConvCase> cases = {
        {"yuv420p", 198, 130, PL_COLOR_LEVELS_LIMITED, 0, 128, one},
        {"yuv420p", 131, 67, PL_COLOR_LEVELS_FULL, 128, 128, part},
        {"yuva420p", 150, 150, PL_COLOR_LEVELS_LIMITED, 0, 0, one},
        {"yuv422p10le", 160, 144, PL_COLOR_LEVELS_LIMITED, 0, 128, part},
        {"yuv444p", 130, 129, PL_COLOR_LEVELS_FULL, 0, 128, one},
        {"yuv444p16le", 96, 70, PL_COLOR_LEVELS_LIMITED, 0, 128, part},
        {"yuv410p", 145, 133, PL_COLOR_LEVELS_LIMITED, 128, 128, one},
        {"yuv440p10le", 128, 131, PL_COLOR_LEVELS_FULL, 0, 256, one},
        {"nv12", 200, 134, PL_COLOR_LEVELS_LIMITED, 0, 128, one},
        {"nv12", 65, 33, PL_COLOR_LEVELS_LIMITED, 0, 256, part},
        {"nv21", 130, 130, PL_COLOR_LEVELS_FULL, 128, 128, one},
        {"p010le", 198, 132, PL_COLOR_LEVELS_LIMITED, 0, 128, one},
        {"p010le", 77, 41, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"p016le", 140, 130, PL_COLOR_LEVELS_LIMITED, 0, 128, one},
        {"p210le", 130, 128, PL_COLOR_LEVELS_LIMITED, 0, 128, part},
        {"yuyv422", 131, 130, PL_COLOR_LEVELS_LIMITED, 0, 128, one},
        {"uyvy422", 96, 80, PL_COLOR_LEVELS_FULL, 128, 128, part},
        {"gray", 130, 129, PL_COLOR_LEVELS_LIMITED, 0, 0, one},
        {"gray10le", 70, 40, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"ya16le", 130, 128, PL_COLOR_LEVELS_LIMITED, 0, 0, one},
        {"grayf32le", 100, 70, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"rgb24", 129, 130, PL_COLOR_LEVELS_FULL, 0, 0, one},
        {"bgra", 130, 131, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"0rgb", 64, 64, PL_COLOR_LEVELS_FULL, 0, 0, one},
        {"rgb48le", 130, 128, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"rgba64le", 90, 60, PL_COLOR_LEVELS_FULL, 0, 0, one},
        {"gbrp", 132, 130, PL_COLOR_LEVELS_FULL, 0, 0, one},
        {"gbrp10le", 128, 128, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"gbrpf32le", 140, 130, PL_COLOR_LEVELS_FULL, 0, 0, one},
        {"gbrapf32le", 100, 66, PL_COLOR_LEVELS_FULL, 0, 0, part},
        {"yuv420p", 130, 130, PL_COLOR_LEVELS_LIMITED, 0, 128, Amount{0.f, 0.f}},
    };
    for (const ConvCase &c : cases) conversion_check(ctx, c);
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        (void)o;
        timed("frame conversions", [&] { conversion_checks(ctx); });
    });
}
