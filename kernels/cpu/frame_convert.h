// Native frames <-> the network's R'G'B' on the CPU (the CPU backend's pixel work; the CUDA
// backend does the same on the GPU). Layouts: DenoisePixelFormat / DenoiseImage (denoise.h);
// colour: FrameColor (backend.h); R'G'B' planes are width x height floats, row-major, in
// normalised units (v = code / (2^depth - 1), the network's [0, 1] before x = 2v - 1).
#ifndef DENOISE_CPU_FRAME_CONVERT_H
#define DENOISE_CPU_FRAME_CONVERT_H

#include <cstdint>
#include <vector>

#include "../backend.h"

namespace denoise {
namespace cpu {

// The colour components of one frame as the CPU backend keeps them: component c (Y', Cb, Cr or
// R', G', B') row-major at its own resolution (component 0: width x height, 1 and 2: cw x ch),
// as integer code values ((word >> shift) & (2^depth - 1)) in `code`, or for float formats the
// float32 bit patterns in `bits` (NaN payloads and signed zeros kept).
struct NativeSamples {
    std::vector<uint16_t> code[3];
    std::vector<uint32_t> bits[3];
};

class FrameConvert {
public:
    // For frames of `fmt` (validated by denoise_open) at width x height, chroma cw x ch.
    // Throws std::bad_alloc.
    FrameConvert(const DenoisePixelFormat &fmt, int width, int height, int cw, int ch);

    // Copy the colour components of `in` (host memory) into `s` (resized as needed).
    void read(const DenoiseImage &in, NativeSamples *s) const;

    // Write the colour components of `s` into `out`: each sample's `depth` bits at its `shift`
    // are replaced and every other bit of its word is kept (alpha, padding, the low bits of
    // p010-style words); `out` may be the memory `s` was read from.
    void write(const NativeSamples &s, const DenoiseImage &out) const;

    // Full-resolution R'G'B' of `s` into rgb[0..2] (width x height each):
    //   Y'CbCr: chroma upsampled bilinearly at the chroma location (tap k of an axis subsampled
    //     by sub sits at luma coordinate k sub + pos/256 (sub - 1)), then R'G'B' = dec v + dec_off
    //     (pl_transform3x3_apply's arithmetic);
    //   integer gray: R' = G' = B' = dec row 0 applied to (Y', neutral, neutral);
    //   R'G'B' (and float gray: R' = G' = B' = Y): the samples as they are.
    // Float formats are sanitised for the network: NaN -> 0, +Inf -> 1, -Inf -> 0, finite values
    // clamped to [-1, 2].
    void to_rgb(const NativeSamples &s, const FrameColor &color, float *const rgb[3]);

    // out = s + the change d (R'G'B', normalised units, width x height per plane; overwritten as
    // scratch), taken to the frame's own representation:
    //   Y'CbCr: (Y', Cb, Cr) change = enc d; Cb and Cr brought to chroma resolution first by the
    //     adjoint (transpose) of the bilinear upsampling, normalised by the weight each chroma
    //     sample receives ([1 3 3 1]/8 per axis for centred 2x chroma, [1 2 1]/4 co-sited);
    //     Y' scaled by amount.luma, Cb and Cr by amount.chroma;
    //   integer gray: Y' change = enc row 0 of d, scaled by amount.luma;
    //   R'G'B': l = 0.2126 dR + 0.7152 dG + 0.0722 dB (BT.709 luma), change = luma l (1, 1, 1) +
    //     chroma (d - l (1, 1, 1)) (= luma d when both amounts are equal);
    //   float gray: Y change = luma l.
    // Integers: out = clip(code + floor(change (2^depth - 1) + n), 0, 2^depth - 1), n in [0, 1)
    // from the blue-noise tile `noise` (kBlueNoiseSize^2) at the phase backend.h gives (one for
    // R', G', B'; one per component of Y'CbCr), so a zero change keeps the sample. Floats: out = sample + change where both are finite and
    // the change is not 0, else the sample's bits.
    void add_change(const NativeSamples &s, const FrameColor &color, float *const d[3], Amount amount,
                    const float *noise, NativeSamples *out);

private:
    // Bilinear taps from full resolution to one chroma axis: full-resolution coordinate i reads
    // chroma samples i0[i] (weight 1 - w[i]) and i1[i] (weight w[i]); wsum[k]: the total weight
    // chroma sample k receives; rows[k]: first and last full-resolution index that reads k.
    struct Taps {
        std::vector<int> i0, i1, first, last;
        std::vector<float> w, wsum;
        int pos = -1;
    };
    static void make_taps(Taps *t, int full, int n, int log2_sub, int pos);
    void set_taps(const FrameColor &color);
    int comp_w(int c) const { return c ? cw_ : width_; }
    int comp_h(int c) const { return c ? ch_ : height_; }
    // Component c of out = s + delta (c's own resolution) with the dither tile at `phase`.
    void apply_comp(const NativeSamples &s, int c, int phase, const float *delta, const float *noise,
                    NativeSamples *out) const;

    DenoisePixelFormat fmt_;
    int width_, height_, cw_, ch_;
    bool subsampled_;
    unsigned mask_;
    Taps tx_, ty_;
    std::vector<float> hbuf_;  // horizontal adjoint pass: 3 x height x cw
    std::vector<float> cacc_;  // chroma-resolution change: 3 x ch x cw
};

}  // namespace cpu
}  // namespace denoise

#endif
