// FFmpeg pixel formats as the denoise filter describes them to the engine, for the tests that
// build native frames (engine_frames_test, cuda_host_test, the GPU checks, ...). The values are those of
// FFmpeg's libavutil/pixdesc.c: each colour component's AVComponentDescriptor (plane, offset, step,
// shift, depth; alpha left out, components in descriptor order Y', Cb, Cr or R', G', B'), the
// chroma subsampling of Y'CbCr formats, and the plane count of a frame (av_pix_fmt_count_planes,
// alpha included), mapped as filter/vf_denoise.c maps them; pixfmt_descriptors_lavfi_test checks
// every entry against the built libavutil.
#ifndef DENOISE_TESTS_PIXFMT_DESCRIPTORS_H
#define DENOISE_TESTS_PIXFMT_DESCRIPTORS_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "denoise.h"

namespace denoise_test {

// A DenoisePixelFormat from its parts: `nb` colour components described by `comps` (descriptor
// order), the chroma subsampling log2 (0 for R'G'B', gray and float formats), bytes per sample
// word (1, 2 or 4) and whether samples are float32.
inline DenoisePixelFormat pixel_format(int nb, std::initializer_list<DenoiseComponent> comps, int log2_chroma_w,
                                       int log2_chroma_h, int bytes, int is_float = 0) {
    DenoisePixelFormat f{};
    f.nb_components = nb;
    int i = 0;
    for (const DenoiseComponent &c : comps) f.comp[i++] = c;
    f.log2_chroma_w = log2_chroma_w;
    f.log2_chroma_h = log2_chroma_h;
    f.bytes = bytes;
    f.is_float = is_float;
    return f;
}

struct PixFmtDescriptor {
    const char *name;      // FFmpeg's name (av_get_pix_fmt_name)
    DenoisePixelFormat f;  // the colour components, as the filter hands them to denoise_open()
    int nb_planes;         // planes of a frame, alpha included
};

// Every pixel format the tests use, by family.
inline const std::vector<PixFmtDescriptor> &pixfmt_descriptors() {
    static const std::vector<PixFmtDescriptor> v = {
        // planar Y'CbCr
        {"yuv420p", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}, {2, 0, 1, 0, 8}}, 1, 1, 1), 3},
        {"yuva420p", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}, {2, 0, 1, 0, 8}}, 1, 1, 1), 4},
        {"yuv420p10le", pixel_format(3, {{0, 0, 2, 0, 10}, {1, 0, 2, 0, 10}, {2, 0, 2, 0, 10}}, 1, 1, 2), 3},
        {"yuv422p", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}, {2, 0, 1, 0, 8}}, 1, 0, 1), 3},
        {"yuv422p10le", pixel_format(3, {{0, 0, 2, 0, 10}, {1, 0, 2, 0, 10}, {2, 0, 2, 0, 10}}, 1, 0, 2), 3},
        {"yuv444p", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}, {2, 0, 1, 0, 8}}, 0, 0, 1), 3},
        {"yuv444p16le", pixel_format(3, {{0, 0, 2, 0, 16}, {1, 0, 2, 0, 16}, {2, 0, 2, 0, 16}}, 0, 0, 2), 3},
        {"yuv410p", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}, {2, 0, 1, 0, 8}}, 2, 2, 1), 3},
        {"yuv440p10le", pixel_format(3, {{0, 0, 2, 0, 10}, {1, 0, 2, 0, 10}, {2, 0, 2, 0, 10}}, 0, 1, 2), 3},
        // semi-planar Y'CbCr
        {"nv12", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 0, 2, 0, 8}, {1, 1, 2, 0, 8}}, 1, 1, 1), 2},
        {"nv21", pixel_format(3, {{0, 0, 1, 0, 8}, {1, 1, 2, 0, 8}, {1, 0, 2, 0, 8}}, 1, 1, 1), 2},
        {"p010le", pixel_format(3, {{0, 0, 2, 6, 10}, {1, 0, 4, 6, 10}, {1, 2, 4, 6, 10}}, 1, 1, 2), 2},
        {"p016le", pixel_format(3, {{0, 0, 2, 0, 16}, {1, 0, 4, 0, 16}, {1, 2, 4, 0, 16}}, 1, 1, 2), 2},
        {"p210le", pixel_format(3, {{0, 0, 2, 6, 10}, {1, 0, 4, 6, 10}, {1, 2, 4, 6, 10}}, 1, 0, 2), 2},
        // packed Y'CbCr 4:2:2
        {"yuyv422", pixel_format(3, {{0, 0, 2, 0, 8}, {0, 1, 4, 0, 8}, {0, 3, 4, 0, 8}}, 1, 0, 1), 1},
        {"uyvy422", pixel_format(3, {{0, 1, 2, 0, 8}, {0, 0, 4, 0, 8}, {0, 2, 4, 0, 8}}, 1, 0, 1), 1},
        // gray (Y' only; ya16le's alpha word left out)
        {"gray", pixel_format(1, {{0, 0, 1, 0, 8}}, 0, 0, 1), 1},
        {"gray10le", pixel_format(1, {{0, 0, 2, 0, 10}}, 0, 0, 2), 1},
        {"ya16le", pixel_format(1, {{0, 0, 4, 0, 16}}, 0, 0, 2), 1},
        {"grayf32le", pixel_format(1, {{0, 0, 4, 0, 32}}, 0, 0, 4, 1), 1},
        // packed R'G'B' (padding or alpha bytes left out)
        {"rgb24", pixel_format(3, {{0, 0, 3, 0, 8}, {0, 1, 3, 0, 8}, {0, 2, 3, 0, 8}}, 0, 0, 1), 1},
        {"bgra", pixel_format(3, {{0, 2, 4, 0, 8}, {0, 1, 4, 0, 8}, {0, 0, 4, 0, 8}}, 0, 0, 1), 1},
        {"bgr0", pixel_format(3, {{0, 2, 4, 0, 8}, {0, 1, 4, 0, 8}, {0, 0, 4, 0, 8}}, 0, 0, 1), 1},
        {"0rgb", pixel_format(3, {{0, 1, 4, 0, 8}, {0, 2, 4, 0, 8}, {0, 3, 4, 0, 8}}, 0, 0, 1), 1},
        {"rgb48le", pixel_format(3, {{0, 0, 6, 0, 16}, {0, 2, 6, 0, 16}, {0, 4, 6, 0, 16}}, 0, 0, 2), 1},
        {"rgba64le", pixel_format(3, {{0, 0, 8, 0, 16}, {0, 2, 8, 0, 16}, {0, 4, 8, 0, 16}}, 0, 0, 2), 1},
        // planar R'G'B' (descriptor order R, G, B: planes 2, 0, 1)
        {"gbrp", pixel_format(3, {{2, 0, 1, 0, 8}, {0, 0, 1, 0, 8}, {1, 0, 1, 0, 8}}, 0, 0, 1), 3},
        {"gbrp10le", pixel_format(3, {{2, 0, 2, 0, 10}, {0, 0, 2, 0, 10}, {1, 0, 2, 0, 10}}, 0, 0, 2), 3},
        {"gbrpf32le", pixel_format(3, {{2, 0, 4, 0, 32}, {0, 0, 4, 0, 32}, {1, 0, 4, 0, 32}}, 0, 0, 4, 1), 3},
        {"gbrapf32le", pixel_format(3, {{2, 0, 4, 0, 32}, {0, 0, 4, 0, 32}, {1, 0, 4, 0, 32}}, 0, 0, 4, 1), 4},
    };
    return v;
}

// The entry named `name`; a name the table lacks is the calling test's own mistake: it is
// printed and the process aborts.
inline const PixFmtDescriptor &pixfmt_descriptor(const char *name) {
    for (const PixFmtDescriptor &d : pixfmt_descriptors())
        if (!std::strcmp(d.name, name)) return d;
    std::fprintf(stderr, "pixfmt_descriptor: no entry for pixel format %s in tests/common/pixfmt_descriptors.h\n", name);
    std::abort();
}

}  // namespace denoise_test

#endif
