// estimate_sigma (build/bin/denoise-estimate-sigma): the noise level of raw video frames, with
// the engine's estimator (kernels/cpu/noise_estimate.h), in 8-bit R'G'B' code values: the sigma
// to give the denoise filter.
//
//   build/bin/ffmpeg -i clip.mkv -f rawvideo -pix_fmt gbrpf32le pipe:1 |
//       build/bin/denoise-estimate-sigma --size 854x480 --pix-fmt gbrpf32le
//
// Reads planar R'G'B' frames on stdin (gbrpf32le: floats in [0, 1], planes G, B, R as FFmpeg
// stores them; gbrp: 8-bit codes), one segment (no scene-cut detection: cut the input yourself).
// Prints one line per frame:
//   frame N sigma S frame_sigma F r R g G b B patches P
// S is the segment estimate after frame N (what sigma=auto uses), F the frame's own estimate, R/G/B
// the segment estimate per plane, P the weak-texture patches behind S; -1 = not known yet.
// The last line is "sigma S" (the final segment estimate).
//
// Options: --decay X (weight of earlier frames, 0 = every frame on its own), --patch D,
// --min-stride N, --max-patches N, --iterations N (see NoiseEstimateParams).
// Exit status: 0 on success, 1 on a read error or a truncated frame, 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/noise_estimate.h"

static int usage() {
    std::fprintf(stderr,
                 "usage: denoise-estimate-sigma --size WxH [--pix-fmt gbrpf32le|gbrp] [--decay X] [--patch D]\n"
                 "                              [--min-stride N] [--max-patches N] [--iterations N]\n"
                 "  reads raw planar R'G'B' frames on stdin, prints the noise sigma (8-bit code values)\n");
    return 2;
}

int main(int argc, char **argv) {
    int w = 0, h = 0;
    std::string fmt = "gbrpf32le";
    denoise::NoiseEstimateParams par;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto need = [&]() { if (!v) { std::exit(usage()); } ++i; return v; };
        if (!std::strcmp(a, "--size")) {
            if (std::sscanf(need(), "%dx%d", &w, &h) != 2) return usage();
        } else if (!std::strcmp(a, "--pix-fmt")) {
            fmt = need();
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
    if (fmt != "gbrpf32le" && fmt != "gbrp") {
        std::fprintf(stderr, "denoise-estimate-sigma: --pix-fmt must be gbrpf32le or gbrp\n");
        return 2;
    }
    const bool f32 = fmt == "gbrpf32le";
    const size_t plane = (size_t)w * h, bytes = plane * 3 * (f32 ? 4 : 1);
    std::vector<unsigned char> buf(bytes);
    std::vector<float> rgb(plane * 3);
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
        // gbrp plane order G, B, R -> R, G, B
        static const int src_plane[3] = {2, 0, 1};
        for (int c = 0; c < 3; ++c) {
            float *dst = rgb.data() + c * plane;
            if (f32) {
                std::memcpy(dst, buf.data() + src_plane[c] * plane * 4, plane * 4);
            } else {
                const unsigned char *s = buf.data() + src_plane[c] * plane;
                for (size_t k = 0; k < plane; ++k) dst[k] = s[k] / 255.f;
            }
        }
        denoise::NoisePlane pl[3];
        for (int c = 0; c < 3; ++c) {
            pl[c].data = rgb.data() + c * plane;
            pl[c].pixel_stride = 1;
            pl[c].row_stride = w;
        }
        if (est.push(pl, 3, w, h) < 0) {
            std::fprintf(stderr, "denoise-estimate-sigma: estimator refused frame %ld\n", frame);
            return 1;
        }
        last = est.sigma();
        std::printf("frame %ld sigma %.3f frame_sigma %.3f r %.3f g %.3f b %.3f patches %.0f\n", frame, last,
                    est.sigma_frame(), est.sigma_plane(0), est.sigma_plane(1), est.sigma_plane(2), est.patches());
    }
    std::printf("sigma %.3f\n", last);
    return 0;
}
