// One frame's colour transform (FrameColor), derived once on the host from its DenoiseColor
// (frame_color.cpp) so that the engine and every backend apply the same numbers, and the scales
// of the change's luma and chroma parts (Amount) that the backends apply through it.
#ifndef DENOISE_COMMON_FRAME_COLOR_H
#define DENOISE_COMMON_FRAME_COLOR_H

#include "../denoise.h"

namespace denoise {

struct FrameColor {
    float dec[3][3] = {};    // R'G'B' = dec v + dec_off, v = normalised (Y', Cb, Cr); identity for R'G'B'
    float dec_off[3] = {};
    float enc[3][3] = {};    // normalised code change = enc (R'G'B' change): dec's matrix inverted
    float neutral = 0.5f;    // gray: normalised value of the absent chroma ((1 << (depth-1)) / (2^depth - 1))
    bool rgb = false;        // R'G'B' system (also float gray: R' = G' = B' = Y, luma of the change by BT.709)
    int xpos = 0, ypos = 0;  // chroma (0,0) location, 1/256 luma pixels
};
FrameColor frame_color(const DenoisePixelFormat &fmt, const DenoiseColor &color);

// Scales of the luma and chroma parts of the change, 0..1 (denoise.h DenoiseAmount, with its
// `amount` folded into both by engine.cpp: luma = amount * luma, chroma = amount * chroma).
struct Amount {
    float luma = 1.f, chroma = 1.f;
};

}  // namespace denoise

#endif
