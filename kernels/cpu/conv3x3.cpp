// 3x3 convolution with zero padding 1 on an NHWC map (the input fusion conv, 61 -> channels[0]).
//
// Method: copy the input into a zero-bordered map of width w+2, then the output at padded-row
// position p = y*(w+2) + x is sum over the 9 taps of in_p[p + ky*(w+2) + kx] x Wk[tap], i.e. each
// tap is ONE sgemm over all positions whose A operand is the padded map shifted by a constant
// offset (no im2col, which would be 9x the input: 250 MB at 854x480). Positions x = w, w+1 of each
// row are computed and discarded (2/(w+2) waste). The last two positions are skipped so the
// largest tap never reads past the padded map.
// Traffic: the padded copy (read in, write (h+2)(w+2)Cin), 9 GEMMs each reading the padded map
// and read-modify-writing the (h, w+2, Cout) accumulator, one final crop + bias pass.
#include "ops.h"
#include "../common/parallel.h"

#include <cstring>

namespace denoise {
namespace cpu {

void conv3x3_pack(const float *w, int Cout, int Cin, float *wk) {
    for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx)
            for (int ci = 0; ci < Cin; ++ci)
                for (int co = 0; co < Cout; ++co)
                    wk[((size_t)(ky * 3 + kx) * Cin + ci) * Cout + co] = w[(((size_t)co * Cin + ci) * 3 + ky) * 3 + kx];
}

size_t conv3x3_work_floats(int h, int w, int Cin, int Cout) {
    return (size_t)(h + 2) * (w + 2) * Cin + (size_t)h * (w + 2) * Cout;
}

void conv3x3(const float *in, int h, int w, int Cin, const float *wk, const float *bias, int Cout, float *out,
             float *work) {
    const int wp = w + 2;
    float *inp = work;
    float *acc = work + (size_t)(h + 2) * wp * Cin;
    parallel_for(h + 2, grain_for(h + 2), [&](int64_t y0_, int64_t y1_) {
    for (int y = (int)y0_; y < (int)y1_; ++y) {
        float *row = inp + (size_t)y * wp * Cin;
        if (y == 0 || y == h + 1) {
            std::memset(row, 0, sizeof(float) * wp * Cin);
            continue;
        }
        std::memset(row, 0, sizeof(float) * Cin);
        std::memcpy(row + Cin, in + (size_t)(y - 1) * w * Cin, sizeof(float) * w * Cin);
        std::memset(row + (size_t)(w + 1) * Cin, 0, sizeof(float) * Cin);
    }
    });
    const int M = h * wp - 2;
    for (int tap = 0; tap < 9; ++tap) {
        const int ky = tap / 3, kx = tap % 3;
        sgemm_rows(false, M, Cout, Cin, inp + ((size_t)ky * wp + kx) * Cin, Cin, wk + (size_t)tap * Cin * Cout, Cout,
                   tap ? 1.0f : 0.0f, acc, Cout);
    }
    parallel_for(h, grain_for(h), [&](int64_t y0_, int64_t y1_) {
    for (int y = (int)y0_; y < (int)y1_; ++y)
        for (int x = 0; x < w; ++x) {
            const float *a = acc + ((size_t)y * wp + x) * Cout;
            float *o = out + ((size_t)y * w + x) * Cout;
            for (int c = 0; c < Cout; ++c) o[c] = a[c] + bias[c];
        }
    });
}

}  // namespace cpu
}  // namespace denoise
