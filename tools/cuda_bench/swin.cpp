// denoise-cuda-bench --swin: the fused Swin block (kernels/cuda/swin_block_fused.cu) timed on the
// token grids of 960x540, 1920x1080 and 3840x2160 frames (padded to multiples of 64 px) for model
// v1's stages (C 32 at h/2, C 64 at h/4, C 128 at h/8): per tile and build, fp32 and bf16 residual,
// shift 0 and 4, the correct-first op sequence (and its per-op split), with this run's ceilings
// (bench_ceilings: the "% of GEMM ceiling" column is against its median); the whole-frame total of
// model v1's eleven blocks. Then the C 32 size sweep, the diagnostic of the level-0 block between
// the 1080p and the 4K grid: per grid and tile, CTAs, resident CTAs per SM, waves, min / median /
// max, ns per token against 1080p's, with the L2 flushed before each launch for the default tile,
// and the 4K grid run as four 1080p-sized bands. CUDA events after 3 warm-ups, --iters samples;
// each line gives the median and the min. A median far above its min (> 1.3x and > 0.5 ms) means
// something else ran on the GPU during the samples (another process's time slices): such lines
// are marked '!' and counted at the end. The block's checks are tests/gpu/fused_check.cpp's.
#include "cuda_bench.h"
#include "cuda/swin_block_desc.h"
#include "dev_timing.h"
#include "swin_block_dev.h"

namespace cuda_bench {
namespace {

using namespace swin_dev;

struct StageTime {
    double fused[2][2] = {};      // [bf16][shift 4]: the default tile and build, median
    double fused_min[2][2] = {};  // the same, min
    double best[2] = {};          // [bf16]: the fastest tile and build (mean of both shifts' medians)
    std::string best_name[2];
    double unfused[2] = {};  // [shift 4], median
};

StageTime time_stage(const char *frame, const char *stage, int C, int H, int W, int iters, double gemm_tflops) {
    StageTime st;
    const int heads = C / 32, nwin = (H / 8) * (W / 8);
    const int64_t n = (int64_t)H * W;
    const double gflop = swin_block_flop(C, n) / 1e9;
    swin_ref::RandomBlock rb(C, heads, 0, 4242 + C);
    swin_dev::DevBlock B(rb);
    std::vector<float> x0 = swin_ref::random_map((size_t)n * C, 4243 + C);
    Dev x32(4 * n * C), x16(2 * n * C);
    upload(x32, x0.data(), 4 * n * C);
    {
        std::vector<uint16_t> h = bf16_of(x0.data(), x0.size());
        upload(x16, h.data(), 2 * h.size());
    }
    const std::vector<SwinFusedKernel> ks = swin_fused_kernels(C, heads);
    const Kernel eng = engine_kernel(C, heads);
    for (const SwinFusedKernel &sk : ks)
        for (int bf = 0; bf < 2; ++bf) {
            const Kernel k = kernel_of(sk);
            const bool is_engine = kernel_name(k) == kernel_name(eng);
            double both = 0;
            for (int sh = 0; sh < 2; ++sh) {
                const SwinFusedParams p = params_of(k);
                void *x = bf ? x16.p : x32.p;
                const Stat t = time_ms(iters, [&] {
                    return swin_block_fused(g_ctx, B.image, C, heads, kEps, x, bf == 1, H, W, sh ? 4 : 0, &p);
                });
                if (is_engine) {
                    st.fused[bf][sh] = t.med;
                    st.fused_min[bf][sh] = t.min;
                }
                both += t.med / 2;
                const double tf = gflop / t.med, gb = swin_block_bytes_per_token(C, bf == 1) * (double)n / (t.med * 1e-3) / 1e9;
                std::printf("time%s %-9s %-4s C %3d %4dx%-4d fused %-18s%s %s shift %d: %8.4f ms (min %.4f) "
                            "%6.1f TFLOP/s (%4.1f%% of GEMM ceiling) %6.0f GB/s\n",
                            t.flag(), frame, stage, C, W, H, swin_fused_kernel_name(sk).c_str(), is_engine ? "*" : " ",
                            bf ? "bf16" : "fp32", sh ? 4 : 0, t.med, t.min, tf, 100.0 * tf / gemm_tflops, gb);
            }
            if (st.best[bf] == 0 || both < st.best[bf]) {
                st.best[bf] = both;
                st.best_name[bf] = swin_fused_kernel_name(sk);
            }
        }
    SeqWs ws(nwin, n, C);
    for (int sh = 0; sh < 2; ++sh) {
        const Stat t = time_ms(iters, [&] { return unfused_block(B, x32.as<float>(), H, W, sh ? 4 : 0, ws, nullptr); });
        st.unfused[sh] = t.med;
        // per-op split of the sequence (separate runs, events between the ops)
        std::vector<std::vector<double>> per(9);
        std::vector<cudaEvent_t> ev(10);
        for (auto &e : ev) ck(cudaEventCreate(&e), "cudaEventCreate");
        for (int i = 0; i < iters; ++i) {
            ok_or_die(unfused_block(B, x32.as<float>(), H, W, sh ? 4 : 0, ws, ev.data()), "correct-first sequence");
            ck(cudaStreamSynchronize(g_ctx.stream), "sequence");
            for (int k = 0; k < 9; ++k) {
                float ms = 0;
                ck(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]), "cudaEventElapsedTime");
                per[k].push_back(ms);
            }
        }
        for (auto &e : ev) cudaEventDestroy(e);
        std::printf("time%s %-9s %-4s C %3d %4dx%-4d correct-first sequence shift %d: %8.4f ms (min %.4f) %6.1f TFLOP/s | "
                    "medians:",
                    t.flag(), frame, stage, C, W, H, sh ? 4 : 0, t.med, t.min, gflop / t.med);
        double sum = 0;
        for (int k = 0; k < 9; ++k) {
            std::sort(per[k].begin(), per[k].end());
            sum += per[k][per[k].size() / 2];
            std::printf(" %s %.4f", kSeqOps[k], per[k][per[k].size() / 2]);
        }
        std::printf(" (sum %.4f)\n", sum);
    }
    std::fflush(stdout);
    return st;
}

