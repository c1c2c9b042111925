// cuda_bench (build/bin/denoise-cuda-bench): speed and memory of the CUDA engine (built with it; run by tools/bench.sh).
// For each frame size (yuv420p frames of real-looking content: smooth gradients and noise):
//  kernels  the steady-state GPU work of one output frame as the backend runs it for whole frames
//           (frame_in of the newest frame, one U-Net pass, the head, frame_out), timed with CUDA
//           events after warm-up, median of --iters; the U-Net workspace shaped as the backend's
//           whole-frame plan (chunks of 2^18 tokens; head bands of 32 MiB, which the backend's
//           plan leaves out when the tensor-core head runs: the workspace figure here includes
//           them); twice, with the Swin blocks fused and the tensor-core head (the engine's
//           default: the `kernels` line) and as the correct-first op sequence with the two-pass
//           head (`kernels-correct-first`, DENOISE_CUDA_FUSED=0's path), the per-op split of
//           both with the head's FLOP and bytes, and the relative L2 between the two paths'
//           features F (they differ only by bf16 roundings);
//  api-cuda the public API with frames in device memory (memory CUDA, the current context, one
//           stream): push/pull of --frames frames, wall clock from the first pull to the stream's
//           end, frames/s, and the engine's peak device memory (denoise_gpu_memory_peak);
//  api-host the public API with frames in host memory (memory HOST: pinned staging, two frames in
//           flight), wall clock, frames/s, peak device memory;
//  api-cuda stream launches  api-cuda once more with DENOISE_CUDA_GRAPH=0 (each kernel launched on
//           the stream instead of a CUDA graph per U-Net pass and per output);
//  align    model v2's alignment ops alone (bench_align: luma_pyramid, block_match, both
//           shift_tiles; the model's R and tile, else 24 and 64), and their sum per output frame;
//           the whole network of an aligned model (--weights) is the api lines' (the backend runs
//           the alignment; the kernels lines time the network without it);
//  graph    the kernels line's frame as a CUDA graph beside its stream launches (bench_graph);
//  ceilings first: a cuBLASLt bf16 GEMM of 8192^3 and a 1 GiB device copy (bench_ceilings); the
//           kernels lines give their TFLOP/s as a share of that GEMM, and a roofline table per
//           size gives each op kind of the fused path its GFLOP, least DRAM MB, TFLOP/s and GB/s
//           against both ceilings (fused_op_cost).
// Each line also gives GFLOP/frame (weights/denoise_train/model.py gflop_per_frame's formula) and TFLOP/s.
// --cap SIZE=MIB runs that size's API measurements under a GPU memory cap (tiles).
// --plans prints, without touching a GPU, the memory plan the backend picks for each size, for
// yuv420p and p010le frames in host and device memory, at the default cap and under 2 GiB.
// --fusion-conv times the fusion conv alone, direct vs tensor core, on --sizes as token maps
// (bench_fusion_conv) and nothing else; --head likewise the head alone, tensor-core vs two-pass
// (bench_head).
// --patch times the patch merges and expands alone, the op sequence vs the fused kernels, on the
// token grids of --sizes (bench_patch), then the kernels line and per-op table of each size, and
// nothing else.
// Usage: denoise-cuda-bench [--weights FILE] [--iters N] [--frames N] [--sizes WxH,...] [--cap WxH=MIB]...
//        denoise-cuda-bench --plans [--weights FILE] [--sizes WxH,...]
//        denoise-cuda-bench --fusion-conv [--iters N] [--sizes WxH,...]
//        denoise-cuda-bench --head [--iters N] [--sizes WxH,...]
//        denoise-cuda-bench --patch [--weights FILE] [--iters N] [--sizes WxH,...]
// Exit: 0, 1 on an error, 77 without a usable GPU.
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

using namespace denoise;

namespace {

double gflop_per_frame(const ModelConfig &c, int H, int W) {
    const int m = c.pad_multiple;
    H = (H + m - 1) / m * m;
    W = (W + m - 1) / m * m;
    const double c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2];
    const double n0 = (double)(H / 2) * (W / 2), n1 = n0 / 4, n2 = n0 / 16, N = c.window * c.window, r = c.mlp_ratio;
    auto block = [&](double C, double n) { return n * (3 * C * C + C * C + 2 * r * C * C + 2 * N * C); };
    double macs = n0 * ((2 * c.fusion_radius + 1) * 12 + 1) * c0 * 9;
    macs += block(c0, n0) * (c.depth_enc0 + c.depth_dec0) + block(c1, n1) * (c.depth_enc1 + c.depth_dec1);
    macs += block(c2, n2) * c.depth_mid;
    macs += n1 * 4 * c0 * c1 + n2 * 4 * c1 * c2;
    macs += n2 * c2 * 2 * c2 + n1 * 2 * c1 * c1;
    macs += n1 * c1 * 2 * c1 + n0 * 2 * c0 * c0;
    macs += n0 * c0 * 27 * 12;
    return 2 * macs / 1e9;
}

double bf16_value(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

DenoisePixelFormat yuv420p() {
    DenoisePixelFormat f{};
    f.nb_components = 3;
    for (int c = 0; c < 3; ++c) f.comp[c] = {c, 0, 1, 0, 8};
    f.log2_chroma_w = f.log2_chroma_h = 1;
    f.bytes = 1;
    return f;
}

DenoiseColor bt709() {
    DenoiseColor c{};
    c.repr.sys = PL_COLOR_SYSTEM_BT_709;
    c.repr.levels = PL_COLOR_LEVELS_LIMITED;
    c.chroma_xpos = 0;
    c.chroma_ypos = 128;
    return c;
}

// A yuv420p frame: gradients plus pseudo-random noise, moving with t.
void fill_frame(std::vector<uint8_t> *planes, int W, int H, int t) {
    const int cw = (W + 1) / 2, ch = (H + 1) / 2;
    planes[0].resize((size_t)W * H);
    planes[1].resize((size_t)cw * ch);
    planes[2].resize((size_t)cw * ch);
    uint32_t s = 2463534242u + t;
    auto rnd = [&]() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        return (int)(s % 41) - 20;
    };
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            planes[0][(size_t)y * W + x] = (uint8_t)std::min(235, std::max(16, 16 + ((x + 3 * t) * 219 / W + y * 50 / H) % 220 + rnd()));
    for (int p = 1; p < 3; ++p)
        for (int y = 0; y < ch; ++y)
            for (int x = 0; x < cw; ++x)
                planes[p][(size_t)y * cw + x] = (uint8_t)std::min(240, std::max(16, 128 + (p == 1 ? x - cw / 2 : y - ch / 2) * 60 / cw + rnd() / 2));
}

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
std::vector<Row> g_rows;
struct PathRow {
    int W, H;
    double fused, correct_first;  // kernel-only ms per frame, medians
};
std::vector<PathRow> g_paths;

// The ceilings of this run (bench_ceilings): a cuBLASLt bf16 GEMM of 8192^3 (fp32 accumulate,
// bf16 out) in TFLOP/s and a device-to-device copy of 1 GiB in GB/s (read + write), each at the
// median of `iters` after 3 warm-ups; 0 when not measured.
double g_gemm_tflops = 0, g_copy_gbs = 0;

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

