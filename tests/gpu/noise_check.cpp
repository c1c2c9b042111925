// GPU checks, sigma=auto: the CUDA noise source (kernels/cuda/noise_estimate.cu) against the CPU
// source on the planes the CPU backend gives it, on fresh random noisy frames of every plan
// (converted R'G'B', native 4:2:0 / 4:2:2, gray, float), odd sizes: Immerkaer's sums, the scatter
// of all patches (counts equal, rel L2 < 1e-4) and of a weak-texture selection, host outputs
// poisoned with NaN; the whole estimator over 4 frames (sigma within 0.5 % + 0.01); the API's
// per-frame sigma, backend CUDA vs CPU (memory HOST and CUDA); the estimate read one push later
// (the CUDA default) against the read within the push (DENOISE_SIGMA_AUTO_DEFER=0): the same
// outputs, one frame more latency, and no wait on the estimator from the first output on that
// lets the compute stream run dry (NoiseReads), after a control that the count sees such a wait;
// time per 3840x2160 frame.
// --quick: two noise-source checks.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include <atomic>
#include <thread>

#include "api_run.h"
#include "cuda/noise_estimate.h"
#include "sigma_auto.h"

using namespace gpu_check;

namespace {

// 6. sigma=auto: the CUDA noise source against the CPU source

// Smooth content with a textured band (x < W/5), plus white noise of `sigma` 8-bit code values
// on every colour sample (Y'CbCr: on the native Y', Cb, Cr samples), fresh random each call.
void fill_noisy(HostFrame &fr, const DenoisePixelFormat &f, int W, int H, double sigma, int t) {
    std::normal_distribution<double> g(0.0, 1.0);
    for (int c = 0; c < f.nb_components; ++c) {
        const int w = comp_w(f, c, W), h = comp_h(f, c, H), sx = W / w, sy = H / h;
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const int X = x * sx, Y = y * sy;
                double v = 0.5 + 0.3 * std::sin(0.013 * X + 0.7 * c + 0.1 * t) * std::cos(0.011 * Y);
                if (X < W / 5) v += 0.15 * std::sin(0.9 * X + 0.5 * Y + c);
                set_value(fr, f, c, x, y, v + sigma / 255.0 * g(rng));
            }
    }
}

// The planes the CPU backend hands its CpuNoiseSource (backend_cpu.cpp noise_source).
struct CpuNoisePlanes {
    std::vector<float> buf;
    NoisePlane pl[3];
};
void cpu_noise_planes(const Fmt &F, HostFrame &fr, const DenoiseColor &col, int W, int H, const NoisePlan &plan,
                      CpuNoisePlanes *out) {
    const DenoisePixelFormat &f = F.f;
    const bool three = f.nb_components == 3;
    cpu::FrameConvert conv(f, W, H, three ? comp_w(f, 1, W) : W, three ? comp_h(f, 1, H) : H);
    cpu::NativeSamples ns;
    conv.read(fr.image(col), &ns);
    out->buf.assign((size_t)3 * W * H, 0.f);
    if (!plan.native) {
        float *rp[3] = {&out->buf[0], &out->buf[(size_t)W * H], &out->buf[(size_t)2 * W * H]};
        conv.to_rgb(ns, frame_color(f, col), rp);
        for (int j = 0; j < 3; ++j) {
            out->pl[j].data = rp[j];
            out->pl[j].row_stride = W;
        }
        return;
    }
    const float scale = 1.0f / ((1u << f.comp[0].depth) - 1);
    size_t off = 0;
    for (int j = 0; j < plan.planes; ++j) {
        const size_t n = (size_t)plan.width[j] * plan.height[j];
        for (size_t k = 0; k < n; ++k) out->buf[off + k] = ns.code[j][k] * scale;
        out->pl[j].data = &out->buf[off];
        out->pl[j].row_stride = plan.width[j];
        off += n;
    }
}

StreamSpec noise_spec(const Fmt &F, int W, int H) {
    StreamSpec s;
    s.width = W;
    s.height = H;
    s.format = F.f;
    const bool three = F.f.nb_components == 3;
    s.cw = three ? comp_w(F.f, 1, W) : W;
    s.ch = three ? comp_h(F.f, 1, H) : H;
    return s;
}

