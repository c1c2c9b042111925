// GPU checks, network: U-Net + head vs the CPU's, unchunked and in small chunks / bands, with the
// golden weights (model v1's widths, and golden_wide's 64/64/128) and (--weights) the trained ones.
// --quick: only the golden weights' loading (and upload, for the wide ones: the engine takes them).
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "cpu/unet.h"
#include "cuda/network.h"
#include "cuda/swin_block_fused.h"
#include "harness.h"
#include "model.h"
#include <memory>

using namespace gpu_check;

namespace {

// 3. network
// Both Swin-block paths (fused kernels, the correct-first op sequence) on the same inputs against
// the same CPU results; then the two paths against each other (they must differ: bf16 roundings
// in other places, so a zero difference means the switch did nothing).
void network_check(cuda::Ctx &ctx, const Model &M, const char *label, int h, int w, bool chunked, double rel_l2) {
    const ModelConfig &cfg = M.cfg;
    const int c0 = cfg.channels[0], nf = 2 * cfg.fusion_radius + 1;
    cpu::CpuModel cm;
    cpu::pack_model(M, &cm);
    cuda::Net net;
    cuda::NetShape shape{h, w, chunked ? 4096 : (int64_t)1 << 20, chunked ? 7 : 1 << 20};
    int rc = net.upload(ctx, M);
    if (!rc) rc = net.resize(ctx, shape);
    if (rc) {
        result(false, "network %s: %s", label, ctx.err.c_str());
        return;
    }
    {  // the fused path covers exactly the stages whose (C, heads) the device runs
        const int C[3] = {cfg.channels[0], cfg.channels[1], cfg.channels[2]};
        const int depth[3] = {cfg.depth_enc0 + cfg.depth_dec0, cfg.depth_enc1 + cfg.depth_dec1, cfg.depth_mid};
        int want = 0;
        std::string why;
        for (int k = 0; k < 3; ++k)
            if (cuda::swin_block_fused_supported(ctx.device, C[k], cfg.heads[k], &why) == 0) want += depth[k];
        net.set_fused(true);
        result(net.fused_blocks() == want && net.swin_blocks() == depth[0] + depth[1] + depth[2],
               "network %s fused path: %d of %d Swin blocks fused (the device runs %d): %s", label, net.fused_blocks(),
               net.swin_blocks(), want, net.swin_path().c_str());
    }
    std::vector<std::vector<float>> fr;
    std::vector<std::unique_ptr<Dev>> dfr;
    for (int k = 0; k < nf + 2; ++k) {
        fr.push_back(bf16_host::round(rnd((size_t)h * w * 12, -0.9f, 0.9f)));
        dfr.emplace_back(new Dev(fr.back().size() * 2));
        up_bf(*dfr.back(), fr.back());
    }
    const float sigma = 20.f;
    cpu::Workspace ws;
    std::vector<float> fin((size_t)h * w * cfg.fusion_in_channels());
    std::vector<std::vector<float>> Fc(3, std::vector<float>((size_t)h * w * c0));
    for (int s = 0; s < 3; ++s) {
        std::vector<const float *> cwin;
        for (int k = 0; k < nf; ++k) cwin.push_back(fr[s + k].data());
        cpu::build_fusion_input(cwin.data(), nf, h, w, sigma, fin.data());
        cpu::unet_forward(cm, fin.data(), h, w, Fc[s].data(), ws);
    }
    std::vector<float> ref((size_t)h * w * 12);
    {
        const float *Fp[3] = {Fc[0].data(), Fc[1].data(), Fc[2].data()};
        cpu::head_forward(cm, Fp, fr[nf / 2 + 1].data(), h, w, ref.data(), ws);
    }
    std::vector<float> Fpath[2];  // F_0 of each path
    for (int path = 0; path < 2; ++path) {
        const bool fused = path == 0;
        net.set_fused(fused);
        const char *pname = fused ? "fused" : "correct-first";
        std::vector<std::unique_ptr<Dev>> Fg;
        bool ok = true;
        for (int s = 0; s < 3; ++s) {
            std::vector<const bf16 *> gwin;
            for (int k = 0; k < nf; ++k) gwin.push_back(dfr[s + k]->h());
            Fg.emplace_back(new Dev(Fc[s].size() * 2));
            cuda::poison(ctx, Fg.back()->p, Fg.back()->bytes);
            rc = net.features(ctx, gwin.data(), nf, sigma, h, w, Fg.back()->h());
            if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
            char name[112];
            std::snprintf(name, sizeof name, "network %s %s%s F_s (s=%d) %dx%d", label, pname, chunked ? " chunked" : "", s,
                          w, h);
            const int before = check_tally::n_fail;
            std::vector<float> got = down_bf(*Fg.back(), Fc[s].size());
            check(name, got, Fc[s], 0.25, rc, ctx.err, rel_l2);
            ok = ok && check_tally::n_fail == before;
            if (s == 0) Fpath[path] = got;
        }
        if (!ok) continue;
        Dev dout(ref.size() * 4);
        cuda::poison(ctx, dout.p, dout.bytes);
        const bf16 *Fd[3] = {Fg[0]->h(), Fg[1]->h(), Fg[2]->h()};
        rc = net.head(ctx, Fd, dfr[nf / 2 + 1]->h(), h, w, dout.f(), false);
        if (!rc) rc = cudaStreamSynchronize(ctx.stream) == cudaSuccess ? 0 : DENOISE_EDEVICE;
        char name[112];
        std::snprintf(name, sizeof name, "network %s %s%s head output", label, pname, chunked ? " chunked" : "");
        check(name, down_f(dout, ref.size()), ref, 0.1, rc, ctx.err, rel_l2);
    }
    if (!Fpath[0].empty() && Fpath[0].size() == Fpath[1].size() && net.swin_blocks() > 0) {
        double num = 0, den = 0;
        for (size_t i = 0; i < Fpath[0].size(); ++i) {
            const double d = (double)Fpath[0][i] - Fpath[1][i];
            num += d * d;
            den += (double)Fpath[1][i] * Fpath[1][i];
        }
        const double r = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
        net.set_fused(true);
        const bool any = net.fused_blocks() > 0;
        // each path is within rel_l2 of the CPU (above), so within twice that of the other
        result(any ? r > 0 && r < 2 * rel_l2 : r == 0,
               "network %s%s fused vs correct-first F_0: rel L2 %.2e (%s %.0e)", label, chunked ? " chunked" : "", r,
               any ? "> 0: the paths differ, <" : "no block fused on this device: == 0, not", 2 * rel_l2);
    }
    net.destroy(ctx);
}

}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        Model gm, wm;
        std::string err;
        const bool have_gm = load_model(data_dir() + "/golden_weights.safetensors", &gm, &err);
        if (!have_gm) result(false, "golden weights: %s", err.c_str());
        const bool have_wm = load_model(data_dir() + "/golden_wide_weights.safetensors", &wm, &err);
        if (!have_wm) result(false, "golden_wide weights: %s", err.c_str());
        if (have_wm) {  // the engine takes widths other than models v1 / v2's 32/64/128
            cuda::Net net;
            const int rc = net.upload(ctx, wm);
            result(rc == 0, "golden_wide weights (channels %d/%d/%d) uploaded: rc %d %s; %s; %s", wm.cfg.channels[0],
                   wm.cfg.channels[1], wm.cfg.channels[2], rc, rc ? ctx.err.c_str() : "", rc ? "" : net.patch_path().c_str(),
                   rc ? "" : net.head_path().c_str());
            net.destroy(ctx);
        }
        if (o.quick) return;
        timed("network", [&] {
            if (have_gm) {
                network_check(ctx, gm, "golden-weights", 64, 96, false, 1e-2);
                network_check(ctx, gm, "golden-weights", 64, 96, true, 1e-2);
                network_check(ctx, gm, "golden-weights", 32, 32, false, 1e-2);
            }
            if (have_wm) {
                network_check(ctx, wm, "golden-wide-weights", 64, 96, false, 1e-2);
                network_check(ctx, wm, "golden-wide-weights", 64, 96, true, 1e-2);
                network_check(ctx, wm, "golden-wide-weights", 32, 32, false, 1e-2);
            }
            if (!o.weights.empty()) {
                Model tm;
                if (load_model(o.weights, &tm, &err)) {
                    network_check(ctx, tm, "trained", 96, 160, false, kTrainedRelL2);
                    network_check(ctx, tm, "trained", 96, 160, true, kTrainedRelL2);
                } else {
                    result(false, "trained weights: %s", err.c_str());
                }
            }
        });
    });
}
