// One frame's colour transform (frame_color.h FrameColor) from its DenoiseColor, computed once per
// frame on the host so that every backend applies the same numbers.
//
// Y'CbCr (and integer gray, which is Y' with neutral chroma): libplacebo's pl_color_repr_decode()
// for the frame's system and levels with sample_depth = color_depth = the component depth, so its
// input is the normalised code value v = code / (2^depth - 1) and its limited-range offsets scale
// with the depth (16 << (depth - 8) ...). The way back is for a change, a difference of two colours:
// only the linear part applies, so enc = the inverse of dec's matrix (pl_matrix3x3_invert), no
// offsets.
// R'G'B' and float formats: the network's own domain; dec and enc are the identity whatever the
// levels say (the filter has always taken R'G'B' as full range). Float gray is R' = G' = B' = Y.
#include "frame_color.h"

namespace denoise {

FrameColor frame_color(const DenoisePixelFormat &fmt, const DenoiseColor &color) {
    FrameColor fc;
    const int depth = fmt.comp[0].depth;
    if (!fmt.is_float) fc.neutral = (float)(1 << (depth - 1)) / ((1 << depth) - 1);
    fc.xpos = color.chroma_xpos;
    fc.ypos = color.chroma_ypos;
    if (fmt.is_float || color.repr.sys == PL_COLOR_SYSTEM_RGB) {
        fc.rgb = true;
        for (int i = 0; i < 3; ++i) fc.dec[i][i] = fc.enc[i][i] = 1.f;
        return fc;
    }
    struct pl_color_repr repr = color.repr;
    repr.bits.sample_depth = repr.bits.color_depth = depth;
    repr.bits.bit_shift = 0;
    const struct pl_transform3x3 dec = pl_color_repr_decode(&repr, nullptr);
    struct pl_matrix3x3 enc = dec.mat;
    pl_matrix3x3_invert(&enc);
    for (int i = 0; i < 3; ++i) {
        fc.dec_off[i] = dec.c[i];
        for (int j = 0; j < 3; ++j) {
            fc.dec[i][j] = dec.mat.m[i][j];
            fc.enc[i][j] = enc.m[i][j];
        }
    }
    return fc;
}

}  // namespace denoise
