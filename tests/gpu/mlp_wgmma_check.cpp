// mlp_wgmma_check: the Hopper MLP probe (kernels/cuda/swin_mlp_wgmma.cu: x += fc2(GELU(fc1(LN2(x))))
// on wgmma, sm_90a) on a GPU of compute capability 9.0; elsewhere it prints SKIP and exits 77.
// Built with the CUDA engine; run by tools/device_gpu.sh mlp-probe and tests/run_tests.sh (--quick).
// Not GoogleTest: one line per check, the last line "N passed, N failed". Its timings are
// denoise-cuda-bench --mlp-probe's (tools/cuda_bench/mlp_probe.cpp).
//
// Checks, for every kernel built (SWIN_MLP_WGMMA_KERNELS: C 64 / 128, hidden chunk, consumer
// warpgroups, tanh form), each on fresh random inputs x ~ N(0, 1) and a fresh random block scaled
// like trained ones (tests/common/swin_ref.h):
//  1. against the CPU fp32 reference of LN2 + fc1 + GELU_tanh + fc2 + residual (kernels/cpu ops,
//     as unet.cpp runs them): token counts 1, 63, 64, 65 (partial tiles), 1000 on a grid of one
//     and of three CTAs (many rounds, consumers without a tile in the last one), 8,448 (one round
//     of every CTA at 132 SMs) and, in full mode, 33,000 and the 4K frame's level-1 (C 64:
//     522,240 tokens) or level-2 (C 128: 130,560) grid. The map sits between guard bands of 0xFF
//     bytes (NaN) that must stay untouched; every token must come back changed (written); pass:
//     all finite, relative L2 of the output < 1e-2 and of the MLP's change < 1e-2 (the bf16
//     roundings of the LN output and of the hidden units give about 3.4e-3: the CPU emulation of
//     the kernel in tests/unit/swin_mlp_wgmma_test.cpp), max abs printed;
//  2. against the correct-first MLP sequence on the GPU (layernorm_rows, cuBLASLt fc1, gelu_tanh,
//     cuBLASLt fc2: swin_block_dev.h's unfused_mlp), which rounds at the same two points: change
//     rel L2 < 5e-3;
//  3. the grid does not change the result: one, three and 17 CTAs give the default grid's output
//     bit for bit (which CTA and consumer warpgroup takes a tile, and which weight stage holds a
//     chunk, must not matter), and a second run repeats it;
//  4. bad calls refused with DENOISE_EINVAL and a message; n = 0 does nothing.
// Usage: mlp_wgmma_check [--quick]   (--quick: the small token counts; for compute-sanitizer)
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU or not compute capability 9.0.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check_tally.h"
#include "cpu/ops.h"
#include "cuda/ops.h"
#include "cuda/swin_mlp_wgmma.h"
#include "denoise.h"
#include "swin_block_dev.h"
#include "swin_ref.h"

using namespace denoise;
using namespace denoise::cuda;
using check_tally::result;