// The level-0 block (C 32) between the 1080p and the 4K token grid: what changes with the size.
// Per grid, tile and residual precision (default build, shift 0): CTAs, resident CTAs per SM
// (cudaOccupancy...), waves (CTAs / (SMs x resident)), min / median / max ms, ns per token at the
// min and its ratio to the 1080p grid's. Then the default tile fp32 with a 256 MiB memset before
// each sample (the map and the weight image start cold in L2), and the 4K grid as four bands of
// 272 rows, one launch each (shift 0 never crosses a band: the same work as one launch).
void size_sweep(int iters) {
    const int C = 32, heads = 1;
    swin_ref::RandomBlock rb(C, heads, 0, 777);
    swin_dev::DevBlock B(rb);
    const struct {
        int W, H;
        const char *what;
    } grids[] = {{960, 544, "1080p L0"}, {1920, 544, "2x"}, {960, 1088, "2x (tall)"}, {1920, 816, "3x"}, {1920, 1088, "4K L0"}};
    const int64_t nmax = (int64_t)1920 * 1088;
    Dev x32(4 * (size_t)nmax * C), x16(2 * (size_t)nmax * C);
    const size_t flush_bytes = (size_t)256 << 20;
    Dev flush(flush_bytes);
    {
        const std::vector<float> x0 = swin_ref::random_map((size_t)nmax * C, 778);
        upload(x32, x0.data(), x32.bytes);
        const std::vector<uint16_t> h = bf16_of(x0.data(), x0.size());
        upload(x16, h.data(), x16.bytes);
    }
    int sms = 0;
    ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g_ctx.device), "cudaDeviceGetAttribute");
    // the engine's kernel first, then the other tiles built with ptxas's heuristic and without pf
    std::vector<Kernel> ts = {engine_kernel(C, heads)};
    for (const SwinFusedKernel &sk : swin_fused_kernels(C, heads))
        if (sk.ctas == 0 && sk.pf == 0 && kernel_name(kernel_of(sk)) != kernel_name(ts[0])) ts.push_back(kernel_of(sk));
    std::printf("\nC 32 size sweep (shift 0; the engine's kernel first; ns/token at the min, 'x 1080p' = that over the 1080p "
                "grid's; ! = median > 1.3 x min: contended):\n");
    std::printf("  %-9s %-10s %8s %-12s %-4s %-5s %7s %6s %6s | %8s %8s %8s | %7s %7s %7s\n", "grid", "", "tokens", "kernel",
                "res", "L2", "CTAs", "CTA/SM", "waves", "min ms", "median", "max", "ns/tok", "x 1080p", "TFLOP/s");
    std::vector<double> base(2 * ts.size() + 1, 0);  // ns/token at 1080p: [2 ti + bf], last: cold
    auto row = [&](const char *grid, const char *what, int64_t n, const Kernel &t, bool bf, bool cold, int64_t ctas,
                   int occ, const Stat &s, double &b) {
        const double ns = s.min * 1e6 / (double)n;
        if (b == 0) b = ns;
        std::printf("%s %-9s %-10s %8lld %-12s %-4s %-5s %7lld %6d %6.1f | %8.4f %8.4f %8.4f | %7.3f %7.2f %7.1f\n", s.flag(),
                    grid, what, (long long)n, kernel_tag(t).c_str(), bf ? "bf16" : "fp32", cold ? "cold" : "warm", (long long)ctas,
                    occ, occ ? (double)ctas / ((double)sms * occ) : 0.0, s.min, s.med, s.max, ns, ns / b,
                    swin_block_flop(C, n) / 1e9 / s.min);
    };
    for (const auto &g : grids) {
        const int64_t n = (int64_t)g.W * g.H, nwin = n / 64;
        char grid[32];
        std::snprintf(grid, sizeof grid, "%dx%d", g.W, g.H);
        for (size_t ti = 0; ti < ts.size(); ++ti)
            for (int bf = 0; bf < 2; ++bf) {
                const SwinFusedParams p = params_of(ts[ti]);
                SwinFusedKernelInfo info;
                ok_or_die(swin_block_fused_kernel_info(g_ctx, C, heads, bf == 1, &p, &info), "swin_block_fused_kernel_info");
                const int occ = info.ctas_per_sm;
                void *x = bf ? x16.p : x32.p;
                const Stat s = time_ms(iters, [&] { return swin_block_fused(g_ctx, B.image, C, heads, kEps, x, bf == 1, g.H, g.W, 0, &p); });
                row(grid, g.what, n, ts[ti], bf == 1, false, (nwin + p.tw - 1) / p.tw, occ, s, base[2 * ti + bf]);
            }
        const SwinFusedParams p = params_of(ts[0]);
        SwinFusedKernelInfo info;
        ok_or_die(swin_block_fused_kernel_info(g_ctx, C, heads, false, &p, &info), "swin_block_fused_kernel_info");
        const int occ = info.ctas_per_sm;
        int k = 0;
        const Stat s = time_ms(
            iters, [&] { return swin_block_fused(g_ctx, B.image, C, heads, kEps, x32.p, false, g.H, g.W, 0, &p); },
            [&] { ck(cudaMemsetAsync(flush.p, ++k & 0xff, flush_bytes, g_ctx.stream), "cudaMemsetAsync (L2 flush)"); });
        row(grid, g.what, n, ts[0], false, true, (nwin + p.tw - 1) / p.tw, occ, s, base.back());
    }
    // 4K as four 1920x272 bands (the engine's kernel, fp32, warm)
    const SwinFusedParams p = params_of(ts[0]);
    double smin = 0, smed = 0;
    bool cont = false;
    for (int band = 0; band < 4; ++band) {
        float *xb = x32.as<float>() + (size_t)band * 272 * 1920 * C;
        const Stat s = time_ms(iters, [&] { return swin_block_fused(g_ctx, B.image, C, heads, kEps, xb, false, 272, 1920, 0, &p); });
        smin += s.min;
        smed += s.med;
        cont = cont || s.contended();
    }
    std::printf("%s %-20s %8lld %-12s fp32 warm  4 launches of 1920x272 | sum of mins %.4f ms, of medians %.4f ms (%.3f "
                "ns/token at the min)\n",
                cont ? "!" : " ", "1920x1088 as 4 bands", (long long)nmax, kernel_tag(ts[0]).c_str(), smin, smed,
                smin * 1e6 / (double)nmax);
    std::fflush(stdout);
}


}  // namespace

