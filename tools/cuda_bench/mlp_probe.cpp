// denoise-cuda-bench --mlp-probe: the Hopper MLP probe (kernels/cuda/swin_mlp_wgmma.cu: the MLP half
// of a Swin block on wgmma, sm_90a) timed against what it would replace, on the token grids of a
// 3840x2160 frame (padded to 3840x2176): level 0 1920x1088 (2,088,960 tokens), level 1 960x544,
// level 2 480x272, and a map of 32 MB (C 64: 512x256 tokens, C 128: 256x256) that stays in L2
// between launches (the compute rate without DRAM). For C 64 and C 128, per grid:
//  - every wgmma kernel built (hidden chunk, consumer warpgroups, tanh form): ms, TFLOP/s of the
//    MLP's two GEMMs (16 C^2 per token) and their share of this run's cuBLASLt bf16 GEMM ceiling,
//    GB/s of the residual stream (8 C bytes per token) and its share of the copy ceiling;
//  - cuBLASLt doing the same two GEMMs alone (fc1 bf16 -> bf16 with bias, fc2 bf16 -> fp32 added
//    to x with bias: no LayerNorm, no GELU): what the tensor-core library reaches on these shapes;
//  - the correct-first MLP sequence (layernorm_rows, fc1, gelu_tanh, fc2: swin_block_dev.h's
//    unfused_mlp), what DENOISE_CUDA_FUSED=0 runs;
//  - the fused block (the engine's kernel for the width, shift 0) on a map of the same tokens, and
//    its MLP share estimated as its time x the MLP's FLOP share of the block (16 C^2 of
//    24 C^2 + 256 C: 57 % at C 64, 62 % at C 128), which a timing cannot isolate: the block's
//    phases run in one kernel.
// CUDA events after 3 warm-ups, median (and min) of --iters; every call updates x in place (the
// work does not depend on the values). A median far above its min is marked '!' and counted.
// The probe's checks are tests/gpu/mlp_wgmma_check.cpp's. Exit 77 on a GPU that is not compute
// capability 9.0 (or a build without sm_90a), with the reason.
#include <map>

#include "cuda_bench.h"
#include "cuda/swin_block_desc.h"
#include "cuda/swin_block_fused.h"
#include "cuda/swin_mlp_wgmma.h"
#include "dev_timing.h"

