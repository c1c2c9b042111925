// denoise-cuda-bench (tools/cuda_bench/): what every mode shares: the timing helpers, the frame
// and colour the benches feed, the summary rows, this run's ceilings, and each mode's entry point.
#ifndef DENOISE_TOOLS_CUDA_BENCH_H
#define DENOISE_TOOLS_CUDA_BENCH_H

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuda/backend_cuda.h"
#include "cuda/frame_layout.h"
#include "cuda/network.h"
#include "cuda/ops.h"
#include "cuda/patch_tc.h"
#include "denoise.h"
#include "backend.h"
#include "model.h"

#include "bf16.h"

using namespace denoise;

namespace cuda_bench {

#define CK(x)                                                                       \
    do {                                                                            \
        int rc_ = (x);                                                              \
        if (rc_) {                                                                  \
            std::fprintf(stderr, "denoise-cuda-bench: %s failed (%d): %s\n", #x, rc_, ctx.err.c_str()); \
            return 1;                                                               \
        }                                                                           \
    } while (0)
#define CU(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            std::fprintf(stderr, "denoise-cuda-bench: %s: %s\n", #x, cudaGetErrorString(e_)); \
            return 1;                                                           \
        }                                                                       \
    } while (0)

struct Row {
    std::string what;
    double ms = 0, fps = 0, gib = 0;
};
extern std::vector<Row> g_rows;
struct PathRow {
    int W, H;
    double fused, correct_first;  // kernel-only ms per frame, medians
};
extern std::vector<PathRow> g_paths;


// The ceilings of this run (bench_ceilings): a cuBLASLt bf16 GEMM of 8192^3 (fp32 accumulate,
// bf16 out) in TFLOP/s and a device-to-device copy of 1 GiB in GB/s (read + write), each at the
// median of `iters` after 3 warm-ups; 0 when not measured.
extern double g_gemm_tflops, g_copy_gbs;

// The ms of each of n calls f(i), i = 0..n-1, on ctx.stream between CUDA events a and b, each
// waited for (one call on an idle GPU), sorted ascending into *ms. 0, or 1 on an error (printed).
template <class F>
int time_each(cuda::Ctx &ctx, cudaEvent_t a, cudaEvent_t b, int n, F &&f, std::vector<float> *ms) {
    ms->clear();
    for (int i = 0; i < n; ++i) {
        CU(cudaEventRecord(a, ctx.stream));
        if (f(i)) return 1;
        CU(cudaEventRecord(b, ctx.stream));
        CU(cudaEventSynchronize(b));
        float t = 0;
        CU(cudaEventElapsedTime(&t, a, b));
        ms->push_back(t);
    }
    std::sort(ms->begin(), ms->end());
    return 0;
}

// GFLOP of one frame of model c at H x W (weights/denoise_train/model.py gflop_per_frame's formula)
double gflop_per_frame(const ModelConfig &c, int H, int W);
DenoisePixelFormat yuv420p();
DenoiseColor bt709();
// frame t of a clip of real-looking content (smooth gradients and noise) in yuv420p planes
void fill_frame(std::vector<uint8_t> *planes, int W, int H, int t);

// the modes (each in its own file)
int bench_ceilings(int iters);                                   // ceilings.cpp
int bench_align(const Model &M, int W, int H, int iters);         // align.cpp
int bench_kernels(const Model &M, int W, int H, int iters);       // kernels.cpp
int bench_patch(const Model &M, int W, int H, int iters);         // patch.cpp
int bench_fusion_conv(int w, int h, int iters, int Co);           // fusion_conv.cpp
int bench_head(int w, int h, int iters, int c0);                  // head.cpp
int bench_api(const std::string &wpath, int W, int H, int frames, DenoiseMemory mem, int64_t cap);  // api.cpp
void print_plans(const Model &M, int W, int H);                   // api.cpp
int bench_swin(int iters);                                        // swin.cpp
int bench_swin_sweep(int iters);                                  // swin.cpp
int bench_mlp_probe(int iters);                                   // mlp_probe.cpp

}  // namespace cuda_bench

#endif
