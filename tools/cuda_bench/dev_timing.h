// denoise-cuda-bench: timing of device work on swin_block_dev.h's context (g_ctx), shared by the
// Swin-block modes (swin.cpp: --swin, --swin-sweep) and the MLP probe (mlp_probe.cpp: --mlp-probe):
// CUDA events around each sample after warm-ups, the median and min of the samples, and the count
// of samples whose median sits far above their min (another process's time slices).
#ifndef DENOISE_TOOLS_CUDA_BENCH_DEV_TIMING_H
#define DENOISE_TOOLS_CUDA_BENCH_DEV_TIMING_H

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "swin_block_dev.h"

namespace cuda_bench {

using namespace swin_dev;

struct Stat {
    double min = 0, med = 0, max = 0;  // ms
    // another process's time slices land inside most samples: the median sits far above the min
    bool contended() const { return med > 1.3 * min && med - min > 0.5; }
    const char *flag() const { return contended() ? "!" : " "; }
};
inline int g_timed = 0, g_contended = 0;

// f() timed `iters` times after 3 warm-ups, each sample between two events on the compute stream;
// pre() runs before each sample's first event (queued work that is not timed, e.g. an L2 flush).
template <class F, class P>
Stat time_ms(int iters, F &&f, P &&pre) {
    for (int i = 0; i < 3; ++i) ok_or_die(f(), "warm-up");
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto &e : ev) ck(cudaEventCreate(&e), "cudaEventCreate");
    for (int i = 0; i < iters; ++i) {
        pre();
        ck(cudaEventRecord(ev[2 * i], g_ctx.stream), "cudaEventRecord");
        ok_or_die(f(), "timed call");
        ck(cudaEventRecord(ev[2 * i + 1], g_ctx.stream), "cudaEventRecord");
    }
    ck(cudaStreamSynchronize(g_ctx.stream), "timed calls");
    std::vector<double> t(iters);
    for (int i = 0; i < iters; ++i) {
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
        t[i] = ms;
    }
    for (auto &e : ev) cudaEventDestroy(e);
    std::sort(t.begin(), t.end());
    Stat st;
    st.min = t.front();
    st.med = t[iters / 2];
    st.max = t.back();
    ++g_timed;
    if (st.contended()) ++g_contended;
    return st;
}
template <class F>
Stat time_ms(int iters, F &&f) {
    return time_ms(iters, f, [] {});
}

// A residual map for the timings: `tokens` x C fp32, a random map of `base` tokens repeated (the
// values do not change the work; a 4K level-0 map of random normals would take seconds on the CPU).
inline void fill_repeated(Dev &d, int64_t tokens, int C, int64_t base, uint32_t seed) {
    const std::vector<float> x0 = swin_ref::random_map((size_t)base * C, seed);
    const size_t chunk = (size_t)base * C * 4, total = (size_t)tokens * C * 4;
    upload(d, x0.data(), std::min(chunk, total));
    for (size_t at = chunk; at < total; at += chunk)
        ck(cudaMemcpyAsync(d.as<uint8_t>() + at, d.p, std::min(chunk, total - at), cudaMemcpyDeviceToDevice, g_ctx.stream),
           "cudaMemcpyAsync (map)");
    ck(cudaStreamSynchronize(g_ctx.stream), "map");
}

}  // namespace cuda_bench

#endif
