// CPU engine speed: ms per output frame at a given size (default 854x480), through the public API.
//   cpu_bench WEIGHTS [WIDTH HEIGHT [FRAMES [THREADS]]]
// Pushes noisy random frames one at a time and pulls each output as soon as it is ready, so each
// timed pull runs exactly one U-Net pass plus the head (the steady state of a stream). The first
// output (which also computes F_{-1} and F_0) is the warm-up and is not timed; prints each
// timed pull and the median.
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
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p{argv[1], DENOISE_BACKEND_AUTO, 0, 20.0f, W, H, threads};
    if (denoise_open(e, &p)) {
        std::fprintf(stderr, "open: %s\n", denoise_last_error(e));
        return 1;
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.f, 0.08f);
    std::vector<float> in((size_t)3 * W * H), d((size_t)3 * W * H);
    const float *pl[3] = {&in[0], &in[(size_t)W * H], &in[(size_t)2 * W * H]};
    float *dp[3] = {&d[0], &d[(size_t)W * H], &d[(size_t)2 * W * H]};
    std::vector<double> ms, cpu;
    int pulled = 0;
    for (int f = 0; f < frames + 3; ++f) {
        for (size_t i = 0; i < in.size(); ++i) in[i] = 0.5f + 0.3f * (float)((i / 7 + f) % 17) / 17.f + noise(rng);
        if (denoise_push(e, pl, W)) { std::fprintf(stderr, "push: %s\n", denoise_last_error(e)); return 1; }
        for (;;) {
            const double c0 = cpu_seconds();
            auto t0 = std::chrono::steady_clock::now();
            int rc = denoise_pull(e, dp, W);
            auto t1 = std::chrono::steady_clock::now();
            const double c = (cpu_seconds() - c0) * 1e3;
            if (rc == DENOISE_EAGAIN) break;
            if (rc) { std::fprintf(stderr, "pull: %s\n", denoise_last_error(e)); return 1; }
            double t = std::chrono::duration<double, std::milli>(t1 - t0).count();
            std::printf("frame %d: %.1f ms wall, %.1f ms CPU%s\n", pulled, t, c, pulled ? "" : " (warm-up: 3 U-Net passes)");
            if (pulled++) {
                ms.push_back(t);
                cpu.push_back(c);
            }
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