namespace {

using namespace swin_dev;

std::string kname(const SwinMlpKernel &k) { return "C " + std::to_string(k.C) + " " + swin_mlp_kernel_name(k); }

// x (n, C) += the MLP, on the CPU in fp32 (kernels/cpu ops, as kernels/cpu/unet.cpp's block)
void reference_mlp(const BlockW &B, int C, std::vector<float> &x, int64_t n) {
    std::vector<float> ln((size_t)n * C), hid((size_t)n * 4 * C);
    cpu::layernorm(x.data(), ln.data(), n, C, B.norm2.g, B.norm2.b, kEps, x.data(), B.fc2.b);
    cpu::linear(ln.data(), n, C, C, B.fc1.w, C, nullptr, 4 * C, hid.data(), 0.f);
    cpu::gelu_tanh(hid.data(), n, 4 * C, B.fc1.b);
    cpu::linear(hid.data(), n, 4 * C, 4 * C, B.fc2.w, 4 * C, nullptr, C, x.data(), 1.f);
}

struct Image {
    uint8_t *p = nullptr;
    Image(const swin_ref::RandomBlock &rb, int HC) {
        ok_or_die(swin_mlp_image_upload(g_ctx, rb.w, rb.C, HC, &p, nullptr), "swin_mlp_image_upload");
    }
    ~Image() { dev_free(g_ctx, p); }
};

// Waits for the compute stream at most `seconds`: a kernel that does not finish is a pipeline that
// waits on a barrier no one completes; the context cannot be used after that, so the program ends
// with the FAIL line (and tools/device_gpu.sh skips the timings).
void sync_or_hang(const std::string &what, double seconds = 20) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        const cudaError_t e = cudaStreamQuery(g_ctx.stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) ck(e, what.c_str());
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) {
            result(false, "%s did not finish within %.0f s: a hang (a barrier phase never completes)", what.c_str(), seconds);
            std::printf("%d passed, %d failed\n", check_tally::n_pass, check_tally::n_fail);
            std::fflush(stdout);
            std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// x0 through kernel k on a guarded map -> *out; guards intact?
bool run_probe(const SwinMlpKernel &k, const Image &img, const std::vector<float> &x0, int64_t n, int max_ctas,
               std::vector<float> *out) {
    GuardedMap m(4 * x0.size());
    h2d(m.map(), x0.data(), 4 * x0.size());
    ok_or_die(swin_mlp_wgmma(g_ctx, k, img.p, kEps, static_cast<float *>(m.map()), n, max_ctas), "swin_mlp_wgmma");
    sync_or_hang("wgmma MLP " + kname(k) + " n " + std::to_string(n) + " on " +
                 (max_ctas ? std::to_string(max_ctas) + " CTA(s)" : std::string("all SMs")));
    out->resize(x0.size());
    d2h(out->data(), m.map(), 4 * x0.size());
    return m.guards_intact();
}

int64_t unchanged_tokens(const std::vector<float> &out, const std::vector<float> &in, int C) {
    int64_t u = 0;
    for (size_t t = 0; t < in.size() / C; ++t)
        if (std::memcmp(&out[t * C], &in[t * C], 4 * C) == 0) ++u;
    return u;
}

void check_vs_cpu(const SwinMlpKernel &k, int64_t n, int max_ctas, uint32_t seed) {
    const int C = k.C;
    swin_ref::RandomBlock rb(C, C / 32, 0, seed);
    Image img(rb, k.HC);
    const std::vector<float> x0 = swin_ref::random_map((size_t)n * C, seed + 1);
    std::vector<float> ref = x0, out;
    reference_mlp(rb.w, C, ref, n);
    const bool guards = run_probe(k, img, x0, n, max_ctas, &out);
    const swin_ref::Error e = swin_ref::compare(out.data(), ref.data(), x0.data(), (int64_t)ref.size());
    const int64_t same = unchanged_tokens(out, x0, C);
    const bool ok = e.nonfinite == 0 && e.ref_nonfinite == 0 && e.rel_l2 < 1e-2 && e.delta_rel_l2 < 1e-2 && guards && same == 0;
    char grid[32] = "all SMs";
    if (max_ctas > 0) std::snprintf(grid, sizeof grid, "%d CTAs", max_ctas);
    result(ok,
           "wgmma MLP %-18s n %-7lld (%s) vs CPU: rel L2 %.2e (< 1e-2), change rel L2 %.2e (< 1e-2), max abs %.2e, "
           "non-finite %lld, unwritten tokens %lld, guards %s",
           kname(k).c_str(), (long long)n, grid, e.rel_l2, e.delta_rel_l2, e.max_abs, (long long)e.nonfinite, (long long)same,
           guards ? "intact" : "WRITTEN");
}

void check_vs_sequence(const SwinMlpKernel &k, int64_t n, uint32_t seed) {
    const int C = k.C;
    swin_ref::RandomBlock rb(C, C / 32, 0, seed);
    Image img(rb, k.HC);
    DevBlock B(rb);
    const std::vector<float> x0 = swin_ref::random_map((size_t)n * C, seed + 1);
    std::vector<float> out, seq(x0.size());
    run_probe(k, img, x0, n, 0, &out);
    Dev x(4 * x0.size());
    upload(x, x0.data(), 4 * x0.size());
    SeqWs ws(1, n, C);
    ok_or_die(unfused_mlp(B, x.as<float>(), n, ws), "correct-first MLP sequence");
    d2h(seq.data(), x.p, 4 * x0.size());
    const swin_ref::Error e = swin_ref::compare(out.data(), seq.data(), x0.data(), (int64_t)seq.size());
    result(e.nonfinite == 0 && e.ref_nonfinite == 0 && e.delta_rel_l2 < 5e-3,
           "wgmma MLP %-18s n %-7lld vs the correct-first sequence: change rel L2 %.2e (< 5e-3), max abs %.2e",
           kname(k).c_str(), (long long)n, e.delta_rel_l2, e.max_abs);
}

void check_grids_agree(const SwinMlpKernel &k, int64_t n, uint32_t seed) {
    const int C = k.C;
    swin_ref::RandomBlock rb(C, C / 32, 0, seed);
    Image img(rb, k.HC);
    const std::vector<float> x0 = swin_ref::random_map((size_t)n * C, seed + 1);
    std::vector<float> ref, out;
    bool guards = run_probe(k, img, x0, n, 0, &ref);
    std::string detail;
    int64_t differ_all = 0;
    for (int ctas : {1, 3, 17, 0}) {
        guards = run_probe(k, img, x0, n, ctas, &out) && guards;
        int64_t differ = 0;
        for (size_t i = 0; i < out.size(); ++i) differ += std::memcmp(&out[i], &ref[i], 4) != 0;
        differ_all += differ;
        detail += (detail.empty() ? "" : ", ") + (ctas ? std::to_string(ctas) + " CTAs" : std::string("again")) + " " +
                  std::to_string(differ);
    }
    result(differ_all == 0 && guards, "wgmma MLP %-18s n %-7lld grids agree bit for bit with the default grid: values differing: %s; guards %s",
           kname(k).c_str(), (long long)n, detail.c_str(), guards ? "intact" : "WRITTEN");
}

void check_refusals() {
    const SwinMlpKernel k = swin_mlp_kernels(64).at(0);
    swin_ref::RandomBlock rb(64, 2, 0, 77);
    Image img(rb, k.HC);
    Dev x(4 * 64 * 64 + 16);
    fill(x.p, 0, x.bytes);
    float *xf = x.as<float>();
    struct Bad {
        const char *what;
        SwinMlpKernel k;
        const uint8_t *img;
        float *x;
        int64_t n;
        float eps;
    } bad[] = {
        {"null x", k, img.p, nullptr, 64, kEps},
        {"null image", k, nullptr, xf, 64, kEps},
        {"x not 16-byte aligned", k, img.p, reinterpret_cast<float *>(x.as<uint8_t>() + 4), 63, kEps},
        {"negative n", k, img.p, xf, -1, kEps},
        {"eps 0", k, img.p, xf, 64, 0.f},
        {"C 96 (no kernel built)", SwinMlpKernel{96, 64, 2, 0, 0}, img.p, xf, 64, kEps},
        {"C 64 hidden chunk 96 (no kernel built)", SwinMlpKernel{64, 96, 2, 0, 0}, img.p, xf, 64, kEps},
    };
    for (const Bad &b : bad) {
        g_ctx.err.clear();
        const int rc = swin_mlp_wgmma(g_ctx, b.k, b.img, b.eps, b.x, b.n);
        result(rc == DENOISE_EINVAL && !g_ctx.err.empty(), "refuses %s: rc %d, \"%s\"", b.what, rc, g_ctx.err.c_str());
    }
    g_ctx.err.clear();
    const int rc = swin_mlp_wgmma(g_ctx, k, img.p, kEps, xf, 0);
    ck(cudaStreamSynchronize(g_ctx.stream), "n = 0");
    std::vector<float> back(64 * 64);
    d2h(back.data(), x.p, 4 * back.size());
    bool zeros = true;
    for (float v : back) zeros = zeros && v == 0.f;
    result(rc == 0 && zeros, "n = 0: rc %d, map untouched %s", rc, zeros ? "yes" : "NO");
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick"))
            quick = true;
        else {
            std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        std::printf("SKIP mlp_wgmma_check: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        return 77;
    }
    std::string why;
    if (swin_mlp_wgmma_supported(0, &why)) {
        std::printf("SKIP mlp_wgmma_check: %s\n", why.c_str());
        return 77;
    }
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("device: %s, sm_%d%d, %d SMs, %zu KB shared memory per block (opt-in)\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024);
    ok_or_die(ctx_create(g_ctx, 0, true), "ctx_create");
    for (const SwinMlpKernel &k : swin_mlp_kernels()) {
        SwinMlpKernelInfo info;
        ok_or_die(swin_mlp_kernel_info(g_ctx, k, &info), "swin_mlp_kernel_info");
        const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.tanh);
        std::printf("kernel %-18s: %u B shared memory, %d threads, %d registers at launch (consumers setmaxnreg %d), "
                    "local %d B, %d CTA(s) per SM, weights %s\n",
                    kname(k).c_str(), k.smem, P.threads, info.registers, P.regs_consumer, info.local_bytes, info.ctas_per_sm,
                    P.resident ? "resident" : "streamed (2 stages)");
    }
    std::fflush(stdout);
    uint32_t seed = 100;
    for (const SwinMlpKernel &k : swin_mlp_kernels()) {
        for (int64_t n : {int64_t(1), int64_t(63), int64_t(64), int64_t(65)}) check_vs_cpu(k, n, 0, seed += 10);
        check_vs_cpu(k, 1000, 1, seed += 10);
        check_vs_cpu(k, 1000, 3, seed += 10);
        check_vs_cpu(k, 8448, 0, seed += 10);
        if (!quick) {
            check_vs_cpu(k, 33000, 0, seed += 10);
            check_vs_cpu(k, k.C == 64 ? 960 * 544 : 480 * 272, 0, seed += 10);
        }
        check_vs_sequence(k, quick ? 4000 : 65536, seed += 10);
        check_grids_agree(k, quick ? 3000 : 20000, seed += 10);
    }
    check_refusals();
    const int rc = check_tally::summary();
    ctx_destroy(g_ctx);
    return rc;
}
