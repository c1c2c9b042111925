// estimate_sigma (build/bin/denoise-estimate-sigma): the noise level of raw video frames, with
// the engine's sigma=auto code (kernels/sigma_auto.h on the CPU estimator,
// kernels/common/noise_estimate.h), in the network's unit: the RMS over R', G', B' of the noise's
// standard deviation in 8-bit code values, the sigma to give the denoise filter.
//
//   build/bin/ffmpeg -i clip.mkv -f rawvideo -pix_fmt gbrpf32le pipe:1 |
//       build/bin/denoise-estimate-sigma --size 854x480 --pix-fmt gbrpf32le
//   build/bin/ffmpeg -i clip.mkv -f rawvideo -pix_fmt yuv420p pipe:1 |
//       build/bin/denoise-estimate-sigma --size 854x480 --pix-fmt yuv420p --matrix bt709
//
// Reads frames on stdin, one segment (no scene-cut detection: cut the input yourself):
//   gbrpf32le  planar R'G'B' floats in [0, 1] (planes G, B, R as FFmpeg stores them)
//   gbrp       the same as 8-bit codes
//   yuv420p    8-bit Y'CbCr 4:2:0 (limited range unless --range full; --matrix bt709 or bt601):
//              estimated on the native Y', Cb, Cr planes and mapped through the decoding matrix,
//              as the engine does for subsampled formats (sigma_auto.h)
// Prints one line per frame:
//   frame N sigma S frame_sigma F p0 A p1 B p2 C patches P
// S is the segment estimate after frame N (what sigma=auto uses), F the frame's own estimate,
// A/B/C the segment estimate per estimation plane (R', G', B' or Y', Cb, Cr, in that plane's own
// 8-bit code values), P the weak-texture patches behind S; -1 = not known yet. The last line is
// "sigma S" (the final segment estimate).
//
// Options: --decay X (weight of earlier frames, 0 = every frame on its own), --patch D,
// --min-stride N, --max-patches N, --iterations N (see NoiseEstimateParams).
// Exit status: 0 on success, 1 on a read error or a truncated frame, 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend.h"
#include "common/noise_estimate.h"
#include "sigma_auto.h"

static int usage() {
    std::fprintf(stderr,
                 "usage: denoise-estimate-sigma --size WxH [--pix-fmt gbrpf32le|gbrp|yuv420p] [--matrix bt709|bt601]\n"
                 "                              [--range limited|full] [--decay X] [--patch D]\n"
                 "                              [--min-stride N] [--max-patches N] [--iterations N]\n"
                 "  reads raw frames on stdin, prints the noise sigma (8-bit R'G'B' code values)\n");
    return 2;
}