int bench_ceilings(int iters) {
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const int64_t N = 8192;
    const size_t copy_bytes = (size_t)1 << 30;
    void *a = nullptr, *w = nullptr, *o = nullptr, *s = nullptr, *d = nullptr;
    CK(cuda::dev_alloc(ctx, &a, 2 * N * N, "GEMM A"));
    CK(cuda::dev_alloc(ctx, &w, 2 * N * N, "GEMM W"));
    CK(cuda::dev_alloc(ctx, &o, 2 * N * N, "GEMM out"));
    CK(cuda::dev_alloc(ctx, &s, copy_bytes, "copy source"));
    CK(cuda::dev_alloc(ctx, &d, copy_bytes, "copy destination"));
    {  // random bf16 values in [-1, 1) (zeros would let the tensor cores idle at lower power)
        std::vector<uint16_t> h((size_t)N * N);
        uint32_t x = 2463534242u;
        for (auto &v : h) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const float f = (float)(x >> 8) / 8388608.0f - 1.0f;
            uint32_t u;
            std::memcpy(&u, &f, 4);
            v = (uint16_t)(u >> 16);
        }
        CU(cudaMemcpyAsync(a, h.data(), h.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaMemcpyAsync(w, h.data(), h.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaMemsetAsync(s, 1, copy_bytes, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    auto median_ms = [&](const std::function<int()> &f, double *med) -> int {
        std::vector<float> t;
        for (int i = 0; i < 3; ++i)  // warm-up
            if (f()) return 1;
        if (time_each(ctx, e0, e1, iters, [&](int) { return f(); }, &t)) return 1;
        *med = t[t.size() / 2];
        return 0;
    };
    double gemm_ms = 0, copy_ms = 0;
    if (median_ms([&] {
            return cuda::linear(ctx, (const cuda::bf16 *)a, N, (int)N, (int)N, (const cuda::bf16 *)w, nullptr, (int)N, o,
                                false, (int)N, 0.f);
        }, &gemm_ms)) {
        std::fprintf(stderr, "denoise-cuda-bench: GEMM ceiling: %s\n", ctx.err.c_str());
        return 1;
    }
    if (median_ms([&] { return cuda::cuda_check(ctx, cudaMemcpyAsync(d, s, copy_bytes, cudaMemcpyDeviceToDevice,
                                                                     ctx.stream), "cudaMemcpyAsync (copy ceiling)"); },
                  &copy_ms))
        return 1;
    g_gemm_tflops = 2.0 * N * N * N / (gemm_ms * 1e-3) / 1e12;
    g_copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    std::printf("cuda-bench ceilings: cuBLASLt bf16 GEMM 8192^3 (fp32 accumulate, bf16 out) %.3f ms = %.0f TFLOP/s; "
                "device-to-device copy of 1 GiB %.3f ms = %.0f GB/s (read + write); medians of %d\n",
                gemm_ms, g_gemm_tflops, copy_ms, g_copy_gbs, iters);
    std::fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cuda::ctx_destroy(ctx);
    return 0;
}

// FLOP and least DRAM bytes per frame of an op kind of the fused path (the per-op table's kinds,
// Net's marks), for the roofline table; false for a kind not listed here. FLOP: 2 x the MACs of
// gflop_per_frame's terms. Bytes: each kernel's inputs read and outputs written once (weights
// left out: they stay in L2): frame_in the native frame in, the bf16 network input out; the
// fusion conv the 2r+1 bf16 frames in, the fp32 residual stream out; a Swin block its fp32 tokens
// in and out in place (8 C per token; the U-Net's last block writes the bf16 features instead,
// 4 C + 2 C); a patch merge its fp32 map in and the merged fp32 map out; a patch expand the low
// map and the skip map in, the skip map out in place; the head head_conv3d_tc_bytes; frame_out
// the fp32 change and the native frame in, the native frame out. The expands' FLOP are the
// model's (gflop_per_frame): the kernel's skip GEMM reads the skip map as two bf16 parts (hi +
// lo, docs/cuda.md) and so issues more MMAs than counted here.
bool fused_op_cost(const ModelConfig &c, int64_t native_bytes, int64_t n0, const std::string &kind, double *flop,
                   double *bytes) {
    const double c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2], r = c.mlp_ratio,
                 N = (double)c.window * c.window;
    const double n[3] = {(double)n0, n0 / 4.0, n0 / 16.0}, ch[3] = {c0, c1, c2};
    const int blocks[3] = {c.depth_enc0 + c.depth_dec0, c.depth_enc1 + c.depth_dec1, c.depth_mid};
    const int nf = 2 * c.fusion_radius + 1;
    *flop = 0;
    *bytes = 0;
    if (kind == "frame_in") {
        *bytes = native_bytes + n[0] * 12 * 2;
        return true;
    }
    if (kind == "frame_out") {
        *bytes = n[0] * 12 * 4 + 2.0 * native_bytes;
        return true;
    }
    if (kind == "fusion conv 3x3") {
        *flop = 2 * n[0] * c.fusion_in_channels() * c0 * 9;
        *bytes = n[0] * 12 * 2 * nf + n[0] * c0 * 4;
        return true;
    }
    if (kind == "head tensor-core conv3d") {
        *flop = cuda::head_conv3d_flop(n0, c.head_out_channels());
        *bytes = cuda::head_conv3d_tc_bytes(n0, c.head_out_channels());
        return true;
    }
    for (int l = 0; l < 3; ++l) {
        const double C = ch[l];
        const std::string cs = " C " + std::to_string((int)C);
        if (kind == "Swin block fused" + cs) {
            *flop = 2 * blocks[l] * n[l] * (4 * C * C + 2 * r * C * C + 2 * N * C);
            *bytes = blocks[l] * n[l] * 8 * C - (l == 0 ? n[0] * c0 * 2 : 0);
            return true;
        }
        if (l < 2 && kind == "patch merge fused" + cs) {
            *flop = 2 * n[l + 1] * 4 * C * ch[l + 1];
            *bytes = n[l] * C * 4 + n[l + 1] * ch[l + 1] * 4;
            return true;
        }
        if (l > 0 && kind == "patch expand fused" + cs) {
            *flop = 2 * (n[l] * C * 2 * C + n[l - 1] * 2 * ch[l - 1] * ch[l - 1]);
            *bytes = n[l] * C * 4 + 2 * n[l - 1] * ch[l - 1] * 4;
            return true;
        }
    }
    return false;
}

// The same frame's work as a CUDA graph, beside the stream launches (`direct`), in two ways:
// `capture` captures each frame's launches (their pointers change from frame to frame, as an
// engine's do) and updates one executable graph with them (cudaGraphExecUpdate; instantiated again
// only when that fails), then launches it; `replay` launches the graph of one frame again and
// again (no host work but the launch: the lower bound). Each timed two ways: one frame on an idle
// GPU (event before the first host call, median of 30 after 3 warm-ups; comparable with the
// kernels line, whose median `direct_ms` is) and back to back (40 frames enqueued without a
// wait, the stream's time over 40: the host's share hides behind the GPU's when it is smaller).
// 0, or 1 on an error (printed).
template <typename Frame>
int bench_graph(cuda::Ctx &ctx, Frame &one, int W, int H, double direct_ms) {
    const int kIdle = 30, kBack = 40;
    cudaGraphExec_t exec = nullptr;
    int reinstantiated = 0;
    size_t nodes = 0;  // of the last captured frame
    auto capture = [&](int i) -> int {
        cudaGraph_t g = nullptr;
        CU(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
        const int r = one(i);
        const cudaError_t e = cudaStreamEndCapture(ctx.stream, &g);
        if (r) {
            if (g) cudaGraphDestroy(g);
            return 1;
        }
        CU(e);
        CU(cudaGraphGetNodes(g, nullptr, &nodes));
        if (exec) {
            cudaGraphExecUpdateResultInfo info;
            if (cudaGraphExecUpdate(exec, g, &info) != cudaSuccess) {
                cudaGetLastError();
                cudaGraphExecDestroy(exec);
                exec = nullptr;
                ++reinstantiated;
            }
        }
        if (!exec) {
            const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
            cudaGraphDestroy(g);
            CU(ie);
        } else {
            cudaGraphDestroy(g);
        }
        CU(cudaGraphLaunch(exec, ctx.stream));
        return 0;
    };
    auto replay = [&](int) -> int {
        CU(cudaGraphLaunch(exec, ctx.stream));
        return 0;
    };
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    // mode 0 direct, 1 capture, 2 replay; idle: per-frame median; back: ms per frame back to back
    double idle[3] = {direct_ms, 0, 0}, back[3] = {0, 0, 0};
    for (int mode = 0; mode < 3; ++mode) {
        auto run = [&](int i) -> int { return mode == 0 ? one(i) : mode == 1 ? capture(i) : replay(i); };
        if (mode == 2 && capture(0)) return 1;  // the graph replay launches: frame 0's
        for (int i = 0; i < 3; ++i)
            if (run(i)) return 1;
        CU(cudaStreamSynchronize(ctx.stream));
        if (mode) {
            std::vector<float> ms;
            if (time_each(ctx, a, b, kIdle, run, &ms)) return 1;
            idle[mode] = ms[ms.size() / 2];
        }
        CU(cudaEventRecord(a, ctx.stream));
        for (int i = 0; i < kBack; ++i)
            if (run(i)) return 1;
        CU(cudaEventRecord(b, ctx.stream));
        CU(cudaEventSynchronize(b));
        float t = 0;
        CU(cudaEventElapsedTime(&t, a, b));
        back[mode] = t / kBack;
    }
    cudaGraphExecDestroy(exec);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::printf("cuda-bench %5dx%-5d graph (%zu nodes): one frame on an idle GPU direct %.3f / capture+update %.3f / "
                "replay %.3f ms; back to back (%d frames) direct %.3f / capture+update %.3f / replay %.3f ms per frame"
                "%s\n",
                W, H, nodes, idle[0], idle[1], idle[2], kBack, back[0], back[1], back[2],
                reinstantiated ? (", instantiated again " + std::to_string(reinstantiated) + " times").c_str() : "");
    std::fflush(stdout);
    const std::string sz = std::to_string(W) + "x" + std::to_string(H);
    g_rows.push_back({sz + " kernels back to back", back[0], 1000.0 / back[0], ctx.peak / 1073741824.0});
    g_rows.push_back({sz + " kernels graph capture+update", back[1], 1000.0 / back[1], ctx.peak / 1073741824.0});
    g_rows.push_back({sz + " kernels graph replay", back[2], 1000.0 / back[2], ctx.peak / 1073741824.0});
    return 0;
}

// Model v2's alignment ops alone on a W x H frame (padded to 64), R and tile of the model when it
// aligns, else the trained v2 setting (24, 64): luma_pyramid, block_match of a pair (moving
// smooth content), shift_tiles_s2d of a frame, shift_tiles of a c0-channel map (halved shifts);
// median of iters, and their sum per output frame as the whole-frame plan runs them (2r + 1
// pyramids, 2r block matchings and frame warps, 2 feature warps; the 2r + 1 luma conversions,
// frame_in with a luma plane only, are not in it).
int bench_align(const Model &M, int W, int H, int iters) {
    const int R = M.cfg.align ? M.cfg.align : 24, T = M.cfg.align ? M.cfg.align_tile : 64;
    const int m = std::max(M.cfg.pad_multiple, T), hp = (H + m - 1) / m * m, wp = (W + m - 1) / m * m;
    const int h2 = hp / 2, w2 = wp / 2, C = M.cfg.channels[0], taps = 2 * M.cfg.fusion_radius;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    const size_t np = cuda::luma_pyramid_floats(hp, wp), maps = (size_t)(hp / T) * (wp / T) * 2;
    float *pyr[2] = {nullptr, nullptr};
    cuda::bf16 *x = nullptr, *xm = nullptr, *F = nullptr, *Fm = nullptr;
    int32_t *sh = nullptr;
    for (auto &p : pyr) CK(cuda::dev_alloc(ctx, (void **)&p, np * 4, "luma pyramid"));
    CK(cuda::dev_alloc(ctx, (void **)&x, (size_t)h2 * w2 * 12 * 2, "frame"));
    CK(cuda::dev_alloc(ctx, (void **)&xm, (size_t)h2 * w2 * 12 * 2, "moved frame"));
    CK(cuda::dev_alloc(ctx, (void **)&F, (size_t)h2 * w2 * C * 2, "feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&Fm, (size_t)h2 * w2 * C * 2, "moved feature map"));
    CK(cuda::dev_alloc(ctx, (void **)&sh, maps * 4, "shift map"));
    {  // smooth content (a sum of sinusoids), the other frame moved by (5, -7) px
        std::vector<float> L[2];
        for (int f = 0; f < 2; ++f) {
            L[f].resize(np);
            for (int y = 0; y < hp; ++y)
                for (int xx = 0; xx < wp; ++xx) {
                    const double Y = y + 5 * f, X = xx - 7 * f;
                    L[f][(size_t)y * wp + xx] = (float)(0.4 * std::sin(0.071 * X + 0.4 * std::sin(0.05 * Y)) +
                                                        0.3 * std::cos(0.093 * Y - 0.02 * X) + 0.1 * std::sin(0.31 * X * 0.7 + 0.27 * Y));
                }
            CU(cudaMemcpyAsync(pyr[f], L[f].data(), np * 4, cudaMemcpyHostToDevice, ctx.stream));
            CK(cuda::luma_pyramid(ctx, pyr[f], hp, wp));
        }
        CK(cuda::block_match(ctx, pyr[0], pyr[1], hp, wp, R, T, sh));
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
    const Op ops[] = {
        {"luma_pyramid", [&] { return cuda::luma_pyramid(ctx, pyr[0], hp, wp); }, (double)taps + 1},
        {"block_match", [&] { return cuda::block_match(ctx, pyr[0], pyr[1], hp, wp, R, T, sh); }, (double)taps},
        {"shift_tiles_s2d", [&] { return cuda::shift_tiles_s2d(ctx, x, h2, w2, sh, wp / T, T, xm); }, (double)taps},
        {"shift_tiles (C, halved)", [&] { return cuda::shift_tiles(ctx, F, h2, w2, C, sh, wp / T, T / 2, true, Fm); }, 2},
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

int bench_kernels(const Model &M, int W, int H, int iters) {
    const ModelConfig &cfg = M.cfg;
    const int m = cfg.pad_multiple, hp = (H + m - 1) / m * m, wp = (W + m - 1) / m * m, h2 = hp / 2, w2 = wp / 2;
    const int nf = 2 * cfg.fusion_radius + 1, c0 = cfg.channels[0];
    const DenoisePixelFormat fmt = yuv420p();
    const cuda::FrameLayout L = cuda::frame_layout(fmt, W, H);
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    cuda::Net net;
    CK(net.upload(ctx, M));
    const int band = (int)std::max<int64_t>(1, ((int64_t)32 << 20) / ((int64_t)w2 * 112 * 4) - 2);
    CK(net.resize(ctx, cuda::NetShape{h2, w2, (int64_t)1 << 18, band}));
    std::vector<cuda::bf16 *> fr(2 * cfg.temporal_radius() + 1), F(3);
    uint8_t *nat = nullptr, *out = nullptr;
    float *change = nullptr, *noise = nullptr;
    for (auto &p : fr) CK(cuda::dev_alloc(ctx, (void **)&p, (size_t)h2 * w2 * 12 * 2, "frames"));
    for (auto &p : F) CK(cuda::dev_alloc(ctx, (void **)&p, (size_t)h2 * w2 * c0 * 2, "features"));
    CK(cuda::dev_alloc(ctx, (void **)&nat, (size_t)L.bytes, "native"));
    CK(cuda::dev_alloc(ctx, (void **)&out, (size_t)L.bytes, "out"));
    CK(cuda::dev_alloc(ctx, (void **)&change, (size_t)h2 * w2 * 12 * 4, "change"));
    CK(cuda::dev_alloc(ctx, (void **)&noise, (size_t)kBlueNoiseSize * kBlueNoiseSize * 4, "noise"));
    {
        std::vector<uint8_t> planes[3], compact((size_t)L.bytes);
        fill_frame(planes, W, H, 0);
        DenoiseImage im{};
        const int cw = (W + 1) / 2;
        for (int p = 0; p < 3; ++p) {
            im.data[p] = planes[p].data();
            im.linesize[p] = p ? cw : W;
        }
        cuda::copy_to_compact(L, im, compact.data());
        // on the compute stream: a legacy-stream cudaMemcpy would not be ordered before its kernels
        CU(cudaMemcpyAsync(nat, compact.data(), compact.size(), cudaMemcpyHostToDevice, ctx.stream));
        std::vector<float> nz((size_t)kBlueNoiseSize * kBlueNoiseSize);
        for (size_t i = 0; i < nz.size(); ++i) nz[i] = (float)((i * 2654435761u) % 1000) / 1000.f;
        CU(cudaMemcpyAsync(noise, nz.data(), nz.size() * 4, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    const FrameColor fc = frame_color(fmt, bt709());
    const cuda::DevFrame src = cuda::compact_frame(L, nat), dst = cuda::compact_frame(L, out);
    for (auto *f : fr) CK(cuda::frame_in(ctx, src, fmt, fc, W, H, 0, 0, hp, wp, f));
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    cuda::OpTimer timer;
    bool timing_ops = false;  // mark frame_in / frame_out on `timer` too
    auto one = [&](int i) -> int {
        if (timing_ops) CK(timer.mark(ctx, "frame_in"));
        CK(cuda::frame_in(ctx, src, fmt, fc, W, H, 0, 0, hp, wp, fr[i % fr.size()]));
        CK(net.features(ctx, (const cuda::bf16 *const *)fr.data(), nf, 20.f, h2, w2, F[i % 3]));
        const cuda::bf16 *Fp[3] = {F[0], F[1], F[2]};
        CK(net.head(ctx, Fp, fr[3], h2, w2, change, true));
        if (timing_ops) CK(timer.mark(ctx, "frame_out"));
        CK(cuda::frame_out(ctx, change, 0, 0, hp, wp, src, dst, fmt, fc, W, H, 0, H, 0, W, Amount(), noise));
        return 0;
    };
    const double gf = gflop_per_frame(cfg, H, W);
    const size_t nF = (size_t)h2 * w2 * c0;
    std::vector<uint16_t> Fh[2];
    double med[2] = {0, 0};
    std::vector<std::pair<std::string, double>> per_op[2];  // ms per op kind, mean of kOpFrames frames
    const int kOpFrames = 5;
    for (int path = 0; path < 2; ++path) {  // 0: fused (the default), 1: correct-first
        net.set_fused(path == 0);
        // the features of one fixed input on this path, for the comparison of the two
        CK(net.features(ctx, (const cuda::bf16 *const *)fr.data(), nf, 20.f, h2, w2, F[0]));
        Fh[path].resize(nF);
        CU(cudaMemcpyAsync(Fh[path].data(), F[0], nF * 2, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        for (int i = 0; i < 3; ++i)
            if (one(i)) return 1;  // warm-up (cuBLASLt heuristics, caches)
        CU(cudaStreamSynchronize(ctx.stream));
        std::vector<float> ms;
        if (time_each(ctx, a, b, iters, one, &ms)) return 1;
        med[path] = ms[ms.size() / 2];
        std::printf("cuda-bench %5dx%-5d %-8s %8.3f ms/frame (min %.3f)  %8.2f frames/s  %7.2f GFLOP/frame  %6.2f "
                    "TFLOP/s (%.1f%% of the GEMM ceiling)  device memory %.0f MiB (weights %.1f MiB, U-Net workspace "
                    "%.0f MiB); %s\n",
                    W, H, path ? "kernels-correct-first" : "kernels", med[path], ms[0], 1000.0 / med[path], gf,
                    gf / med[path], g_gemm_tflops > 0 ? 100.0 * gf / med[path] / g_gemm_tflops : 0.0,
                    ctx.peak / 1048576.0, net.weight_bytes() / 1048576.0,
                    net.workspace_bytes() / 1048576.0, (net.swin_path() + "; " + net.head_path()).c_str());
        std::fflush(stdout);
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + (path ? " kernels correct-first" : " kernels fused"),
                          med[path], 1000.0 / med[path], ctx.peak / 1073741824.0});
        if (path == 0 && bench_graph(ctx, one, W, H, med[0])) return 1;
        // the per-op split, outside the timed loop: an event before each op group of kOpFrames
        // frames (the events add a little time of their own; the table's total is printed beside
        // the median above)
        net.set_op_timer(&timer);
        timing_ops = true;
        for (int i = 0; i < kOpFrames; ++i)
            if (one(i)) return 1;
        CK(timer.mark(ctx, "end"));
        CK(timer.collect(ctx, &per_op[path]));
        net.set_op_timer(nullptr);
        timing_ops = false;
        for (auto &k : per_op[path]) k.second /= kOpFrames;
    }
    {  // side by side, in the order the fused path runs them, then the correct-first-only kinds
        std::vector<std::string> kinds;
        for (int path = 0; path < 2; ++path)
            for (const auto &k : per_op[path])
                if (std::find(kinds.begin(), kinds.end(), k.first) == kinds.end()) kinds.push_back(k.first);
        auto get = [&](int path, const std::string &k) {
            for (const auto &x : per_op[path])
                if (x.first == k) return x.second;
            return 0.0;
        };
        double tot[2] = {0, 0};
        std::printf("cuda-bench %5dx%-5d per op kind, ms per frame (mean of %d frames, CUDA events between op groups):\n",
                    W, H, kOpFrames);
        std::printf("  %-36s %10s %14s\n", "op", "fused", "correct-first");
        for (const std::string &k : kinds) {
            const double f = get(0, k), c = get(1, k);
            tot[0] += f;
            tot[1] += c;
            std::printf("  %-36s %10.3f %14.3f\n", k.c_str(), f, c);
        }
        std::printf("  %-36s %10.3f %14.3f   (timed loop medians %.3f / %.3f)\n", "total", tot[0], tot[1], med[0], med[1]);
        // the fused path's roofline: each op kind's FLOP and least DRAM bytes (fused_op_cost)
        // against this run's ceilings
        std::printf("cuda-bench %5dx%-5d roofline of the fused path (ceilings of this run: GEMM %.0f TFLOP/s, copy %.0f "
                    "GB/s):\n  %-32s %8s %8s %8s %8s %7s %8s %7s %7s\n",
                    W, H, g_gemm_tflops, g_copy_gbs, "op", "ms", "GFLOP", "MB", "TFLOP/s", "% GEMM", "GB/s", "% copy",
                    "FLOP/B");
        double fl_sum = 0;
        std::string uncounted;
        for (const auto &k : per_op[0]) {
            double fl = 0, by = 0;
            if (!fused_op_cost(cfg, L.bytes, (int64_t)h2 * w2, k.first, &fl, &by)) {
                uncounted += (uncounted.empty() ? "" : ", ") + k.first;
                continue;
            }
            if (k.second <= 0) continue;
            fl_sum += fl;
            const double tf = fl / 1e9 / k.second, gbs = by / 1e6 / k.second;
            std::printf("  %-32s %8.3f %8.2f %8.1f %8.1f %6.1f%% %8.0f %6.1f%% %7.1f\n", k.first.c_str(), k.second, fl / 1e9,
                        by / 1e6, tf, g_gemm_tflops > 0 ? 100.0 * tf / g_gemm_tflops : 0.0, gbs,
                        g_copy_gbs > 0 ? 100.0 * gbs / g_copy_gbs : 0.0, by > 0 ? fl / by : 0.0);
        }
        // the kinds' FLOP add up to the frame's (gflop_per_frame): a check of the table's counts
        std::printf("  GFLOP of the op kinds %.2f, of the frame %.2f%s%s%s\n", fl_sum / 1e9, gf,
                    std::fabs(fl_sum / 1e9 - gf) > 1e-6 * gf ? " (they differ)" : "",
                    uncounted.empty() ? "" : "; kinds without a count: ", uncounted.c_str());
        // the head's roofline: its op groups on each path against its FLOP and least DRAM bytes
        const int64_t tok = (int64_t)h2 * w2;
        const int hc = cfg.head_out_channels();
        const double hgf = cuda::head_conv3d_flop(tok, hc) / 1e9;
        const double hms[2] = {get(0, "head tensor-core conv3d") + get(0, "head temporal GEMM") + get(0, "head stencil"),
                               get(1, "head tensor-core conv3d") + get(1, "head temporal GEMM") + get(1, "head stencil")};
        const bool tch[2] = {get(0, "head tensor-core conv3d") > 0, get(1, "head tensor-core conv3d") > 0};
        for (int path = 0; path < 2; ++path) {
            const double gb = (tch[path] ? cuda::head_conv3d_tc_bytes(tok, hc) : cuda::head_two_pass_bytes(tok, hc)) / 1e9;
            std::printf("  head on the %-13s path (%s): %.3f ms, %.2f GFLOP (conv), %.3f GB least DRAM traffic: %.1f "
                        "TFLOP/s, %.0f GB/s\n",
                        path ? "correct-first" : "fused", tch[path] ? "tensor-core" : "two-pass", hms[path], hgf, gb,
                        hms[path] > 0 ? hgf / hms[path] : 0.0, hms[path] > 0 ? gb / hms[path] * 1000.0 : 0.0);
        }
        std::fflush(stdout);
    }
    g_paths.push_back({W, H, med[0], med[1]});
    double num = 0, den = 0;
    for (size_t i = 0; i < nF; ++i) {
        const double u = bf16_value(Fh[0][i]), v = bf16_value(Fh[1][i]);
        num += (u - v) * (u - v);
        den += v * v;
    }
    std::printf("cuda-bench %5dx%-5d fused vs correct-first: %.2fx faster, features F rel L2 %.2e (bf16 roundings "
                "only; the CPU comparison is gpu_check's)\n",
                W, H, med[1] / med[0], den > 0 ? std::sqrt(num / den) : std::sqrt(num));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    net.destroy(ctx);
    cuda::ctx_destroy(ctx);
    return 0;
}

// --patch: the U-Net's two patch merges and two patch expands alone, on the token grids of a W x H
// frame (padded to the model's multiple), with the model's weights and random maps U(-2, 2): the
// correct-first op sequence (Net::merge / Net::expand's ops on the whole map in one chunk) and the
// fused tensor-core kernel (patch_tc.cu) side by side in one run, each timed with CUDA events
// after 3 warm-ups, median of `iters`, interleaved; GFLOP = the GEMMs' 2 x MACs, GB = the fused
// kernel's DRAM traffic (the fp32 maps read once and the fp32 result written once); and the rel L2
// between the two outputs (they differ by bf16 roundings only: ~1e-4; above 1e-2 is a failure).
int bench_patch(const Model &M, int W, int H, int iters) {
    const ModelConfig &cfg = M.cfg;
    const ModelWeights &Wt = M.w;
    const int m = cfg.pad_multiple, h0 = (H + m - 1) / m * m / 2, w0 = (W + m - 1) / m * m / 2;
    const int c0 = cfg.channels[0], c1 = cfg.channels[1], c2 = cfg.channels[2];
    const int64_t n0 = (int64_t)h0 * w0, n1 = n0 / 4, n2 = n0 / 16;
    const float eps = (float)cfg.ln_eps;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    auto up = [&](const void *host, size_t bytes, void **dst) -> int {
        CK(cuda::dev_alloc(ctx, dst, bytes, "bench_patch"));
        CU(cudaMemcpyAsync(*dst, host, bytes, cudaMemcpyHostToDevice, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        return 0;
    };
    auto bf = [](const float *p, size_t n) {
        std::vector<uint16_t> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = cuda::patch_tc::bf16_bits(p[i]);
        return v;
    };
    struct Merge {
        const char *name;
        int C, Co, H, W;
        cuda::bf16 *w16, *wp;
        float *g, *b, *gp, *bp;
        float *x;
    } mg[2] = {{"merge0", c0, Wt.merge0_red.out, h0, w0}, {"merge1", c1, Wt.merge1_red.out, h0 / 2, w0 / 2}};
    struct Expand {
        const char *name;
        int C, C2, Cs, Co, h, w;
        cuda::bf16 *we16, *be16, *ws16, *wep, *wsp;
        float *bs, *bep;
        float *lo, *skip;
    } ex[2] = {{"expand1", c2, Wt.expand1.out, c1, Wt.skip1.out, h0 / 4, w0 / 4},
               {"expand0", c1, Wt.expand0.out, c0, Wt.skip0.out, h0 / 2, w0 / 2}};
    const NormW *mn[2] = {&Wt.merge0_norm, &Wt.merge1_norm};
    const LinearW *mr[2] = {&Wt.merge0_red, &Wt.merge1_red}, *ee[2] = {&Wt.expand1, &Wt.expand0},
                  *es[2] = {&Wt.skip1, &Wt.skip0};
    float *x[3] = {nullptr, nullptr, nullptr};
    {
        const int64_t nn[3] = {n0, n1, n2};
        const int cc[3] = {c0, c1, c2};
        for (int l = 0; l < 3; ++l) {
            std::vector<float> v((size_t)nn[l] * cc[l]);
            for (size_t i = 0; i < v.size(); ++i) v[i] = 4.f * ((float)((uint32_t)(i * 2654435761u) >> 8) / 16777216.f) - 2.f;
            if (up(v.data(), v.size() * 4, (void **)&x[l])) return 1;
        }
    }
    if (!ee[0]->b || !ee[1]->b || !es[0]->b || !es[1]->b) {
        std::fprintf(stderr, "denoise-cuda-bench: the expand / skip linears have no bias\n");
        return 1;
    }
    for (int i = 0; i < 2; ++i) {
        Merge &g = mg[i];
        const int K = 4 * g.C;
        std::vector<uint16_t> wp;
        std::vector<float> gp, bp;
        cuda::patch_tc::pack_merge(mr[i]->w, g.C, g.Co, mn[i]->g, mn[i]->b, &wp, &gp, &bp);
        const std::vector<uint16_t> w16 = bf(mr[i]->w, (size_t)g.Co * K);
        if (up(w16.data(), w16.size() * 2, (void **)&g.w16) || up(wp.data(), wp.size() * 2, (void **)&g.wp) ||
            up(mn[i]->g, K * 4, (void **)&g.g) || up(mn[i]->b, K * 4, (void **)&g.b) || up(gp.data(), K * 4, (void **)&g.gp) ||
            up(bp.data(), K * 4, (void **)&g.bp))
            return 1;
        g.x = x[i];
        Expand &e = ex[i];
        const int Ck = e.C2 / 4 + e.Cs;
        std::vector<uint16_t> wep, wsp;
        std::vector<float> bep;
        cuda::patch_tc::pack_expand(ee[i]->w, ee[i]->b, e.C, e.C2, es[i]->w, Ck, e.Co, &wep, &bep, &wsp);
        // the sequence's skip weight as Net uploads it: [Wu | Ws | Ws] over [d2s(up) | skip_hi | skip_lo]
        std::vector<float> wz((size_t)e.Co * (Ck + e.Cs));
        for (int n = 0; n < e.Co; ++n)
            for (int k = 0; k < Ck + e.Cs; ++k) wz[(size_t)n * (Ck + e.Cs) + k] = es[i]->w[(size_t)n * Ck + (k < Ck ? k : k - e.Cs)];
        const std::vector<uint16_t> we16 = bf(ee[i]->w, (size_t)e.C2 * e.C), be16 = bf(ee[i]->b, e.C2),
                                    ws16 = bf(wz.data(), wz.size());
        if (up(we16.data(), we16.size() * 2, (void **)&e.we16) || up(be16.data(), be16.size() * 2, (void **)&e.be16) ||
            up(ws16.data(), ws16.size() * 2, (void **)&e.ws16) || up(wep.data(), wep.size() * 2, (void **)&e.wep) ||
            up(wsp.data(), wsp.size() * 2, (void **)&e.wsp) || up(es[i]->b, e.Co * 4, (void **)&e.bs) ||
            up(bep.data(), e.C2 * 4, (void **)&e.bep))
            return 1;
        e.lo = x[2 - i];
        e.skip = x[1 - i];
    }
    // chunk buffers of the sequence (one chunk) and the two outputs
    const int64_t ea = std::max({n1 * 4 * c0, n2 * 4 * c1, n2 * c2, 4 * n2 * (ex[0].C2 / 4 + 2 * ex[0].Cs), n1 * c1,
                                 4 * n1 * (ex[1].C2 / 4 + 2 * ex[1].Cs)}),
                  eq = std::max(n2 * ex[0].C2, n1 * ex[1].C2), eo = std::max({n1 * mg[0].Co, 4 * n1 * ex[1].Co, 4 * n2 * ex[0].Co});
    cuda::bf16 *a = nullptr, *q = nullptr;
    float *out[2] = {nullptr, nullptr};
    CK(cuda::dev_alloc(ctx, (void **)&a, (size_t)ea * 2, "chunk a"));
    CK(cuda::dev_alloc(ctx, (void **)&q, (size_t)eq * 2, "chunk q"));
    for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, (size_t)eo * 4, "out"));
    auto run = [&](int op, int v) -> int {  // op 0, 1: merges, 2, 3: expands; v 0: sequence, 1: fused
        if (op < 2) {
            const Merge &g = mg[op];
            if (v) return cuda::patch_merge_tc(ctx, g.x, g.H, g.W, g.C, g.wp, g.gp, g.bp, g.Co, eps, out[1]);
            const int64_t nt = (int64_t)(g.H / 2) * (g.W / 2);
            int rc = cuda::merge_s2d_layernorm(ctx, g.x, g.H, g.W, g.C, g.g, g.b, eps, a);
            return rc ? rc : cuda::linear(ctx, a, nt, 4 * g.C, 4 * g.C, g.w16, nullptr, g.Co, out[0], true, g.Co, 0.f);
        }
        const Expand &e = ex[op - 2];
        const int Kz = e.C2 / 4 + 2 * e.Cs;
        if (v)
            return cuda::patch_expand_tc(ctx, e.lo, e.h, e.w, e.C, e.wep, e.bep, e.C2, e.skip, e.Cs, e.wsp, e.bs, e.Co, out[1]);
        const int64_t nt = (int64_t)e.h * e.w;
        int rc = cuda::cast_to_bf16(ctx, e.lo, nt * e.C, a);
        if (!rc) rc = cuda::linear(ctx, a, nt, e.C, e.C, e.we16, e.be16, e.C2, q, false, e.C2, 0.f);
        if (!rc) rc = cuda::d2s_concat(ctx, q, e.h, e.w, e.C2, e.skip, e.Cs, a);
        return rc ? rc : cuda::linear(ctx, a, 4 * nt, Kz, Kz, e.ws16, e.bs, e.Co, out[0], true, e.Co, 0.f);
    };
    cudaEvent_t ea_, eb_;
    CU(cudaEventCreate(&ea_));
    CU(cudaEventCreate(&eb_));
    int bad = 0;
    double tot[2] = {0, 0};
    for (int op = 0; op < 4; ++op) {
        std::vector<float> ms[2];
        for (int i = 0; i < 3 + iters; ++i)
            for (int v = 0; v < 2; ++v) {
                CU(cudaEventRecord(ea_, ctx.stream));
                CK(run(op, v));
                CU(cudaEventRecord(eb_, ctx.stream));
                CU(cudaEventSynchronize(eb_));
                float t = 0;
                CU(cudaEventElapsedTime(&t, ea_, eb_));
                if (i >= 3) ms[v].push_back(t);
            }
        int64_t nout;
        double gflop, gb;
        std::string what;
        if (op < 2) {
            const Merge &g = mg[op];
            nout = (int64_t)(g.H / 2) * (g.W / 2);
            gflop = 2.0 * nout * 4 * g.C * g.Co / 1e9;
            gb = (16.0 * g.C + 4.0 * g.Co) * nout / 1e9;
            what = std::string(g.name) + " C " + std::to_string(g.C) + "->" + std::to_string(g.Co);
            nout *= g.Co;
        } else {
            const Expand &e = ex[op - 2];
            const int64_t nl = (int64_t)e.h * e.w;
            gflop = (2.0 * e.C * e.C2 + 8.0 * (e.C2 / 4 + 2 * e.Cs) * e.Co) * nl / 1e9;  // skip map in two bf16 parts
            gb = (4.0 * e.C + 16.0 * e.Cs + 16.0 * e.Co) * nl / 1e9;
            what = std::string(e.name) + " C " + std::to_string(e.C) + "+" + std::to_string(e.Cs) + "->" + std::to_string(e.Co);
            nout = 4 * nl * e.Co;
        }
        std::vector<float> o0((size_t)nout), o1((size_t)nout);
        CU(cudaMemcpyAsync(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaMemcpyAsync(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        double num = 0, den = 0;
        for (size_t i = 0; i < o0.size(); ++i) {
            num += ((double)o1[i] - o0[i]) * ((double)o1[i] - o0[i]);
            den += (double)o0[i] * o0[i];
        }
        const double rel = den > 0 ? std::sqrt(num / den) : INFINITY;
        const bool ok = rel < 1e-2;  // NaN fails too
        bad |= !ok;
        double med[2];
        for (int v = 0; v < 2; ++v) {
            std::sort(ms[v].begin(), ms[v].end());
            med[v] = ms[v][ms[v].size() / 2];
            tot[v] += med[v];
        }
        std::printf("cuda-bench patch %5dx%-5d %-22s %7.2f GFLOP %7.3f GB | sequence %8.4f ms (min %.4f) | fused %8.4f ms "
                    "(min %.4f) %6.0f GB/s %6.1f TFLOP/s | %5.1fx | rel L2 %.1e%s\n",
                    W, H, what.c_str(), gflop, gb, med[0], ms[0][0], med[1], ms[1][0], gb / med[1] * 1e3, gflop / med[1],
                    med[0] / med[1], rel, ok ? "" : "  MISMATCH");
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " " + what + " sequence", med[0], 0, 0});
        g_rows.push_back({std::to_string(W) + "x" + std::to_string(H) + " " + what + " fused", med[1], 0, 0});
    }
    std::printf("cuda-bench patch %5dx%-5d all four: sequence %.4f ms, fused %.4f ms per frame (%.1fx)\n", W, H, tot[0], tot[1],
                tot[0] / tot[1]);
    std::fflush(stdout);
    cudaEventDestroy(ea_);
    cudaEventDestroy(eb_);
    cuda::ctx_destroy(ctx);
    return bad;
}

// The public API on `frames` yuv420p frames; memory CUDA uses the primary context and a stream.
// --fusion-conv: the input fusion conv alone (5 frames + sigma -> 32 channels, random bf16 frames
// and weights) on a token map of W x H: the direct form (CUDA cores) and the tensor-core implicit
// GEMM side by side in one run, each timed with CUDA events after 3 warm-ups, median of `iters`,
// interleaved; GFLOP = 2 x 9 x 61 x 32 per token (useful MACs), GB = the frames read once (5 x 24
// B per token) + the fp32 output written (128 B per token); and the largest difference between
// the two outputs (both fp32 accumulation of the same bf16 values: ~1e-5 expected).
int bench_fusion_conv(int w, int h, int iters) {
    const int nf = 5, Cin = 61, Co = 32;
    const size_t n = (size_t)w * h;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    std::vector<cuda::bf16 *> fr(nf);
    cuda::bf16 *wk = nullptr;
    float *bias = nullptr, *out[2] = {nullptr, nullptr};
    auto bf16_bits = [](uint32_t i, float scale) {  // a deterministic value in [-scale, scale) as bf16 bits
        const float v = scale * ((float)((i * 2654435761u) >> 8) / 8388608.f - 1.f);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return (uint16_t)(u >> 16);
    };
    {
        std::vector<uint16_t> host(n * 12);
        for (int k = 0; k < nf; ++k) {
            CK(cuda::dev_alloc(ctx, (void **)&fr[k], n * 12 * 2, "frames"));
            for (size_t i = 0; i < host.size(); ++i) host[i] = bf16_bits((uint32_t)(i + k * 7919), 1.f);
            CU(cudaMemcpy(fr[k], host.data(), host.size() * 2, cudaMemcpyHostToDevice));
        }
        std::vector<uint16_t> hw((size_t)9 * Cin * Co);
        for (size_t i = 0; i < hw.size(); ++i) hw[i] = bf16_bits((uint32_t)i + 1, 0.1f);
        std::vector<float> hb(Co);
        for (int o = 0; o < Co; ++o) hb[o] = 0.01f * o;
        CK(cuda::dev_alloc(ctx, (void **)&wk, hw.size() * 2, "weights"));
        CK(cuda::dev_alloc(ctx, (void **)&bias, Co * 4, "bias"));
        CU(cudaMemcpy(wk, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(bias, hb.data(), Co * 4, cudaMemcpyHostToDevice));
        for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, n * Co * 4, "out"));
        CU(cudaDeviceSynchronize());
    }
    using Fn = int (*)(cuda::Ctx &, const cuda::bf16 *const *, int, float, int, int, const cuda::bf16 *, const float *,
                       int, float *);
    const Fn fns[2] = {cuda::fusion_conv3x3_direct, cuda::fusion_conv3x3_tc};
    const char *names[2] = {"direct", "tensor-core"};
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<float> ms[2];
    for (int i = 0; i < 3 + iters; ++i)
        for (int v = 0; v < 2; ++v) {
            CU(cudaEventRecord(a, ctx.stream));
            CK(fns[v](ctx, (const cuda::bf16 *const *)fr.data(), nf, 20.f / 255.f, h, w, wk, bias, Co, out[v]));
            CU(cudaEventRecord(b, ctx.stream));
            CU(cudaEventSynchronize(b));
            float t = 0;
            CU(cudaEventElapsedTime(&t, a, b));
            if (i >= 3) ms[v].push_back(t);
        }
    double max_diff = 0, max_ref = 0;
    {
        std::vector<float> o0(n * Co), o1(n * Co);
        CU(cudaMemcpy(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < o0.size(); ++i) {
            const double d = std::fabs((double)o0[i] - o1[i]);
            max_diff = std::isfinite(d) ? std::max(max_diff, d) : INFINITY;
            max_ref = std::max(max_ref, (double)std::fabs(o0[i]));
        }
    }
    const double gflop = 2.0 * 9 * Cin * Co * n / 1e9, gb = (120.0 + 4.0 * Co) * n / 1e9;
    for (int v = 0; v < 2; ++v) {
        std::sort(ms[v].begin(), ms[v].end());
        const double med = ms[v][ms[v].size() / 2];
        std::printf("cuda-bench fusion-conv %5dx%-5d tokens %-11s %8.3f ms (min %.3f)  %6.2f GFLOP  %7.2f TFLOP/s  "
                    "%7.1f GB/s\n",
                    w, h, names[v], med, ms[v][0], gflop, gflop / med, gb / med * 1000.0);
        g_rows.push_back({"fusion conv " + std::to_string(w) + "x" + std::to_string(h) + " " + names[v], med,
                          1000.0 / med, ctx.peak / 1073741824.0});
    }
    std::printf("cuda-bench fusion-conv %5dx%-5d tokens max |direct - tensor-core| %.2e (max |out| %.2e)%s\n", w, h,
                max_diff, max_ref, max_diff <= 1e-3 * std::max(1.0, max_ref) ? "" : "  MISMATCH");
    std::fflush(stdout);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cuda::ctx_destroy(ctx);
    return max_diff <= 1e-3 * std::max(1.0, max_ref) ? 0 : 1;
}

// --head: the output head alone (3 feature maps of 32 channels -> 12, random bf16 features and
// weights, residual in [-1.2, 1.2]) on a token map of W x H, the change form the engine uses:
// the tensor-core kernel (head_conv3d_tc, the fused path's) and the two-pass head (three cuBLASLt
// GEMMs into G + head_stencil, in the backend's bands of 32 MiB of G: DENOISE_CUDA_FUSED=0's path)
// side by side in one run, each timed with CUDA events after 3 warm-ups, median of `iters`,
// interleaved; GFLOP = tensor-core FLOP issued (N padded to 16) and the conv's own (2 x 27 x 32 x
// 12 per token); GB = the least DRAM traffic of each form (ops.h head_conv3d_tc_bytes /
// head_two_pass_bytes: G written and read in the two-pass form); and the largest difference
// between the two outputs (both fp32 sums of the same bf16 products: ~1e-6 expected).
int bench_head(int w, int h, int iters) {
    const int Co = 12, Gc = 112, c0 = 32;
    const size_t n = (size_t)w * h;
    cuda::Ctx ctx;
    CK(cuda::ctx_create(ctx, 0, true));
    std::string why;
    if (cuda::head_conv3d_tc_supported(ctx.device, &why)) {
        std::fprintf(stderr, "denoise-cuda-bench: %s\n", why.c_str());
        cuda::ctx_destroy(ctx);
        return 1;
    }
    auto bf16_bits = [](uint32_t i, float scale) {  // a deterministic value in [-scale, scale) as bf16 bits
        const float v = scale * ((float)((i * 2654435761u) >> 8) / 8388608.f - 1.f);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return (uint16_t)(u >> 16);
    };
    cuda::bf16 *F[3], *wt[3], *wtc = nullptr, *res = nullptr;
    float *bias = nullptr, *G = nullptr, *out[2] = {nullptr, nullptr};
    const int band = (int)std::max<int64_t>(1, ((int64_t)32 << 20) / ((int64_t)w * Gc * 4) - 2);
    {
        std::vector<uint16_t> host(n * c0);
        for (int k = 0; k < 3; ++k) {
            CK(cuda::dev_alloc(ctx, (void **)&F[k], n * c0 * 2, "features"));
            for (size_t i = 0; i < host.size(); ++i) host[i] = bf16_bits((uint32_t)(i + k * 7919), 1.f);
            CU(cudaMemcpyAsync(F[k], host.data(), host.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
            CU(cudaStreamSynchronize(ctx.stream));
        }
        // PyTorch's head.weight (12, 32, 3, 3, 3), bf16-exact, packed for both forms
        std::vector<float> W((size_t)Co * c0 * 27);
        for (size_t i = 0; i < W.size(); ++i) {
            const uint32_t u = (uint32_t)bf16_bits((uint32_t)i + 1, 0.1f) << 16;
            std::memcpy(&W[i], &u, 4);
        }
        std::vector<uint16_t> hw((size_t)9 * 16 * 96);
        if (!cuda::head_conv3d_tc_pack(W.data(), Co, c0, hw.data())) return 1;
        CK(cuda::dev_alloc(ctx, (void **)&wtc, hw.size() * 2, "head weights (tensor-core)"));
        CU(cudaMemcpyAsync(wtc, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        for (int dt = 0; dt < 3; ++dt) {
            std::vector<uint16_t> m((size_t)Gc * c0, 0);
            for (int o = 0; o < Co; ++o)
                for (int ci = 0; ci < c0; ++ci)
                    for (int t = 0; t < 9; ++t) {
                        uint32_t u;
                        std::memcpy(&u, &W[(((size_t)o * c0 + ci) * 3 + dt) * 9 + t], 4);
                        m[((size_t)t * Co + o) * c0 + ci] = (uint16_t)(u >> 16);
                    }
            CK(cuda::dev_alloc(ctx, (void **)&wt[dt], m.size() * 2, "head weights (two-pass)"));
            CU(cudaMemcpyAsync(wt[dt], m.data(), m.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
            CU(cudaStreamSynchronize(ctx.stream));
        }
        std::vector<uint16_t> hr(n * Co);
        for (size_t i = 0; i < hr.size(); ++i) hr[i] = bf16_bits((uint32_t)i + 12345, 1.2f);
        CK(cuda::dev_alloc(ctx, (void **)&res, hr.size() * 2, "residual"));
        CU(cudaMemcpyAsync(res, hr.data(), hr.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
        std::vector<float> hb(Co);
        for (int o = 0; o < Co; ++o) hb[o] = 0.01f * o;
        CK(cuda::dev_alloc(ctx, (void **)&bias, Co * 4, "bias"));
        CU(cudaMemcpyAsync(bias, hb.data(), Co * 4, cudaMemcpyHostToDevice, ctx.stream));
        CK(cuda::dev_alloc(ctx, (void **)&G, (size_t)(std::min(band, h) + 2) * w * Gc * 4, "head band G"));
        for (auto &o : out) CK(cuda::dev_alloc(ctx, (void **)&o, n * Co * 4, "out"));
        CU(cudaStreamSynchronize(ctx.stream));
    }
    auto two_pass = [&]() -> int {
        for (int r0 = 0; r0 < h; r0 += band) {
            const int r1 = std::min(h, r0 + band), g0 = std::max(0, r0 - 1), g1 = std::min(h, r1 + 1);
            for (int dt = 0; dt < 3; ++dt)
                CK(cuda::linear(ctx, F[dt] + (size_t)g0 * w * c0, (int64_t)(g1 - g0) * w, c0, c0, wt[dt], nullptr, Gc, G,
                                true, Gc, dt ? 1.f : 0.f));
            CK(cuda::head_stencil(ctx, G, Gc, g0, h, w, r0, r1, bias, Co, res, out[1], true));
        }
        return 0;
    };
    auto tc = [&]() -> int {
        const cuda::bf16 *Fp[3] = {F[0], F[1], F[2]};
        CK(cuda::head_conv3d_tc(ctx, Fp, h, w, wtc, bias, Co, res, out[0], true));
        return 0;
    };
    const char *names[2] = {"tensor-core", "two-pass"};
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    std::vector<float> ms[2];
    for (int i = 0; i < 3 + iters; ++i)
        for (int v = 0; v < 2; ++v) {
            CU(cudaEventRecord(a, ctx.stream));
            if (v ? two_pass() : tc()) return 1;
            CU(cudaEventRecord(b, ctx.stream));
            CU(cudaEventSynchronize(b));
            float t = 0;
            CU(cudaEventElapsedTime(&t, a, b));
            if (i >= 3) ms[v].push_back(t);
        }
    double max_diff = 0, max_ref = 0;
    {
        std::vector<float> o0(n * Co), o1(n * Co);
        CU(cudaMemcpyAsync(o0.data(), out[0], o0.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaMemcpyAsync(o1.data(), out[1], o1.size() * 4, cudaMemcpyDeviceToHost, ctx.stream));
        CU(cudaStreamSynchronize(ctx.stream));
        for (size_t i = 0; i < o0.size(); ++i) {
            const double d = std::fabs((double)o0[i] - o1[i]);
            max_diff = std::isfinite(d) ? std::max(max_diff, d) : INFINITY;
            max_ref = std::max(max_ref, (double)std::fabs(o1[i]));
        }
    }
    const double gf_tc = cuda::head_conv3d_tc_flop((int64_t)n) / 1e9, gf = cuda::head_conv3d_flop((int64_t)n, Co) / 1e9;
    const double gb[2] = {cuda::head_conv3d_tc_bytes((int64_t)n, Co) / 1e9, cuda::head_two_pass_bytes((int64_t)n, Co) / 1e9};
    double med[2];
    for (int v = 0; v < 2; ++v) {
        std::sort(ms[v].begin(), ms[v].end());
        med[v] = ms[v][ms[v].size() / 2];
        std::printf("cuda-bench head %5dx%-5d tokens %-11s %8.3f ms (min %.3f)  %6.2f GFLOP (conv; %.2f issued on tensor "
                    "cores)  %7.2f TFLOP/s  %6.3f GB  %7.1f GB/s%s\n",
                    w, h, names[v], med[v], ms[v][0], gf, gf_tc, gf / med[v], gb[v], gb[v] / med[v] * 1000.0,
                    v ? (" (bands of " + std::to_string(band) + " rows)").c_str() : "");
        g_rows.push_back({"head " + std::to_string(w) + "x" + std::to_string(h) + " " + names[v], med[v], 1000.0 / med[v],
                          ctx.peak / 1073741824.0});
    }
    const bool ok = max_diff <= 1e-4 * std::max(1.0, max_ref);
    std::printf("cuda-bench head %5dx%-5d tokens tensor-core %.2fx faster; max |tensor-core - two-pass| %.2e (max |out| "
                "%.2e)%s\n",
                w, h, med[1] / med[0], max_diff, max_ref, ok ? "" : "  MISMATCH");
    std::fflush(stdout);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cuda::ctx_destroy(ctx);
    return ok ? 0 : 1;
}

int bench_api(const std::string &wpath, int W, int H, int frames, DenoiseMemory mem, int64_t cap) {
    const DenoisePixelFormat fmt = yuv420p();
    const int cw = (W + 1) / 2, ch = (H + 1) / 2;
    const bool dev = mem == DENOISE_MEMORY_CUDA;
    cudaStream_t st = nullptr;
    if (dev) CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = wpath.c_str();
    p.backend = DENOISE_BACKEND_CUDA;
    p.sigma = 20.f;
    p.width = W;
    p.height = H;
    p.format = fmt;
    p.memory = mem;
    p.cuda_stream = st;
    p.gpu_memory = cap;
    if (denoise_open(e, &p)) {
        std::fprintf(stderr, "denoise-cuda-bench: open: %s\n", denoise_last_error(e));
        denoise_free(&e);
        return 1;
    }
    // 8 distinct input frames, cycled; outputs into 2 frames
    const int K = 8;
    std::vector<uint8_t> hp[K][3], ho[2][3];
    std::vector<void *> dptr;
    DenoiseImage in[K], out[2];
    for (int k = 0; k < K + 2; ++k) {
        DenoiseImage &im = k < K ? in[k] : out[k - K];
        std::vector<uint8_t> *pl = k < K ? hp[k] : ho[k - K];
        fill_frame(pl, W, H, k);
        im = DenoiseImage{};
        im.color = bt709();
        for (int q = 0; q < 3; ++q) {
            im.linesize[q] = q ? cw : W;
            if (dev) {
                void *d = nullptr;
                CU(cudaMalloc(&d, pl[q].size()));
                CU(cudaMemcpy(d, pl[q].data(), pl[q].size(), cudaMemcpyHostToDevice));
                dptr.push_back(d);
                im.data[q] = (uint8_t *)d;
            } else {
                im.data[q] = pl[q].data();
            }
        }
    }
    CU(cudaDeviceSynchronize());  // the device frames' uploads have landed (see above)
    (void)ch;
    const int warm = cap ? 2 : 6, lat = denoise_latency(e);
    int pulled = 0, rc = 0;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    for (int f = 0; f < frames + warm + lat && !rc; ++f) {
        if ((rc = denoise_push(e, &in[f % K]))) break;
        int q;
        while ((q = denoise_pull(e, &out[pulled & 1])) == 0)
            if (++pulled == warm) {
                if (dev) cudaStreamSynchronize(st);
                t0 = std::chrono::steady_clock::now();
            }
        if (q != DENOISE_EAGAIN) rc = q;
    }
    if (dev) cudaStreamSynchronize(st);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int n = pulled - warm;
    const int64_t peak = denoise_gpu_memory_peak(e);
    if (rc) std::fprintf(stderr, "denoise-cuda-bench: api: rc %d: %s\n", rc, denoise_last_error(e));
    denoise_free(&e);
    for (void *d : dptr) cudaFree(d);
    if (st) cudaStreamDestroy(st);
    if (rc || n <= 0) return 1;
    const double ms = 1000.0 * sec / n;
    char label[96];
    const char *g = std::getenv("DENOISE_CUDA_GRAPH");
    std::snprintf(label, sizeof label, "%dx%d api-%s%s%s", W, H, dev ? "cuda" : "host",
                  cap ? (" cap " + std::to_string(cap >> 20) + " MiB").c_str() : "",
                  g && !std::strcmp(g, "0") ? " stream launches" : "");
    std::printf("cuda-bench %-32s %8.3f ms/frame  %8.2f frames/s  engine GPU memory peak %.0f MiB (%d frames, wall "
                "clock)\n",
                label, ms, 1000.0 / ms, peak / 1048576.0, n);
    std::fflush(stdout);
    g_rows.push_back({label, ms, 1000.0 / ms, peak / 1073741824.0});
    return 0;
}

// The backend's memory plan (no GPU needed: planning is arithmetic).
void print_plans(const Model &M, int W, int H) {
    DenoisePixelFormat p010 = yuv420p();
    p010.bytes = 2;
    for (int c = 0; c < 3; ++c) p010.comp[c] = {c ? 1 : 0, c == 2 ? 2 : 0, c ? 4 : 2, 6, 10};
    const int m = M.cfg.pad_multiple;
    for (int f = 0; f < 2; ++f)
        for (DenoiseMemory mem : {DENOISE_MEMORY_HOST, DENOISE_MEMORY_CUDA})
            for (int64_t cap : {(int64_t)DENOISE_GPU_MEMORY_DEFAULT, (int64_t)2048 << 20}) {
                StreamSpec s;
                s.width = W;
                s.height = H;
                s.hp = (H + m - 1) / m * m;
                s.wp = (W + m - 1) / m * m;
                s.format = f ? p010 : yuv420p();
                s.cw = (W + 1) / 2;
                s.ch = (H + 1) / 2;
                s.memory = mem;
                s.gpu_memory = cap;
                std::string err;
                int code = 0;
                std::unique_ptr<Backend> b = cuda_backend_new(M, s, &err, &code);
                CudaPlanInfo info;
                std::printf("plan %5dx%-5d %-8s %-4s cap %5lld MiB: %s\n", W, H, f ? "p010le" : "yuv420p",
                            mem == DENOISE_MEMORY_HOST ? "host" : "cuda", (long long)(cap >> 20),
                            b && cuda_backend_plan(*b, &info) ? info.text.c_str() : err.c_str());
            }
}

}  // namespace

int main(int argc, char **argv) {
    std::string wpath = "weights/denoise-v2.safetensors";
    int iters = 30, frames = 30;
    std::string sizes = "960x540,1920x1080,3840x2160";
    std::map<std::string, int64_t> caps;
    bool plans = false, fusion_conv = false, head = false, patch = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--plans") plans = true;
        else if (a == "--fusion-conv") fusion_conv = true;
        else if (a == "--head") head = true;
        else if (a == "--patch") patch = true;
        else if (a == "--weights" && i + 1 < argc) wpath = argv[++i];
        else if (a == "--iters" && i + 1 < argc) iters = std::max(3, std::atoi(argv[++i]));
        else if (a == "--frames" && i + 1 < argc) frames = std::max(4, std::atoi(argv[++i]));
        else if (a == "--sizes" && i + 1 < argc) sizes = argv[++i];
        else if (a == "--cap" && i + 1 < argc) {
            std::string v = argv[++i];
            const size_t e = v.find('=');
            if (e == std::string::npos) {
                std::fprintf(stderr, "denoise-cuda-bench: --cap WxH=MIB\n");
                return 2;
            }
            caps[v.substr(0, e)] = (int64_t)std::atoll(v.c_str() + e + 1) << 20;
        } else {
            std::fprintf(stderr, "usage: denoise-cuda-bench [--plans | --fusion-conv | --head | --patch] [--weights FILE] [--iters N] [--frames N] "
                                 "[--sizes WxH,...] [--cap WxH=MIB]...\n");
            return 2;
        }
    }
    std::vector<std::pair<int, int>> dims;
    for (size_t pos = 0; pos < sizes.size();) {
        size_t q = sizes.find(',', pos);
        std::string s = sizes.substr(pos, q == std::string::npos ? std::string::npos : q - pos);
        pos = q == std::string::npos ? sizes.size() : q + 1;
        int w = 0, h = 0;
        if (std::sscanf(s.c_str(), "%dx%d", &w, &h) != 2 || w < 1 || h < 1) {
            std::fprintf(stderr, "denoise-cuda-bench: bad size %s\n", s.c_str());
            return 2;
        }
        dims.push_back({w, h});
    }
    if (plans) {
        Model M;
        std::string err;
        if (!load_model(wpath, &M, &err)) {
            std::fprintf(stderr, "denoise-cuda-bench: %s\n", err.c_str());
            return 1;
        }
        for (auto &d : dims) print_plans(M, d.first, d.second);
        return 0;
    }
    std::string why;
    if (cuda_probe(0, &why)) {
        std::fprintf(stderr, "denoise-cuda-bench: no usable GPU: %s\n", why.c_str());
        return 77;
    }
    if (fusion_conv || head) {
        int rc = 0;
        for (auto &d : dims) rc |= fusion_conv ? bench_fusion_conv(d.first, d.second, iters) : bench_head(d.first, d.second, iters);
        std::printf("\ncuda-bench summary\n%-36s %10s\n", "measure", "ms");
        for (const Row &r : g_rows) std::printf("%-36s %10.3f\n", r.what.c_str(), r.ms);
        return rc;
    }
    std::printf("%s; weights %s; kernels: CUDA events, median of %d after 3 warm-ups; api: %d frames after 6 (capped: 4 after 2)\n",
                why.c_str(), wpath.c_str(), iters, frames);
    Model M;
    std::string err;
    if (!load_model(wpath, &M, &err)) {
        std::fprintf(stderr, "denoise-cuda-bench: %s\n", err.c_str());
        return 1;
    }
    int rc = 0;
    if (patch) {
        for (auto &d : dims) rc |= bench_patch(M, d.first, d.second, iters);
        rc |= bench_ceilings(iters);
        for (auto &d : dims) rc |= bench_kernels(M, d.first, d.second, iters);
        std::printf("\ncuda-bench summary\n%-44s %10s\n", "measure", "ms");
        for (const Row &r : g_rows) std::printf("%-44s %10.3f\n", r.what.c_str(), r.ms);
        return rc;
    }
    rc |= bench_ceilings(iters);
    for (auto &d : dims) {
        const int w = d.first, h = d.second;
        auto cap = caps.find(std::to_string(w) + "x" + std::to_string(h));
        const int64_t c = cap == caps.end() ? 0 : cap->second;
        if (!c) rc |= bench_align(M, w, h, iters);
        if (!c) rc |= bench_kernels(M, w, h, iters);
        rc |= bench_api(wpath, w, h, c ? 4 : frames, DENOISE_MEMORY_CUDA, c);
        if (!c) {  // the same without CUDA graphs (the backend reads DENOISE_CUDA_GRAPH when it is made)
            setenv("DENOISE_CUDA_GRAPH", "0", 1);
            rc |= bench_api(wpath, w, h, frames, DENOISE_MEMORY_CUDA, c);
            unsetenv("DENOISE_CUDA_GRAPH");
        }
        rc |= bench_api(wpath, w, h, c ? 4 : frames, DENOISE_MEMORY_HOST, c);
    }
    std::printf("\ncuda-bench summary\n%-40s %10s %10s %12s\n", "measure", "ms/frame", "frames/s", "GPU GiB");
    for (const Row &r : g_rows) std::printf("%-40s %10.3f %10.2f %12.2f\n", r.what.c_str(), r.ms, r.fps, r.gib);
    if (!g_paths.empty()) {
        std::printf("cuda-bench Swin-block paths, kernel-only ms per frame (medians)\n%-12s %10s %14s %8s\n", "frame",
                    "fused", "correct-first", "speedup");
        for (const PathRow &r : g_paths)
            std::printf("%-12s %10.3f %14.3f %7.2fx\n", (std::to_string(r.W) + "x" + std::to_string(r.H)).c_str(), r.fused,
                        r.correct_first, r.correct_first / r.fused);
    }
    return rc;
}
