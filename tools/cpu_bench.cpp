// CPU engine speed: ms per output frame at a given size (default 854x480), through the public API.
//   cpu_bench WEIGHTS [WIDTH HEIGHT [FRAMES [THREADS]]]
// Pushes noisy yuv420p (8-bit, BT.601 limited range) frames one at a time and pulls each output
// as soon as it is ready, so each timed step (one push and the pulls it makes ready) runs exactly
// one U-Net pass plus the head and the frame conversions both ways (the steady state of a
// stream). The steps before the first output (frame conversions only) and the first output
// (which also computes F_{-1} and F_0) are not timed; prints each timed step and the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <sys/resource.h>

#include "../kernels/denoise.h"

// User + system CPU seconds of the whole process (all threads).
static double cpu_seconds() {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s WEIGHTS [WIDTH HEIGHT [FRAMES [THREADS]]]\n", argv[0]);
        return 2;
    }
    const int W = argc > 3 ? std::atoi(argv[2]) : 854, H = argc > 3 ? std::atoi(argv[3]) : 480;
    const int frames = argc > 4 ? std::atoi(argv[4]) : 8, threads = argc > 5 ? std::atoi(argv[5]) : 0;
    const int cw = (W + 1) / 2, ch = (H + 1) / 2;
    DenoisePixelFormat fmt{};  // yuv420p
    fmt.nb_components = 3;
    for (int c = 0; c < 3; ++c) fmt.comp[c] = {c, 0, 1, 0, 8};
    fmt.log2_chroma_w = fmt.log2_chroma_h = 1;
    fmt.bytes = 1;
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = argv[1];
    p.sigma = 20.0f;
    p.width = W;
    p.height = H;
    p.format = fmt;
    p.threads = threads;
    if (denoise_open(e, &p)) {
        std::fprintf(stderr, "open: %s\n", denoise_last_error(e));
        return 1;
    }
    std::printf("backend %s (%s)\n", denoise_backend(e) == DENOISE_BACKEND_CPU ? "cpu" : "cuda", denoise_backend_reason(e));
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.f, 20.f);
    std::vector<uint8_t> y((size_t)W * H), u((size_t)cw * ch), v((size_t)cw * ch), out(y.size() + 2 * u.size());
    auto image = [&](uint8_t *py, uint8_t *pu, uint8_t *pv) {
        DenoiseImage im{};
        im.data[0] = py;
        im.data[1] = pu;
        im.data[2] = pv;
        im.linesize[0] = W;
        im.linesize[1] = im.linesize[2] = cw;
        im.color.repr.sys = PL_COLOR_SYSTEM_BT_601;
        im.color.repr.levels = PL_COLOR_LEVELS_LIMITED;
        im.color.chroma_ypos = 128;
        return im;
    };
    auto clip8 = [](float x) { return (uint8_t)std::min(235.f, std::max(16.f, x)); };
    const DenoiseImage in = image(y.data(), u.data(), v.data());
    const DenoiseImage dst = image(out.data(), out.data() + y.size(), out.data() + y.size() + u.size());
    std::vector<double> ms, cpu;
    int pulled = 0;
    for (int f = 0; f < frames + 3; ++f) {
        for (size_t i = 0; i < y.size(); ++i) y[i] = clip8(60 + 120 * (float)((i / 7 + f) % 17) / 17.f + noise(rng));
        for (size_t i = 0; i < u.size(); ++i) {
            u[i] = clip8(128 + 30 * (float)((i / 5 + f) % 13) / 13.f + noise(rng));
            v[i] = clip8(128 - 30 * (float)((i / 3 + f) % 11) / 11.f + noise(rng));
        }
        const double c0 = cpu_seconds();
        auto t0 = std::chrono::steady_clock::now();
        if (denoise_push(e, &in)) { std::fprintf(stderr, "push: %s\n", denoise_last_error(e)); return 1; }
        int got = 0, rc;
        while ((rc = denoise_pull(e, &dst)) == 0) ++got;
        if (rc != DENOISE_EAGAIN) { std::fprintf(stderr, "pull: %s\n", denoise_last_error(e)); return 1; }
        auto t1 = std::chrono::steady_clock::now();
        const double c = (cpu_seconds() - c0) * 1e3;
        if (!got) continue;
        double t = std::chrono::duration<double, std::milli>(t1 - t0).count();
        std::printf("frame %d: %.1f ms wall, %.1f ms CPU%s\n", pulled, t, c, pulled ? "" : " (warm-up: 3 U-Net passes)");
        if (pulled++) {
            ms.push_back(t);
            cpu.push_back(c);
        }
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu.begin(), cpu.end());
    if (!ms.empty())
        std::printf("%dx%d: median %.1f ms/frame wall over %zu frames (min %.1f, max %.1f); median %.1f ms CPU (all threads)\n",
                    W, H, ms[ms.size() / 2], ms.size(), ms.front(), ms.back(), cpu[cpu.size() / 2]);
    denoise_free(&e);
    return 0;
}