double rel_l2(const std::vector<double> &a, const std::vector<double> &b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void noise_source_check(cuda::Ctx &ctx, const char *fname, int W, int H, double sigma) {
    const Fmt &F = fmt_named(fname);
    const DenoisePixelFormat &f = F.f;
    const StreamSpec spec = noise_spec(F, W, H);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const FrameColor fc = frame_color(f, col);
    const NoisePlan plan = noise_plan(spec, fc);
    const cuda::FrameLayout L = cuda::frame_layout(f, W, H);
    const int P = 49, np = plan.planes;
    char name[128];
    std::snprintf(name, sizeof name, "%s %dx%d sigma %.0f (%s plan, %d planes)", fname, W, H, sigma,
                  plan.native ? "native" : "R'G'B'", np);
    cuda::CudaNoiseSource gsrc(ctx);
    NoiseEstimator ecpu, egpu;
    Dev dnat((size_t)L.bytes);
    for (int t = 0; t < 4; ++t) {
        HostFrame fr = new_frame(F, W, H);
        fill_noisy(fr, f, W, H, sigma, t);
        CpuNoisePlanes cp;
        cpu_noise_planes(F, fr, col, W, H, plan, &cp);
        CpuNoiseSource csrc(cp.pl, np, plan.width, plan.height, 1.f, 0.f, plan.params);
        std::vector<uint8_t> compact((size_t)L.bytes);
        cuda::copy_to_compact(L, fr.image(col), compact.data());
        up(dnat, compact.data(), compact.size());
        int rc = gsrc.bind(cuda::compact_frame(L, dnat.u()), f, fc, W, H, spec.cw, spec.ch, plan, ctx.stream);
        if (rc) {
            result(false, "noise source %-44s bind: %s", name, ctx.err.c_str());
            return;
        }
        if (t == 0) {
            // Immerkaer's start, every patch (counts must agree exactly), a weak-texture selection
            double sc[3] = {0, 0, 0}, sg[3] = {NAN, NAN, NAN};
            csrc.immerkaer(sc);
            rc = gsrc.immerkaer(sg);
            double worst = 0;
            for (int j = 0; j < np; ++j) worst = std::max(worst, std::fabs(sg[j] - sc[j]) / std::max(sc[j], 1e-9));
            result(!rc && worst < 1e-5, "noise source %-44s Immerkaer sigma %.4f / %.4f (rel diff %.1e)%s%s", name, sg[0],
                   sc[0], worst, rc ? ": " : "", rc ? ctx.err.c_str() : "");
            for (int k = 0; k < 2; ++k) {
                NoiseSelect sel[3];
                for (int j = 0; j < np; ++j) {
                    if (k == 0) {
                        sel[j].tau = 1e300;
                        sel[j].lo = -1e300;
                        sel[j].hi = 1e300;
                    } else {
                        const double var = sc[j] * sc[j];
                        sel[j].tau = 81.8 * var;
                        sel[j].lo = 2 * sc[j];
                        sel[j].hi = 255 - 2 * sc[j];
                    }
                }
                std::vector<double> Sc((size_t)np * P * P), Sg((size_t)np * P * P, NAN);
                double nc[3], ng[3] = {NAN, NAN, NAN};
                csrc.scatter(sel, Sc.data(), nc);
                rc = gsrc.scatter(sel, Sg.data(), ng);
                size_t unwritten = 0;
                for (double v : Sg) unwritten += !std::isfinite(v);
                double ndiff = 0, l2 = 0;
                for (int j = 0; j < np; ++j) {
                    ndiff = std::max(ndiff, std::fabs(ng[j] - nc[j]) / std::max(nc[j], 1.0));
                    std::vector<double> a(Sg.begin() + (size_t)j * P * P, Sg.begin() + (size_t)(j + 1) * P * P),
                        b(Sc.begin() + (size_t)j * P * P, Sc.begin() + (size_t)(j + 1) * P * P);
                    l2 = std::max(l2, rel_l2(a, b));
                }
                const bool ok = !rc && unwritten == 0 && (k == 0 ? ndiff == 0 : ndiff < 1e-3) && l2 < (k == 0 ? 1e-4 : 2e-3);
                result(ok, "noise source %-44s scatter %s: %.0f / %.0f patches (rel diff %.1e), rel L2 %.1e, %zu unwritten%s%s",
                       name, k == 0 ? "all patches" : "weak texture", ng[0], nc[0], ndiff, l2, unwritten, rc ? ": " : "",
                       rc ? ctx.err.c_str() : "");
            }
        }
        const int rg = egpu.push(gsrc), rcp = ecpu.push(csrc);
        if (rg || rcp) {
            result(false, "noise source %-44s estimator push frame %d: gpu %d cpu %d %s", name, t, rg, rcp, ctx.err.c_str());
            return;
        }
    }
    const float a = egpu.sigma_weighted(plan.gain), b = ecpu.sigma_weighted(plan.gain);
    result(b > 0 && std::fabs(a - b) <= 0.005 * b + 0.01, "noise estimate %-42s 4 frames: GPU %.4f CPU %.4f", name, a, b);
}

// Host time per frame of the estimator on the GPU at 3840x2160 (first frame: Immerkaer and three
// rounds; later frames one round), median of 10, against one CPU frame.
void noise_timing(cuda::Ctx &ctx, const char *fname) {
    const Fmt &F = fmt_named(fname);
    const int W = 3840, H = 2160;
    const StreamSpec spec = noise_spec(F, W, H);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const FrameColor fc = frame_color(F.f, col);
    const NoisePlan plan = noise_plan(spec, fc);
    const cuda::FrameLayout L = cuda::frame_layout(F.f, W, H);
    HostFrame fr = new_frame(F, W, H);
    fill_noisy(fr, F.f, W, H, 12.0, 0);
    std::vector<uint8_t> compact((size_t)L.bytes);
    cuda::copy_to_compact(L, fr.image(col), compact.data());
    Dev dnat((size_t)L.bytes);
    up(dnat, compact.data(), compact.size());
    cuda::CudaNoiseSource gsrc(ctx);
    NoiseEstimator est;
    using clk = std::chrono::steady_clock;
    std::vector<double> ms;
    double first = 0;
    int rc = 0;
    for (int k = 0; k < 11 && !rc; ++k) {
        const auto t0 = clk::now();
        rc = gsrc.bind(cuda::compact_frame(L, dnat.u()), F.f, fc, W, H, spec.cw, spec.ch, plan, ctx.stream);
        if (!rc) rc = est.push(gsrc);
        const double d = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        if (k == 0) first = d;
        else ms.push_back(d);
    }
    std::sort(ms.begin(), ms.end());
    CpuNoisePlanes cp;
    cpu_noise_planes(F, fr, col, W, H, plan, &cp);
    CpuNoiseSource csrc(cp.pl, plan.planes, plan.width, plan.height, 1.f, 0.f, plan.params);
    NoiseEstimator ecpu;
    const auto t0 = clk::now();
    ecpu.push(csrc);
    const double cpu_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    const float g = est.sigma_weighted(plan.gain), c = ecpu.sigma_weighted(plan.gain);
    result(!rc && !ms.empty() && ms[ms.size() / 2] < 5.0,
           "noise estimate timing %s 3840x2160: %.2f ms per frame on the GPU (median of %zu, one round; first frame "
           "%.2f ms), CPU first frame %.0f ms; sigma GPU %.3f (after 11 frames) CPU %.3f (1 frame)%s%s",
           fname, ms.empty() ? -1.0 : ms[ms.size() / 2], ms.size(), first, cpu_ms, g, c, rc ? ": " : "",
           rc ? ctx.err.c_str() : "");
}

// N frames of format F, W x H, with noise of sigma 10 (frame t drawn with seed t).
std::vector<HostFrame> noisy_frames(const Fmt &F, int W, int H, int N) {
    std::vector<HostFrame> in;
    for (int t = 0; t < N; ++t) {
        in.push_back(new_frame(F, W, H));
        fill_noisy(in.back(), F.f, W, H, 10.0, t);
    }
    return in;
}

// The API's per-frame sigma with sigma=auto, backend CUDA against backend CPU.
void noise_api_check(const std::string &weights, const char *fname, bool cuda_memory) {
    const Fmt &F = fmt_named(fname);
    const int W = 160, H = 96, N = 5;
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const std::vector<HostFrame> in = noisy_frames(F, W, H, N);
    ApiOpts o;
    o.sigma = DENOISE_SIGMA_AUTO;
    o.backend = DENOISE_BACKEND_CPU;
    ApiRun c = run_api(weights, F, col, in, W, H, o);
    o.backend = DENOISE_BACKEND_CUDA;
    o.memory = cuda_memory ? DENOISE_MEMORY_CUDA : DENOISE_MEMORY_HOST;
    ApiRun g = run_api(weights, F, col, in, W, H, o);
    double worst = 0;
    bool ok = !c.rc && !g.rc && c.sigmas.size() == (size_t)N && g.sigmas.size() == (size_t)N;
    for (size_t k = 0; ok && k < c.sigmas.size(); ++k) {
        worst = std::max(worst, (double)std::fabs(g.sigmas[k] - c.sigmas[k]));
        ok = c.sigmas[k] > 0 && std::fabs(g.sigmas[k] - c.sigmas[k]) <= 0.005 * c.sigmas[k] + 0.01;
    }
    result(ok, "API sigma=auto %-12s memory %-4s %zu frames: CUDA %.3f .. CPU %.3f (worst diff %.4f)%s%s%s", fname,
           cuda_memory ? "CUDA" : "HOST", g.sigmas.size(), g.sigmas.empty() ? -1.f : g.sigmas.back(),
           c.sigmas.empty() ? -1.f : c.sigmas.back(), worst, (c.rc || g.rc) ? ": " : "", c.err.c_str(), g.err.c_str());
}

// A host function on a stream that holds the stream's later work until `open` is set (at most
// 10 s, so that a check that never sets it cannot hang the program).
void CUDART_CB hold_stream(void *open) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!static_cast<std::atomic<bool> *>(open)->load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// NoiseReads' count of waits that drained the compute stream, on the source alone: a started
// round queued behind 4 GB of memsets on an estimator stream of its own (>= 0.8 ms at 5 TB/s,
// so not ready when read right after: the host waits), read (a) with the compute stream
// (ctx.stream) idle, which the wait must count as drained, and (b) with the compute stream held
// by a host function until after the read, which it must not. No timing but that the memsets
// outlast the few host calls (well under 0.1 ms) between queueing and reading.
void noise_reads_control(cuda::Ctx &ctx) {
    const Fmt &F = fmt_named("yuv420p");
    const int W = 320, H = 180;
    const StreamSpec spec = noise_spec(F, W, H);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const FrameColor fc = frame_color(F.f, col);
    const NoisePlan plan = noise_plan(spec, fc);
    const cuda::FrameLayout L = cuda::frame_layout(F.f, W, H);
    HostFrame fr = new_frame(F, W, H);
    fill_noisy(fr, F.f, W, H, 10.0, 0);
    std::vector<uint8_t> compact((size_t)L.bytes);
    cuda::copy_to_compact(L, fr.image(col), compact.data());
    Dev dnat((size_t)L.bytes), pad((size_t)256 << 20);
    up(dnat, compact.data(), compact.size());
    cudaStream_t es = nullptr;
    if (cudaStreamCreateWithFlags(&es, cudaStreamNonBlocking) != cudaSuccess) {
        result(false, "noise reads control: cudaStreamCreate");
        return;
    }
    cuda::CudaNoiseSource gsrc(ctx);
    NoiseSelect sel[3];
    for (NoiseSelect &q : sel) {
        q.tau = 1e300;
        q.lo = -1e300;
        q.hi = 1e300;
    }
    std::vector<double> S((size_t)3 * 49 * 49);
    double n[3];
    // one started round behind the memsets; the reads it adds
    auto round = [&](NoiseReads *d) {
        const NoiseReads b = gsrc.reads();
        for (int i = 0; i < 16; ++i) cudaMemsetAsync(pad.p, i, pad.bytes, es);
        int rc = gsrc.bind(cuda::compact_frame(L, dnat.u()), F.f, fc, W, H, spec.cw, spec.ch, plan, es);
        if (!rc) rc = gsrc.start_scatter(sel);
        if (!rc) rc = gsrc.scatter(sel, S.data(), n);
        const NoiseReads &a = gsrc.reads();
        d->started = a.started - b.started;
        d->started_busy = a.started_busy - b.started_busy;
        d->started_drained = a.started_drained - b.started_drained;
        d->started_wait_us = a.started_wait_us - b.started_wait_us;
        return rc;
    };
    NoiseReads idle, held;
    cudaStreamSynchronize(ctx.stream);
    int rc = round(&idle);  // also makes the source's buffers: no allocation while the stream is held
    std::atomic<bool> open{false};
    if (!rc && cudaLaunchHostFunc(ctx.stream, hold_stream, &open) != cudaSuccess) {
        rc = -1;
        ctx.err = "cudaLaunchHostFunc (holding the compute stream)";
    }
    if (!rc) rc = round(&held);
    open = true;
    cudaStreamSynchronize(ctx.stream);
    cudaStreamSynchronize(es);
    cudaStreamDestroy(es);
    result(!rc && idle.started == 1 && idle.started_busy == 1 && idle.started_drained == 1 && held.started == 1 &&
               held.started_busy == 1 && held.started_drained == 0,
           "noise reads control, a started round behind 4 GB of memsets: compute stream idle: %lld not ready, %lld "
           "drained (want 1, 1; waited %lld us); compute stream held: %lld not ready, %lld drained (want 1, 0)%s%s",
           (long long)idle.started_busy, (long long)idle.started_drained, (long long)idle.started_wait_us,
           (long long)held.started_busy, (long long)held.started_drained, rc ? ": " : "", rc ? ctx.err.c_str() : "");
}

// sigma=auto on CUDA, the estimate of frame k read at push k + 1 or the flush (the default)
// against the read within push k (DENOISE_SIGMA_AUTO_DEFER=0, the order before), on a stream of
// 30 frames of 640x360 with the network's work, memory HOST, or memory CUDA in a context of the
// check's own with the stream synchronised after each pull (a consumer that reads the frames):
//   - every output sample and every reported sigma equal (the estimator's atomic double sums
//     make a last-bit difference possible in principle: the values are compared exactly);
//   - latency one more, and the first output after push latency + 1 in both orders;
//   - each frame's first round started once (30 started reads) and at most 3 rounds read at once
//     (the first frame's: Immerkaer's start, then three rounds), the same in both orders;
//   - from the first output on (the steady state, flush included) at most 2 waits for started
//     sums after which the compute stream had no work left (NoiseReads::started_drained; a read
//     sees the compute stream still holding the network of the push before, so a drain means
//     the estimate took longer than that whole pass: the wait cost GPU time). Reads that find
//     the sums not ready are no fault by themselves: this loop runs the host ahead of the GPU
//     (nothing between the pushes but the pulls), and while the compute stream still holds
//     queued passes the host's wait at the read only replaces its wait at the pull (at 640x360
//     a pass is short, and the estimator's round under the network's load can outlast it).
//   - the read within the push, right after queueing, found the sums not ready at least half the
//     time (the count of waits sees them); its drained waits are printed, not judged: how often
//     the GPU drains there depends on how the estimator's round compares with one pass.
// noise_reads_control checks that a drained wait is counted and a wait beside queued work is not.
void noise_deferred_check(const std::string &weights, const char *fname, bool cuda_memory) {
    const Fmt &F = fmt_named(fname);
    const int W = 640, H = 360, N = 30;
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const std::vector<HostFrame> in = noisy_frames(F, W, H, N);
    char name[96];
    std::snprintf(name, sizeof name, "deferred estimate %s %dx%d N=%d memory %s", fname, W, H, N,
                  cuda_memory ? "CUDA" : "HOST");
    std::unique_ptr<OwnContext> own;
    if (cuda_memory) {
        own.reset(new OwnContext());
        if (!own->ok) {
            result(false, "%-50s no CUDA driver context (cuCtxCreate through libcuda.so.1)", name);
            return;
        }
    }
    ApiOpts o;
    o.sigma = DENOISE_SIGMA_AUTO;
    o.memory = cuda_memory ? DENOISE_MEMORY_CUDA : DENOISE_MEMORY_HOST;
    o.consumer_sync = cuda_memory;
    setenv("DENOISE_SIGMA_AUTO_DEFER", "0", 1);  // read at denoise_open
    ApiRun old = run_api(weights, F, col, in, W, H, o);
    unsetenv("DENOISE_SIGMA_AUTO_DEFER");
    ApiRun now = run_api(weights, F, col, in, W, H, o);
    if (old.rc || now.rc) {
        result(false, "%-50s within the push: %s | deferred: %s", name, old.err.c_str(), now.err.c_str());
        return;
    }
    size_t nd = 0;
    const double md = max_sample_diff(F, now.out, old.out, W, H, &nd);
    size_t sig_diff = now.sigmas.size() == old.sigmas.size() ? 0 : (size_t)N;
    for (size_t k = 0; k < std::min(now.sigmas.size(), old.sigmas.size()); ++k) sig_diff += now.sigmas[k] != old.sigmas[k];
    const bool lat_ok = now.latency == old.latency + 1 && old.first_out_push == old.latency + 1 &&
                        now.first_out_push == now.latency + 1;
    result(md == 0 && nd == 0 && sig_diff == 0 && lat_ok,
           "%-50s vs read within the push: %zu samples differ (max %.3g), %zu sigmas differ (%.3f .. %.3f); latency %d "
           "(== %d + 1), first output after push %d / %d (== latency + 1)",
           name, nd, md, sig_diff, now.sigmas.empty() ? -1.f : now.sigmas.front(),
           now.sigmas.empty() ? -1.f : now.sigmas.back(), now.latency, old.latency, now.first_out_push,
           old.first_out_push);
    // from the first output on
    const NoiseReads &a = now.reads, &a0 = now.reads_first_out, &b = old.reads, &b0 = old.reads_first_out;
    const int64_t steady = a.started - a0.started, busy = a.started_busy - a0.started_busy,
                  drained = a.started_drained - a0.started_drained, wait_us = a.started_wait_us - a0.started_wait_us;
    const int64_t old_steady = b.started - b0.started, old_busy = b.started_busy - b0.started_busy,
                  old_drained = b.started_drained - b0.started_drained;
    result(a.started == N && b.started == N && a.direct <= 3 && a.direct == b.direct && steady > 0 && drained <= 2 &&
               old_steady > 0 && 2 * old_busy >= old_steady,
           "%-50s estimator reads: started %lld (== %d), read at once %lld (<= 3, within the push %lld); from the "
           "first output on %lld reads: %lld not ready (host waited %.2f ms in all), %lld drained the compute stream "
           "(<= 2); within the push %lld of %lld not ready (>= half), %lld drained",
           name, (long long)a.started, N, (long long)a.direct, (long long)b.direct, (long long)steady, (long long)busy,
           wait_us / 1000.0, (long long)drained, (long long)old_busy, (long long)old_steady, (long long)old_drained);
}

void noise_checks(cuda::Ctx &ctx, const std::string &weights, bool quick) {
    noise_source_check(ctx, "yuv420p", 333, 197, 10.0);
    noise_source_check(ctx, "gbrp", 257, 131, 20.0);
    if (quick) return;
    noise_source_check(ctx, "nv12", 320, 180, 5.0);
    noise_source_check(ctx, "p010le", 320, 180, 30.0);
    noise_source_check(ctx, "yuv422p10le", 250, 120, 15.0);
    noise_source_check(ctx, "yuv444p", 200, 150, 12.0);
    noise_source_check(ctx, "rgb24", 211, 97, 8.0);
    noise_source_check(ctx, "gbrpf32le", 192, 108, 25.0);
    noise_source_check(ctx, "gray10le", 300, 170, 18.0);
    noise_source_check(ctx, "yuv420p", 1920, 1080, 0.0);
    noise_timing(ctx, "yuv420p");
    noise_timing(ctx, "p010le");
    noise_timing(ctx, "gbrp");
    noise_api_check(weights, "yuv420p", false);
    noise_api_check(weights, "nv12", true);
    noise_api_check(weights, "gbrp", false);
    noise_reads_control(ctx);
    noise_deferred_check(weights, "yuv420p", false);
    noise_deferred_check(weights, "nv12", true);
    noise_deferred_check(weights, "gbrp", false);
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        timed("sigma=auto noise source", [&] { noise_checks(ctx, o.api_weights(), o.quick); });
    });
}
