// denoise-cuda-bench: the kernels lines (bench_kernels): one output frame's GPU work as the backend
// runs it, both Swin-block paths, the per-op split, the roofline table and the frame as a CUDA graph.
#include "cuda_bench.h"

namespace cuda_bench {

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
// lo, docs/journal/2026-12-07-cuda-engine-gpu-runs.md) and so issues more MMAs than counted here.
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
        *flop = cuda::head_conv3d_flop(n0, c.head_out_channels(), c.channels[0]);
        *bytes = cuda::head_conv3d_tc_bytes(n0, c.head_out_channels(), c.channels[0]);
        return true;
    }
    // a kind names its width: levels of the same width (wide64's 64/64/128) share it, so the
    // terms of every level it covers add up
    bool found = false;
    for (int l = 0; l < 3; ++l) {
        const double C = ch[l];
        const std::string cs = " C " + std::to_string((int)C);
        if (kind == "Swin block fused" + cs) {
            *flop += 2 * blocks[l] * n[l] * (4 * C * C + 2 * r * C * C + 2 * N * C);
            *bytes += blocks[l] * n[l] * 8 * C - (l == 0 ? n[0] * c0 * 2 : 0);
            found = true;
        }
        if (l < 2 && kind == "patch merge fused" + cs) {
            *flop += 2 * n[l + 1] * 4 * C * ch[l + 1];
            *bytes += n[l] * C * 4 + n[l + 1] * ch[l + 1] * 4;
            found = true;
        }
        if (l > 0 && kind == "patch expand fused" + cs) {
            *flop += 2 * (n[l] * C * 4 * ch[l - 1] + n[l - 1] * 2 * ch[l - 1] * ch[l - 1]);
            *bytes += n[l] * C * 4 + 2 * n[l - 1] * ch[l - 1] * 4;
            found = true;
        }
    }
    return found;
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
        const double hgf = cuda::head_conv3d_flop(tok, hc, c0) / 1e9;
        const double hms[2] = {get(0, "head tensor-core conv3d") + get(0, "head temporal GEMM") + get(0, "head stencil"),
                               get(1, "head tensor-core conv3d") + get(1, "head temporal GEMM") + get(1, "head stencil")};
        const bool tch[2] = {get(0, "head tensor-core conv3d") > 0, get(1, "head tensor-core conv3d") > 0};
        for (int path = 0; path < 2; ++path) {
            const double gb =
                (tch[path] ? cuda::head_conv3d_tc_bytes(tok, hc, c0) : cuda::head_two_pass_bytes(tok, hc, c0)) / 1e9;
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
        const double u = bf16_host::to_float(Fh[0][i]), v = bf16_host::to_float(Fh[1][i]);
        num += (u - v) * (u - v);
        den += v * v;
    }
    std::printf("cuda-bench %5dx%-5d fused vs correct-first: %.2fx faster, features F rel L2 %.2e (bf16 roundings "
                "only; the CPU comparison is tests/gpu/network_check's)\n",
                W, H, med[1] / med[0], den > 0 ? std::sqrt(num / den) : std::sqrt(num));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    net.destroy(ctx);
    cuda::ctx_destroy(ctx);
    return 0;
}

}  // namespace cuda_bench
