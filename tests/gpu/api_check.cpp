// GPU checks, the public API, backend CUDA vs backend CPU: golden sequences (and vs PyTorch) of
// model v1's widths (golden) and of the v3 study's wide64 widths 64/64/128 (golden_wide), also on
// the correct-first path (DENOISE_CUDA_FUSED=0); the format families with memory HOST and
// memory CUDA (a context of its own made current, as FFmpeg's hwcontext does), with amounts
// (blend, luma, chroma); an amount change between pushes applies from the next pushed frame on
// (pipelined outputs included); the trained weights on the sample clips (PSNR within 0.05 dB).
// --quick: one short run, nv12 with memory HOST and CUDA.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "api_run.h"

using namespace gpu_check;

namespace {

// One format through the API: CUDA (memory HOST, and memory CUDA in a context of the test's own
// where the format is one FFmpeg hands over as CUDA frames) vs CPU, on a clip; over_input: also
// the outputs written over their own input frames (one format per layout family runs it).
void api_format_check(const std::string &weights, const Clip &c, const char *fname, DenoiseAmount amount,
                      bool cuda_memory, bool over_input) {
    const Fmt &F = fmt_named(fname);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    std::vector<HostFrame> in = clip_frames(F, col, c, true);
    std::vector<float> clean;
    {
        std::vector<HostFrame> cl = clip_frames(F, col, c, false);
        clean = rgb_all(F, cl, col, c.W, c.H);
    }
    ApiOpts o;
    o.amount = amount;
    ApiOpts ocpu = o;
    ocpu.backend = DENOISE_BACKEND_CPU;
    ApiRun rcpu = run_api(weights, F, col, in, c.W, c.H, ocpu);
    ApiRun rhost = run_api(weights, F, col, in, c.W, c.H, o);
    char name[128];
    std::snprintf(name, sizeof name, "api %s %s %dx%d N=%d amount %.2g luma %.2g chroma %.2g", c.name.c_str(), fname,
                  c.W, c.H, c.N, amount.amount, amount.luma, amount.chroma);
    if (rcpu.rc || rhost.rc) {
        result(false, "%-58s cpu: %s | cuda: %s", name, rcpu.err.c_str(), rhost.err.c_str());
        return;
    }
    std::vector<float> noisy = rgb_all(F, in, col, c.W, c.H), ocpu_rgb = rgb_all(F, rcpu.out, col, c.W, c.H),
                       ohost = rgb_all(F, rhost.out, col, c.W, c.H);
    const double pn = psnr(noisy, clean), pc = psnr(ocpu_rgb, clean), pg = psnr(ohost, clean), pgc = psnr(ohost, ocpu_rgb);
    size_t nd = 0;
    const double md = max_sample_diff(F, rhost.out, rcpu.out, c.W, c.H, &nd);
    const size_t other = other_bits_changed(F, rhost.out, in, c.W, c.H);
    result(std::fabs(pg - pc) <= 0.05 && pgc >= 40.0 && other == 0,
           "%-58s HOST: PSNR noisy %.2f cpu %.3f cuda %.3f dB (|diff| %.4f <= 0.05), cuda vs cpu %.1f dB (>= 40), "
           "max %.3g, other bits changed %zu",
           name, pn, pc, pg, std::fabs(pg - pc), pgc, md, other);
    if (over_input) {  // the output written over the input frame itself
        ApiOpts oi = o;
        oi.pull_into_input = true;
        ApiRun ri = run_api(weights, F, col, in, c.W, c.H, oi);
        size_t n2 = 0;
        const double m2 = ri.rc ? INFINITY : max_sample_diff(F, ri.out, rhost.out, c.W, c.H, &n2);
        result(!ri.rc && m2 <= 1.0 && n2 <= (size_t)c.N * c.W * c.H / 1000,
               "%-58s HOST, output over the input frame == separate output (max %.3g, %zu differ)%s%s", name, m2, n2,
               ri.rc ? ": " : "", ri.err.c_str());
    }
    if (!cuda_memory) return;
    OwnContext own;
    if (!own.ok) {
        result(false, "%-58s CUDA memory: no CUDA driver context (cuCtxCreate through libcuda.so.1)", name);
        return;
    }
    ApiOpts od = o;
    od.memory = DENOISE_MEMORY_CUDA;
    ApiRun rdev = run_api(weights, F, col, in, c.W, c.H, od);
    if (rdev.rc) {
        result(false, "%-58s CUDA memory: %s", name, rdev.err.c_str());
        return;
    }
    size_t n3 = 0;
    const double m3 = max_sample_diff(F, rdev.out, rhost.out, c.W, c.H, &n3);
    const size_t other3 = other_bits_changed(F, rdev.out, in, c.W, c.H);
    // the CUDA backend keeps one output in flight with either memory: latency R + 1 (the CPU's R
    // + 1), and the first output comes out right after push latency + 1 (or at the flush)
    const int want_lat = rcpu.latency + 1, want_first = c.N > want_lat ? want_lat + 1 : -1;
    const bool lat_ok = rhost.latency == want_lat && rdev.latency == want_lat && rdev.first_out_push == want_first &&
                        rhost.first_out_push == want_first;
    result(m3 <= 1.0 && n3 <= (size_t)c.N * c.W * c.H / 1000 && other3 == 0 && lat_ok,
           "%-58s CUDA memory (own context, own stream) vs HOST: max %.3g, %zu samples differ, other bits changed %zu; "
           "latency HOST %d CUDA %d (== %d), first output after push %d / %d (== %d)",
           name, m3, n3, other3, rhost.latency, rdev.latency, want_lat, rhost.first_out_push, rdev.first_out_push,
           want_first);
}

// Amounts changed between pushes apply from the next pushed frame's output on, also on the
// pipelined CUDA backend (outputs queued ahead of the pulls): amount 0 set before frame k gives
// outputs k.. equal to their inputs bit-exact, while outputs 0..k-1 match the unchanged run.
// Memory HOST and memory CUDA.
void amount_change_check(const std::string &weights, const Clip &c, const char *fname) {
    const Fmt &F = fmt_named(fname);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    std::vector<HostFrame> in = clip_frames(F, col, c, true);
    const int k = c.N / 2;
    auto one = [&](DenoiseMemory mem) {
        char name[128];
        std::snprintf(name, sizeof name, "amount change %s %s %dx%d N=%d at frame %d, memory %s", c.name.c_str(), fname,
                      c.W, c.H, c.N, k, mem == DENOISE_MEMORY_HOST ? "HOST" : "CUDA");
        ApiOpts o, oc;
        o.memory = oc.memory = mem;
        oc.change_at = k;
        oc.later = DenoiseAmount{0.f, 1.f, 1.f};
        ApiRun full = run_api(weights, F, col, in, c.W, c.H, o), ch = run_api(weights, F, col, in, c.W, c.H, oc);
        if (full.rc || ch.rc) {
            result(false, "%-58s unchanged: %s | changed: %s", name, full.err.c_str(), ch.err.c_str());
            return;
        }
        std::vector<HostFrame> fa(full.out.begin(), full.out.begin() + k), ca(ch.out.begin(), ch.out.begin() + k),
            ia(in.begin(), in.begin() + k), cb(ch.out.begin() + k, ch.out.end()), ib(in.begin() + k, in.end());
        size_t n_before = 0, n_after = 0, n_moved = 0;
        const double before = max_sample_diff(F, ca, fa, c.W, c.H, &n_before);
        const double after = max_sample_diff(F, cb, ib, c.W, c.H, &n_after);
        max_sample_diff(F, ca, ia, c.W, c.H, &n_moved);
        result(before <= 1.0 && n_before <= (size_t)k * c.W * c.H / 1000 && after == 0 && n_moved > 0,
               "%-58s frames < %d vs unchanged run: max %.3g, %zu differ (<= 1, 0.1%%), moved %zu (> 0); frames >= %d "
               "vs input: max %.3g (== 0)",
               name, k, before, n_before, n_moved, k, after);
    };
    one(DENOISE_MEMORY_HOST);
    OwnContext own;  // memory CUDA: a context of the test's own, current
    if (!own.ok) {
        result(false, "amount change %s %s: memory CUDA: no CUDA driver context (cuCtxCreate through libcuda.so.1)",
               c.name.c_str(), fname);
        return;
    }
    one(DENOISE_MEMORY_CUDA);
}

// The trained weights on a clip: the CUDA engine on both Swin-block paths (fused, the default;
// correct-first with DENOISE_CUDA_FUSED=0, read when a backend starts) against one CPU run, each
// within 0.05 dB of its PSNR, and the two paths' outputs against each other (close, not identical:
// identical would mean the switch did nothing).
void sample_check(const std::string &weights, const Clip &c) {
    const Fmt &F = fmt_named("rgb48le");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_FULL, 0, 0);
    std::vector<HostFrame> in = clip_frames(F, col, c, true), cl = clip_frames(F, col, c, false);
    ApiOpts ocpu, og;
    ocpu.backend = DENOISE_BACKEND_CPU;
    ApiRun rc = run_api(weights, F, col, in, c.W, c.H, ocpu);
    if (rc.rc) {
        result(false, "sample %s: cpu: %s", c.name.c_str(), rc.err.c_str());
        return;
    }
    const std::vector<float> clean = rgb_all(F, cl, col, c.W, c.H), noisy = rgb_all(F, in, col, c.W, c.H),
                             oc = rgb_all(F, rc.out, col, c.W, c.H);
    const double pn = psnr(noisy, clean), pc = psnr(oc, clean);
    std::vector<float> out[2];
    for (int path = 0; path < 2; ++path) {
        const char *name = path ? "correct-first " : "";
        if (path) setenv("DENOISE_CUDA_FUSED", "0", 1);
        ApiRun rg = run_api(weights, F, col, in, c.W, c.H, og);
        if (path) unsetenv("DENOISE_CUDA_FUSED");
        if (rg.rc) {
            result(false, "sample %s%s: cuda: %s", name, c.name.c_str(), rg.err.c_str());
            continue;
        }
        out[path] = rgb_all(F, rg.out, col, c.W, c.H);
        const double pg = psnr(out[path], clean);
        result(std::fabs(pg - pc) <= 0.05,
               "sample %s%-26s %dx%d N=%d rgb48le PSNR noisy %.3f cpu %.3f cuda %.3f dB |diff| %.4f (<= 0.05)", name,
               c.name.c_str(), c.W, c.H, c.N, pn, pc, pg, std::fabs(pg - pc));
    }
    if (!out[0].empty() && out[0].size() == out[1].size()) {
        const double p = psnr(out[0], out[1]);
        result(p > 40.0 && std::isfinite(p),
               "sample %-26s fused vs correct-first outputs: %.1f dB (> 40, and not identical: the paths differ)",
               c.name.c_str(), p);
    }
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        const std::string api_w = o.api_weights();
        const Clip small = small_clip(o);
        if (o.quick) {
            timed("api nv12 (HOST and CUDA memory)",
                  [&] { api_format_check(api_w, small, "nv12", DenoiseAmount{DENOISE_AMOUNT_DEFAULTS}, true, true); });
            return;
        }
        (void)ctx;
        timed("api golden sequences", [&] { golden_api_checks(""); });
        timed("api golden sequences, channels 64/64/128 (golden_wide)", [&] { golden_api_checks("", "golden_wide"); });
        // part: the blend and both scales off 1 (luma 0.7, chroma 0.3 once the blend is folded in)
        const DenoiseAmount one{DENOISE_AMOUNT_DEFAULTS}, part{0.8f, 0.875f, 0.375f};
        // outputs over their own inputs: once per layout family (planar, semi-planar with shifted
        // 10-bit words, packed with alpha, float)
        auto over = [](const char *f) {
            return !std::strcmp(f, "yuv420p") || !std::strcmp(f, "p010le") || !std::strcmp(f, "bgra") ||
                   !std::strcmp(f, "gbrpf32le");
        };
        for (const char *f : {"yuv420p", "nv12", "p010le", "p016le", "yuv444p", "yuv444p16le"})
            timed(std::string("api ") + f + " (HOST and CUDA memory)",
                  [&] { api_format_check(api_w, small, f, one, true, over(f)); });
        for (const char *f : {"rgb24", "gbrp", "gbrpf32le", "yuv422p10le", "gray10le", "bgra"})
            timed(std::string("api ") + f + " (HOST memory)", [&] { api_format_check(api_w, small, f, one, false, over(f)); });
        timed("api amounts (nv12, gbrp)", [&] {
            api_format_check(api_w, small, "nv12", part, true, false);
            api_format_check(api_w, small, "gbrp", part, false, false);
        });
        timed("api amount changes (nv12, gbrp)", [&] {
            amount_change_check(api_w, small, "nv12");
            amount_change_check(api_w, small, "gbrp");
        });
        for (const auto &s : o.samples)
            timed("sample " + s.name, [&] {
                Clip c;
                if (load_clip(s.raw, s.w, s.h, s.n, s.name, 20.f, 1, &c)) sample_check(api_w, c);
                else result(false, "sample %s: cannot read %s", s.name.c_str(), s.raw.c_str());
            });
        // the golden sequences once more on the correct-first path (DENOISE_CUDA_FUSED=0 is read
        // when a backend starts; every other API check runs the default, fused path)
        timed("api golden sequences, correct-first", [&] {
            setenv("DENOISE_CUDA_FUSED", "0", 1);
            golden_api_checks("correct-first ");
            golden_api_checks("correct-first ", "golden_wide");
            unsetenv("DENOISE_CUDA_FUSED");
        });
    });
}