// denoise-cuda-bench --swin-sweep: every fused kernel built (SWIN_FUSED_KERNELS: tile plan and
// build) for C 32, 64 and 128 (head dim 32), fp32 residual stream in place as the engine runs it,
// on the token grids of a 3840x2160 frame (padded to 3840x2176): level 0 1920x1088, level 1
// 960x544, level 2 480x272. Per kernel: shared memory, registers and local memory per thread
// (cudaFuncGetAttributes: local > 0 means ptxas spilled), resident CTAs per SM (occupancy API),
// and ms per block at each grid (CUDA events after 3 warm-ups, median of `iters`, mean of shift 0
// and 4), its ratio to the engine's kernel, and whether one launch on a fresh level-1 map (shift 4)
// gives the engine's kernel's output bit for bit. Then per width the kernels ranked by the grids
// the models run the width at (C 32: level 0; C 64: levels 0 + 1, wide64-12321 and v1; C 128:
// level 2) and the SWIN_FUSED_PREFERENCE rows for this device's SM that put the fastest first.
int bench_swin_sweep(int iters) {
    ok_or_die(ctx_create(g_ctx, 0, true), "ctx_create");
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, g_ctx.device), "cudaGetDeviceProperties");
    const int sm = 10 * prop.major + prop.minor;
    std::printf("swin-sweep: %s, sm_%d, %d SMs; fp32 residual stream in place; ms per block = median of %d after 3 "
                "warm-ups, mean of shift 0 and 4; 'x eng' = ms / the engine's kernel's ms; '=' = bitwise the engine's output\n",
                prop.name, sm, prop.multiProcessorCount, iters);
    const struct {
        const char *name;
        int W, H;
    } grids[] = {{"L0", 1920, 1088}, {"L1", 960, 544}, {"L2", 480, 272}};
    struct Res {
        Kernel k;
        SwinFusedKernelInfo info;
        double ms[3];
        bool same;
    };
    std::vector<std::string> pref_rows;
    for (int C : {32, 64, 128}) {
        const int heads = C / 32;
        swin_ref::RandomBlock rb(C, heads, 4, 9000 + C);
        swin_dev::DevBlock B(rb);
        const int64_t nmax = (int64_t)grids[0].W * grids[0].H, n1 = (int64_t)grids[1].W * grids[1].H;
        Dev x(4 * (size_t)nmax * C), x1(4 * (size_t)n1 * C), o1(4 * (size_t)n1 * C);
        fill_repeated(x, nmax, C, (int64_t)grids[2].W * grids[2].H, 9100 + C);
        fill_repeated(x1, n1, C, (int64_t)grids[2].W * grids[2].H, 9200 + C);
        const Kernel eng = engine_kernel(C, heads);
        // one launch on a fresh copy of the level-1 map -> out (host)
        auto once = [&](const Kernel &k, std::vector<float> *out) {
            ck(cudaMemcpyAsync(o1.p, x1.p, x1.bytes, cudaMemcpyDeviceToDevice, g_ctx.stream), "cudaMemcpyAsync");
            const SwinFusedParams p = params_of(k);
            ok_or_die(swin_block_fused(g_ctx, B.image, C, heads, kEps, o1.p, false, grids[1].H, grids[1].W, 4, &p), "swin_block_fused");
            out->resize((size_t)n1 * C);
            d2h(out->data(), o1.p, o1.bytes);
        };
        std::vector<float> ref, out;
        once(eng, &ref);
        std::vector<Res> rs;
        for (const SwinFusedKernel &sk : swin_fused_kernels(C, heads)) {
            Res r{kernel_of(sk), {}, {0, 0, 0}, false};
            const SwinFusedParams p = params_of(r.k);
            ok_or_die(swin_block_fused_kernel_info(g_ctx, C, heads, false, &p, &r.info), "swin_block_fused_kernel_info");
            for (int gi = 0; gi < 3; ++gi)
                for (int sh = 0; sh < 2; ++sh) {
                    const Stat t = time_ms(iters, [&] {
                        return swin_block_fused(g_ctx, B.image, C, heads, kEps, x.p, false, grids[gi].H, grids[gi].W, 4 * sh, &p);
                    });
                    r.ms[gi] += t.med / 2;
                }
            once(r.k, &out);
            r.same = std::memcmp(out.data(), ref.data(), 4 * out.size()) == 0;
            rs.push_back(r);
        }
        const Res *e = nullptr;
        for (const Res &r : rs)
            if (kernel_tag(r.k) == kernel_tag(eng)) e = &r;
        std::printf("\nC %d (head dim 32), engine's kernel %s; GFLOP per block L0 %.2f L1 %.2f L2 %.2f\n", C, kernel_tag(eng).c_str(),
                    swin_block_flop(C, nmax) / 1e9, swin_block_flop(C, n1) / 1e9,
                    swin_block_flop(C, (int64_t)grids[2].W * grids[2].H) / 1e9);
        std::printf("  %-18s %7s %5s %6s %7s %6s | %9s %6s %9s %6s %9s %6s | %7s | %s\n", "kernel", "smem KB", "regs", "local",
                    "CTA/SM", "warps", "L0 ms", "x eng", "L1 ms", "x eng", "L2 ms", "x eng", "L0 TF/s", "=");
        for (const Res &r : rs) {
            std::printf("  %-18s %7.1f %5d %6d %7d %6d | %9.4f %6.3f %9.4f %6.3f %9.4f %6.3f | %7.1f | %s%s\n",
                        kernel_tag(r.k).c_str(), r.info.kernel.smem / 1024.0, r.info.registers, r.info.local_bytes,
                        r.info.ctas_per_sm, r.info.ctas_per_sm * r.k.t.NW, r.ms[0], r.ms[0] / e->ms[0], r.ms[1], r.ms[1] / e->ms[1],
                        r.ms[2], r.ms[2] / e->ms[2], swin_block_flop(C, nmax) / 1e9 / r.ms[0], r.same ? "yes" : "NO",
                        &r == e ? "  <- engine" : "");
        }
        // rank by the grids the models run C at
        auto rank_ms = [&](const Res &r) { return C == 32 ? r.ms[0] : C == 64 ? r.ms[0] + r.ms[1] : r.ms[2]; };
        std::vector<const Res *> order;
        for (const Res &r : rs) order.push_back(&r);
        std::stable_sort(order.begin(), order.end(), [&](const Res *a, const Res *b) { return rank_ms(*a) < rank_ms(*b); });
        const char *by = C == 32 ? "L0" : C == 64 ? "L0 + L1" : "L2";
        std::printf("  ranked by %s: ", by);
        for (const Res *r : order) std::printf("%s %.4f%s; ", kernel_tag(r->k).c_str(), rank_ms(*r), r->same ? "" : " (NOT bitwise)");
        std::printf("\n  fastest %s: %.4f ms against the engine's %.4f (%+.1f%%)\n", kernel_tag(order[0]->k).c_str(),
                    rank_ms(*order[0]), rank_ms(*e), 100.0 * (rank_ms(*order[0]) / rank_ms(*e) - 1.0));
        // preference rows: the kernels faster than the engine's (bitwise equal only), fastest first, then the engine's
        for (const Res *r : order) {
            if (!r->same && r != e) continue;
            char row[200];
            std::snprintf(row, sizeof row, "    X(%d, %d, %d, %d, %d, %d, %d, %d, %d)  /* %s %.4f ms */", sm, C, 32, r->k.t.TW,
                          r->k.t.NW, r->k.t.QA, r->k.t.MA, r->k.PF, r->k.CTAS, by, rank_ms(*r));
            pref_rows.push_back(row);
            if (r == e) break;
        }
        std::fflush(stdout);
    }
    std::printf("\nsuggested SWIN_FUSED_PREFERENCE rows for sm_%d (kernels/cuda/swin_block_desc.h; per width the kernels "
                "faster than the engine's, fastest first, then the engine's):\n",
                sm);
    for (const std::string &r : pref_rows) std::printf("%s \\\n", r.c_str());
    std::printf("\ntiming: %d of %d measurements contended (median > 1.3 x min and > 0.5 ms above it)\n", g_contended, g_timed);
    ctx_destroy(g_ctx);
    return 0;
}