int main(int argc, char **argv) {
    int w = 0, h = 0;
    std::string fmt = "gbrpf32le", matrix = "bt709", range = "limited";
    denoise::NoiseEstimateParams par;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto need = [&]() { if (!v) { std::exit(usage()); } ++i; return v; };
        if (!std::strcmp(a, "--size")) {
            if (std::sscanf(need(), "%dx%d", &w, &h) != 2) return usage();
        } else if (!std::strcmp(a, "--pix-fmt")) {
            fmt = need();
        } else if (!std::strcmp(a, "--matrix")) {
            matrix = need();
        } else if (!std::strcmp(a, "--range")) {
            range = need();
        } else if (!std::strcmp(a, "--decay")) {
            par.decay = std::atof(need());
        } else if (!std::strcmp(a, "--patch")) {
            par.patch = std::atoi(need());
        } else if (!std::strcmp(a, "--min-stride")) {
            par.min_stride = std::atoi(need());
        } else if (!std::strcmp(a, "--max-patches")) {
            par.max_patches = std::atoi(need());
        } else if (!std::strcmp(a, "--iterations")) {
            par.iterations = std::atoi(need());
        } else {
            return usage();
        }
    }
    if (w < par.patch || h < par.patch || w > 32768 || h > 32768) {
        std::fprintf(stderr, "denoise-estimate-sigma: --size WxH needed, each side %d..32768\n", par.patch);
        return usage();
    }
    if (fmt != "gbrpf32le" && fmt != "gbrp" && fmt != "yuv420p") {
        std::fprintf(stderr, "denoise-estimate-sigma: --pix-fmt must be gbrpf32le, gbrp or yuv420p\n");
        return 2;
    }
    if ((matrix != "bt709" && matrix != "bt601") || (range != "limited" && range != "full")) {
        std::fprintf(stderr, "denoise-estimate-sigma: --matrix bt709|bt601, --range limited|full\n");
        return 2;
    }
    const bool f32 = fmt == "gbrpf32le", yuv = fmt == "yuv420p";
    // the engine's view of the stream: format, sizes, colour (sigma_auto.h needs spec and colour)
    denoise::StreamSpec spec;
    spec.width = w;
    spec.height = h;
    spec.cw = yuv ? (w + 1) / 2 : w;
    spec.ch = yuv ? (h + 1) / 2 : h;
    DenoisePixelFormat &pf = spec.format;
    pf.nb_components = 3;
    pf.bytes = f32 ? 4 : 1;
    pf.is_float = f32;
    pf.log2_chroma_w = pf.log2_chroma_h = yuv ? 1 : 0;
    for (int c = 0; c < 3; ++c) pf.comp[c] = DenoiseComponent{c, 0, pf.bytes, 0, f32 ? 32 : 8};
    DenoiseColor col{};
    col.repr.sys = !yuv ? PL_COLOR_SYSTEM_RGB : matrix == "bt709" ? PL_COLOR_SYSTEM_BT_709 : PL_COLOR_SYSTEM_BT_601;
    col.repr.levels = !yuv || range == "full" ? PL_COLOR_LEVELS_FULL : PL_COLOR_LEVELS_LIMITED;
    const denoise::FrameColor fc = denoise::frame_color(pf, col);
    denoise::NoisePlan plan = denoise::noise_plan(spec, fc);
    plan.params = par;
    const size_t plane = (size_t)w * h, cplane = (size_t)spec.cw * spec.ch;
    const size_t bytes = yuv ? plane + 2 * cplane : plane * 3 * (f32 ? 4 : 1);
    std::vector<unsigned char> buf(bytes);
    std::vector<float> vals(plane + 2 * std::max(plane, cplane));
    denoise::NoiseEstimator est(par);
    float last = -1.f;
    for (long frame = 0;; ++frame) {
        const size_t got = std::fread(buf.data(), 1, bytes, stdin);
        if (got == 0 && std::feof(stdin)) break;
        if (got != bytes) {
            std::fprintf(stderr, "denoise-estimate-sigma: %s after %ld frames\n",
                         std::ferror(stdin) ? "read error" : "truncated frame", frame);
            return 1;
        }
        denoise::NoisePlane pl[3];
        size_t off = 0;
        for (int c = 0; c < 3; ++c) {
            const size_t n = (size_t)plan.width[c] * plan.height[c];
            float *dst = vals.data() + off;
            if (yuv) {
                // native planes in their own order Y', Cb, Cr: normalised code values
                const unsigned char *s = buf.data() + (c ? plane + (c - 1) * cplane : 0);
                for (size_t k = 0; k < n; ++k) dst[k] = s[k] * (1.0f / 255);
            } else {
                // gbrp plane order G, B, R -> R, G, B
                static const int src_plane[3] = {2, 0, 1};
                if (f32) {
                    std::memcpy(dst, buf.data() + src_plane[c] * plane * 4, plane * 4);
                } else {
                    const unsigned char *s = buf.data() + src_plane[c] * plane;
                    for (size_t k = 0; k < plane; ++k) dst[k] = s[k] / 255.f;
                }
            }
            pl[c].data = dst;
            pl[c].pixel_stride = 1;
            pl[c].row_stride = plan.width[c];
            off += n;
        }
        denoise::CpuNoiseSource src(pl, plan.planes, plan.width, plan.height, 1.f, 0.f, par);
        if (est.push(src) < 0) {
            std::fprintf(stderr, "denoise-estimate-sigma: estimator refused frame %ld\n", frame);
            return 1;
        }
        last = est.sigma_weighted(plan.gain);
        std::printf("frame %ld sigma %.3f frame_sigma %.3f p0 %.3f p1 %.3f p2 %.3f patches %.0f\n", frame, last,
                    est.sigma_frame_weighted(plan.gain), est.sigma_plane(0), est.sigma_plane(1), est.sigma_plane(2),
                    est.patches());
    }
    std::printf("sigma %.3f\n", last);
    return 0;
}