namespace cuda_bench {

int bench_mlp_probe(int iters) {
    std::string why;
    if (swin_mlp_wgmma_supported(0, &why)) {
        std::printf("mlp-probe: %s\n", why.c_str());
        return 77;
    }
    if (bench_ceilings(iters)) return 1;
    ok_or_die(ctx_create(g_ctx, 0, true), "ctx_create");
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, g_ctx.device), "cudaGetDeviceProperties");
    std::printf("mlp-probe: %s, %d SMs; x += fc2(GELU(fc1(LN2(x)))) on (n, C) fp32 in place; ms = median of %d after 3 "
                "warm-ups; GEMM ceiling %.0f TFLOP/s, copy %.0f GB/s (this run)\n",
                prop.name, prop.multiProcessorCount, iters, g_gemm_tflops, g_copy_gbs);
    // the last grid: 32 MB of fp32 map, which stays in the 50 / 60 MB L2 of an H100 / H200 between launches
    const struct {
        const char *name;
        int W, H;
    } grids64[] = {{"L0", 1920, 1088}, {"L1", 960, 544}, {"L2", 480, 272}, {"L2-res", 512, 256}},
      grids128[] = {{"L0", 1920, 1088}, {"L1", 960, 544}, {"L2", 480, 272}, {"L2-res", 256, 256}};
    struct Sum {
        int C;
        const char *grid;
        int64_t n;
        std::string best;
        double wgmma = 0, gemms = 0, seq = 0, block = 0, block_mlp = 0, floor = 0;
    };
    std::vector<Sum> sums;
    for (int C : {64, 128}) {
        const auto &grids = C == 64 ? grids64 : grids128;
        const int heads = C / 32, Ch = 4 * C;
        swin_ref::RandomBlock rb(C, heads, 0, 7100 + C);
        swin_dev::DevBlock B(rb);
        std::map<int, uint8_t *> images;  // by hidden chunk
        for (const SwinMlpKernel &k : swin_mlp_kernels(C))
            if (!images.count(k.HC)) ok_or_die(swin_mlp_image_upload(g_ctx, rb.w, C, k.HC, &images[k.HC], nullptr), "swin_mlp_image_upload");
        const int64_t nmax = (int64_t)grids[0].W * grids[0].H;
        Dev x(4 * (size_t)nmax * C);
        fill_repeated(x, nmax, C, 65536, 7200 + C);
        SeqWs ws(1, nmax, C);
        Dev b1h(2 * (size_t)Ch);  // fc1's bias in bf16, for the bf16-out GEMM
        {
            const std::vector<uint16_t> h = bf16_of(rb.fc1b.data(), rb.fc1b.size());
            upload(b1h, h.data(), 2 * h.size());
        }
        ok_or_die(unfused_mlp(B, x.as<float>(), nmax, ws), "correct-first MLP sequence");  // the GEMMs' inputs: real values
        std::printf("\nC %d (hidden %d), GFLOP of the MLP per grid: L0 %.2f L1 %.2f L2 %.2f\n", C, Ch,
                    swin_mlp_flop(C, nmax) / 1e9, swin_mlp_flop(C, (int64_t)grids[1].W * grids[1].H) / 1e9,
                    swin_mlp_flop(C, (int64_t)grids[2].W * grids[2].H) / 1e9);
        for (const SwinMlpKernel &k : swin_mlp_kernels(C)) {
            SwinMlpKernelInfo info;
            ok_or_die(swin_mlp_kernel_info(g_ctx, k, &info), "swin_mlp_kernel_info");
            const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.tanh);
            std::printf("  kernel %-16s %6.1f KB shared memory, %3d threads, %3d registers at launch (consumers %d), local %d B, "
                        "%d CTA/SM, weights %s\n",
                        swin_mlp_kernel_name(k).c_str(), k.smem / 1024.0, P.threads, info.registers, P.regs_consumer,
                        info.local_bytes, info.ctas_per_sm, P.resident ? "resident" : "streamed");
        }
        for (const auto &g : grids) {
            const int64_t n = (int64_t)g.W * g.H;
            const double gf = swin_mlp_flop(C, n) / 1e9, gb = 8.0 * C * (double)n / 1e9;
            Sum s{C, g.name, n};
            s.floor = gb / g_copy_gbs * 1e3;
            auto line = [&](const char *what, const std::string &name, const Stat &t, double flop_gf) {
                const double tf = flop_gf / t.med;
                std::printf("time%s C %3d %-6s %8lld tokens  %-9s %-16s %8.4f ms (min %.4f) %6.1f TFLOP/s (%4.1f%% of GEMM "
                            "ceiling) %6.0f GB/s (%4.1f%% of copy)\n",
                            t.flag(), C, g.name, (long long)n, what, name.c_str(), t.med, t.min, tf, 100.0 * tf / g_gemm_tflops,
                            gb / t.med * 1e3, 100.0 * gb / t.med * 1e3 / g_copy_gbs);
            };
            for (const SwinMlpKernel &k : swin_mlp_kernels(C)) {
                const Stat t = time_ms(iters, [&] { return swin_mlp_wgmma(g_ctx, k, images[k.HC], kEps, x.as<float>(), n); });
                line("wgmma", swin_mlp_kernel_name(k), t, gf);
                if (s.wgmma == 0 || t.med < s.wgmma) {
                    s.wgmma = t.med;
                    s.best = swin_mlp_kernel_name(k);
                }
            }
            const bf16 *tb = ws.tb.as<bf16>();
            bf16 *hid = ws.hid.as<bf16>();
            const Stat tg = time_ms(iters, [&] {
                int rc = linear(g_ctx, tb, n, C, C, B.fc1_w, b1h.p, Ch, hid, false, Ch, 0.f);
                if (!rc) rc = linear(g_ctx, hid, n, Ch, Ch, B.fc2_w, B.fc2_b32, C, x.as<float>(), true, C, 1.f);
                return rc;
            });
            line("cuBLASLt", "fc1 + fc2 alone", tg, gf);
            s.gemms = tg.med;
            const Stat tq = time_ms(iters, [&] { return unfused_mlp(B, x.as<float>(), n, ws); });
            line("sequence", "correct-first", tq, gf);
            s.seq = tq.med;
            const Stat tb_ = time_ms(iters, [&] {
                return swin_block_fused(g_ctx, B.image, C, heads, kEps, x.p, false, g.H, g.W, 0, nullptr);
            });
            line("fused", "whole block", tb_, swin_block_flop(C, n) / 1e9);
            s.block = tb_.med;
            s.block_mlp = tb_.med * (double)swin_mlp_flop(C, n) / (double)swin_block_flop(C, n);
            sums.push_back(s);
            std::fflush(stdout);
        }
        for (auto &im : images) dev_free(g_ctx, im.second);
    }
    std::printf("\nmlp-probe summary (ms, medians; 'fused MLP est.' = the fused block's time x the MLP's FLOP share; "
                "DRAM floor = 8 C bytes per token at this run's copy rate)\n");
    std::printf("%-5s %-6s %9s | %-16s %8s %7s %6s | %9s %9s %9s %10s | %9s | %7s %7s %7s\n", "C", "grid", "tokens", "best wgmma",
                "ms", "TF/s", "%ceil", "cuBLASLt", "sequence", "fused blk", "fused MLP", "DRAM flr", "x GEMMs", "x seq",
                "x fused");
    for (const Sum &s : sums) {
        const double tf = swin_mlp_flop(s.C, s.n) / 1e9 / s.wgmma;
        std::printf("%-5d %-6s %9lld | %-16s %8.4f %7.1f %5.1f%% | %9.4f %9.4f %9.4f %10.4f | %9.4f | %6.2fx %6.2fx %6.2fx\n", s.C,
                    s.grid, (long long)s.n, s.best.c_str(), s.wgmma, tf, 100.0 * tf / g_gemm_tflops, s.gemms, s.seq, s.block,
                    s.block_mlp, s.floor, s.gemms / s.wgmma, s.seq / s.wgmma, s.block_mlp / s.wgmma);
    }
    std::printf("('x GEMMs' > 1: the probe beats cuBLASLt's two GEMMs alone; 'x fused' > 1: it beats the fused block's "
                "estimated MLP share)\n");
    std::printf("\ntiming: %d of %d measurements contended (median > 1.3 x min and > 0.5 ms above it)\n", g_contended, g_timed);
    ctx_destroy(g_ctx);
    return 0;
}

}  // namespace cuda_bench