int bench_swin(int iters) {
    ok_or_die(ctx_create(g_ctx, 0, true), "ctx_create");
    if (bench_ceilings(iters)) return 1;
    const struct {
        const char *name;
        int W, H;
    } frames[] = {{"960x540", 960, 540}, {"1920x1080", 1920, 1080}, {"3840x2160", 3840, 2160}};
    const struct {
        const char *name;
        int C, div;
    } stages[] = {{"L0", 32, 2}, {"L1", 64, 4}, {"mid", 128, 8}};
    std::vector<std::vector<StageTime>> tab;
    for (const auto &f : frames) {
        const int hp = (f.H + 63) / 64 * 64, wp = (f.W + 63) / 64 * 64;
        tab.emplace_back();
        for (const auto &s : stages) tab.back().push_back(time_stage(f.name, s.name, s.C, hp / s.div, wp / s.div, iters, g_gemm_tflops));
    }
    std::printf("\nper block (ms, medians, mean of shift 0 and 4; fused: the default tile and build, min: its fastest "
                "sample; best: the fastest tile and build):\n");
    std::printf("%-10s %-4s %4s %10s %7s | %9s %9s %7s %7s | %9s %7s | %-19s | %-19s | %10s %8s\n", "frame", "st", "C",
                "tokens", "GFLOP", "fused f32", "f32 min", "TFLOP/s", "GB/s", "fused b16", "GB/s", "best f32 (tile)",
                "best b16 (tile)", "sequence", "speedup");
    for (size_t fi = 0; fi < 3; ++fi) {
        const int hp = (frames[fi].H + 63) / 64 * 64, wp = (frames[fi].W + 63) / 64 * 64;
        for (size_t si = 0; si < 3; ++si) {
            const StageTime &st = tab[fi][si];
            const int C = stages[si].C;
            const int64_t n = (int64_t)(hp / stages[si].div) * (wp / stages[si].div);
            const double g = swin_block_flop(C, n) / 1e9;
            const double f32 = (st.fused[0][0] + st.fused[0][1]) / 2, b16 = (st.fused[1][0] + st.fused[1][1]) / 2,
                         seq = (st.unfused[0] + st.unfused[1]) / 2, f32min = (st.fused_min[0][0] + st.fused_min[0][1]) / 2;
            char bf[2][64];
            for (int b = 0; b < 2; ++b) std::snprintf(bf[b], sizeof bf[b], "%.4f (%s)", st.best[b], st.best_name[b].c_str());
            std::printf("%-10s %-4s %4d %10lld %7.2f | %9.4f %9.4f %7.1f %7.0f | %9.4f %7.0f | %-19s | %-19s | %10.4f %7.1fx\n",
                        frames[fi].name, stages[si].name, C, (long long)n, g, f32, f32min, g / f32,
                        swin_block_bytes_per_token(C, false) * (double)n / (f32 * 1e-3) / 1e9, b16,
                        swin_block_bytes_per_token(C, true) * (double)n / (b16 * 1e-3) / 1e9, bf[0], bf[1], seq,
                        seq / f32);
        }
    }
    // model v1: enc0 + dec0 (2 + 2 blocks at L0, shifts 0, 4), enc1 + dec1 (2 + 2 at L1), mid (3:
    // shifts 0, 4, 0)
    std::printf("\nmodel v1's eleven Swin blocks per frame (ms; GEMM ceiling %.0f TFLOP/s, copy %.0f GB/s):\n", g_gemm_tflops,
                g_copy_gbs);
    std::printf("%-10s %8s | %10s %10s %10s | %9s %9s | %10s | %8s\n", "frame", "GFLOP", "fused f32", "f32 min",
                "fused b16", "best f32", "best b16", "sequence", "speedup");
    for (size_t fi = 0; fi < 3; ++fi) {
        const int hp = (frames[fi].H + 63) / 64 * 64, wp = (frames[fi].W + 63) / 64 * 64;
        auto total = [&](auto get) {
            double t = 0;
            for (int si = 0; si < 2; ++si) t += 2 * (get(tab[fi][si], 0) + get(tab[fi][si], 1));
            return t + 2 * get(tab[fi][2], 0) + get(tab[fi][2], 1);
        };
        const double f32 = total([](const StageTime &s, int sh) { return s.fused[0][sh]; });
        const double f32min = total([](const StageTime &s, int sh) { return s.fused_min[0][sh]; });
        const double b16 = total([](const StageTime &s, int sh) { return s.fused[1][sh]; });
        const double seq = total([](const StageTime &s, int sh) { return s.unfused[sh]; });
        const double bb32 = total([](const StageTime &s, int) { return s.best[0]; });
        const double bb16 = total([](const StageTime &s, int) { return s.best[1]; });
        double g = 0;
        for (int si = 0; si < 3; ++si)
            g += (si == 2 ? 3 : 4) * swin_block_flop(stages[si].C, (int64_t)(hp / stages[si].div) * (wp / stages[si].div)) / 1e9;
        std::printf("%-10s %8.1f | %10.3f %10.3f %10.3f | %9.3f %9.3f | %10.3f | %7.1fx\n", frames[fi].name, g, f32, f32min,
                    b16, bb32, bb16, seq, seq / f32);
    }
    size_sweep(iters);
    std::printf("\ntiming: %d of %d measurements contended (median > 1.3 x min and > 0.5 ms above it)%s\n", g_contended,
                g_timed,
                g_contended ? ": something else ran on the GPU (another process's time slices); the min columns are "
                              "the better estimate; rerun with the GPU to itself"
                            : "");
    ctx_destroy(g_ctx);
    return 0;
}

}  // namespace cuda_bench
