// GPU checks, tiles and memory: tiles vs whole frames (PSNR >= 50 dB, max difference at the seams),
// a crop written as PNG (--out DIR); memory caps (one that forces tiles, one too small for
// anything, a device nearly full so that cudaMalloc fails and the backend falls back); invalid
// arguments and a stream of another context (EINVAL / EDEVICE with a message); two engines at
// once. --quick: one tile check, p010le in 64 px tiles on 4 small random frames.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "api_run.h"
#include <thread>

using namespace gpu_check;

namespace {

// rw: whole_yuv420p(weights, c).
void memory_checks(const std::string &weights, const Clip &c, ApiRun rw) {
    const Fmt &F = fmt_named("yuv420p");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    std::vector<HostFrame> in = clip_frames(F, col, c, true);
    if (rw.rc) {
        result(false, "memory caps: the uncapped run failed: %s", rw.err.c_str());
        return;
    }
    std::vector<float> a = rgb_all(F, rw.out, col, c.W, c.H);
    {  // a cap of 60% of the whole-frame run's peak forces tiles
        ApiOpts oc;
        oc.gpu_memory = rw.peak * 6 / 10;
        ApiRun r = run_api(weights, F, col, in, c.W, c.H, oc);
        const double p = r.rc ? 0 : psnr(rgb_all(F, r.out, col, c.W, c.H), a);
        result(!r.rc && r.peak <= oc.gpu_memory && p >= 50.0,
               "memory cap %.0f MiB (60%% of the whole-frame peak %.0f MiB) %s: peak %.0f MiB (<= cap), PSNR vs whole "
               "%.2f dB (>= 50)%s%s",
               oc.gpu_memory / 1048576.0, rw.peak / 1048576.0, c.name.c_str(), r.peak / 1048576.0, p, r.rc ? ": " : "",
               r.err.c_str());
    }
    {  // a cap too small for anything: a clean ENOMEM at open, with a message
        ApiOpts oc;
        oc.gpu_memory = (int64_t)1 << 20;
        ApiRun r = run_api(weights, F, col, in, c.W, c.H, oc);
        result(r.rc == DENOISE_ENOMEM && r.err.find("cap") != std::string::npos,
               "memory cap 1 MiB: rc %d (ENOMEM %d) \"%s\"", r.rc, DENOISE_ENOMEM, r.err.c_str());
    }
    {  // the device nearly full: cudaMalloc fails under a generous cap, the backend falls back
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        const size_t keep = (size_t)(rw.peak * 6 / 10);
        void *hog = nullptr;
        const size_t want = fr > keep + ((size_t)256 << 20) ? fr - keep - ((size_t)64 << 20) : 0;
        if (!want || cudaMalloc(&hog, want) != cudaSuccess) {
            cudaGetLastError();
            result(false, "device nearly full: could not take %.0f MiB of %.0f MiB free for the test", want / 1048576.0,
                   fr / 1048576.0);
        } else {
            ApiOpts oc;
            oc.gpu_memory = (int64_t)64 << 30;
            ApiRun r = run_api(weights, F, col, in, c.W, c.H, oc);
            cudaFree(hog);
            const double p = r.rc ? 0 : psnr(rgb_all(F, r.out, col, c.W, c.H), a);
            result(!r.rc && p >= 50.0,
                   "device nearly full (%.0f MiB left free, cap 64 GiB): cudaMalloc fails, tiles take over: peak %.0f "
                   "MiB, PSNR vs whole %.2f dB (>= 50)%s%s",
                   (fr - want) / 1048576.0, r.peak / 1048576.0, p, r.rc ? ": " : "", r.err.c_str());
        }
    }
}

void error_checks(const std::string &weights) {
    const Fmt &F = fmt_named("nv12");
    const int W = 64, H = 64;
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = weights.c_str();
    p.backend = DENOISE_BACKEND_CUDA;
    p.width = W;
    p.height = H;
    p.format = F.f;
    HostFrame fr = new_frame(F, W, H);
    {  // invalid arguments: a NULL plane, a row shorter than the frame
        DenoiseEngine *e = denoise_alloc();
        int rc = denoise_open(e, &p);
        DenoiseImage im = fr.image(col);
        im.data[1] = nullptr;
        int r1 = rc ? rc : denoise_push(e, &im);
        std::string m1 = denoise_last_error(e);
        im = fr.image(col);
        im.linesize[0] = W - 1;
        int r2 = rc ? rc : denoise_push(e, &im);
        std::string m2 = denoise_last_error(e);
        result(r1 == DENOISE_EINVAL && r2 == DENOISE_EINVAL && !m1.empty() && !m2.empty(),
               "invalid arguments -> EINVAL: NULL plane (%d \"%s\"), short linesize (%d \"%s\")", r1, m1.c_str(), r2,
               m2.c_str());
        denoise_free(&e);
    }
    OwnContext a;
    if (!a.ok) {
        result(false, "invalid stream: no CUDA driver context (cuCtxCreate through libcuda.so.1)");
        return;
    }
    {  // a stream of another context: the runtime's error comes back as EDEVICE with its name
        cudaStream_t other = nullptr;
        void *b = nullptr;
        int dev = 0;
        driver().device_get(&dev, 0);
        bool made = driver().ctx_create(&b, 0, dev) == 0;  // b current
        if (made) {
            cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
            void *q = nullptr;
            driver().ctx_pop(&q);  // a current again
        }
        DenoiseEngine *e = denoise_alloc();
        DenoiseParams pd = p;
        pd.memory = DENOISE_MEMORY_CUDA;
        pd.cuda_stream = other;
        int rc = denoise_open(e, &pd);
        std::vector<void *> planes(4, nullptr);
        for (int i = 0; i < F.nb_planes; ++i) cudaMalloc(&planes[i], fr.plane[i].size());
        DenoiseImage im = fr.image(col);
        for (int i = 0; i < 4; ++i) im.data[i] = (uint8_t *)planes[i];
        int r = rc ? rc : denoise_push(e, &im);
        const std::string m = denoise_last_error(e);
        result(made && r == DENOISE_EDEVICE && m.find("cuda") != std::string::npos,
               "stream of another context -> EDEVICE: rc %d \"%s\"", r, m.c_str());
        denoise_free(&e);
        for (void *q : planes) cudaFree(q);
        if (made) {
            driver().ctx_push(b);
            cudaStreamDestroy(other);
            void *q = nullptr;
            driver().ctx_pop(&q);
            driver().ctx_destroy(b);
        }
    }
}

// ref: whole_yuv420p(weights, c), one engine alone.
void two_engines_check(const std::string &weights, const Clip &c, ApiRun ref) {
    const Fmt &F = fmt_named("yuv420p");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    std::vector<HostFrame> in = clip_frames(F, col, c, true);
    ApiOpts o;
    ApiRun r[2];
    std::thread t0([&] { r[0] = run_api(weights, F, col, in, c.W, c.H, o); });
    std::thread t1([&] { r[1] = run_api(weights, F, col, in, c.W, c.H, o); });
    t0.join();
    t1.join();
    size_t n0 = 0, n1 = 0;
    const double m0 = r[0].rc || ref.rc ? INFINITY : max_sample_diff(F, r[0].out, ref.out, c.W, c.H, &n0);
    const double m1 = r[1].rc || ref.rc ? INFINITY : max_sample_diff(F, r[1].out, ref.out, c.W, c.H, &n1);
    result(m0 <= 1.0 && m1 <= 1.0, "two engines at once (two threads, one GPU) %s: vs one engine max %.3g / %.3g code "
                                   "values (%zu / %zu samples differ)%s%s %s",
           c.name.c_str(), m0, m1, n0, n1, r[0].err.c_str(), r[1].err.c_str(), ref.err.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        (void)ctx;
        const std::string api_w = o.api_weights();
        const Clip small = small_clip(o);
        if (o.quick) {
            Clip q = small;
            timed("tiles p010le", [&] { tile_check(api_w, q, 64, "p010le"); });
            return;
        }
        // tiles on real content at a larger size (the first sample upsampled 4x), and the sample
        Clip big;
        if (!o.samples.empty() &&
            load_clip(o.samples[0].raw, o.samples[0].w, o.samples[0].h, 7, o.samples[0].name + "_x4", 20.f, 4, &big)) {
            ApiRun whole;
            timed("whole-frame run " + big.name, [&] { whole = whole_yuv420p(api_w, big); });
            timed("tiles " + big.name, [&] { tile_check(api_w, big, 384, "yuv420p", &whole); });
            timed("tiles " + small.name + " p010le", [&] { tile_check(api_w, small, 128, "p010le"); });
            timed("memory caps, device nearly full", [&] { memory_checks(api_w, big, whole); });
            timed("two engines", [&] { two_engines_check(api_w, big, whole); });
        } else {
            ApiRun whole;
            timed("whole-frame run " + small.name, [&] { whole = whole_yuv420p(api_w, small); });
            timed("tiles " + small.name, [&] { tile_check(api_w, small, 64, "yuv420p", &whole); });
            timed("memory caps, device nearly full", [&] { memory_checks(api_w, small, whole); });
            timed("two engines", [&] { two_engines_check(api_w, small, whole); });
        }
        timed("errors", [&] { error_checks(api_w); });
    });
}
