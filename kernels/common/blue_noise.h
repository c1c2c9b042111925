// The engine's dither tile: 64 x 64 blue noise (void and cluster), values in [0, 1).
//
// The tile is libplacebo's pl_generate_blue_noise(data, 64) (libplacebo/dither.h) taken once
// and kept as data (blue_noise.cpp): that generator breaks ties with rand(), so what it returns
// depends on the process-wide rand() state. Calling it at run time made the output depend on
// whatever else in the process had called rand() (with NVDEC decoding in the same ffmpeg, the
// dither, and so every output sample's rounding, changed from run to run: 53.6 dB between two
// identical commands, docs/journal/2026-12-07-cuda-engine-gpu-runs.md), and seeding it would
// change the host application's rand() sequence. The table holds the ranks 0..4095 that
// pl_generate_blue_noise(64) produced from the initial rand() state (srand(1)) with libplacebo
// 4.208, i.e. the tile every earlier build made in a process where nothing had called rand()
// first, so outputs and goldens are unchanged; tests/unit/blue_noise_test.cpp checks both.
#ifndef DENOISE_COMMON_BLUE_NOISE_H
#define DENOISE_COMMON_BLUE_NOISE_H

#include <cstdint>

namespace denoise {

constexpr int kBlueNoiseLog2 = 6;
constexpr int kBlueNoiseSize = 1 << kBlueNoiseLog2;
// Dither at sample (x, y) of phase p: blue_noise[((y + 41 p) & 63) * 64 + ((x + 23 p) & 63)]. R'G'B'
// frames use phase 0 for all three components, one threshold per pixel as libplacebo's
// pl_shader_dither applies one bias to every component (src/shaders/dithering.c), so that a
// neutral change (dR' = dG' = dB') rounds alike in the three and adds no chroma; Y'CbCr frames
// use phase c for component c (tile shifted per component, their dithers decorrelated; a neutral
// change has no Cb or Cr part but the float residue of the inverse matrix, which moves no sample
// while it stays under 1/8192 code value, see blue_noise_tile() below).

// kBlueNoiseSize^2 ranks, row-major: each of 0 .. 4095 once.
extern const uint16_t kBlueNoiseRanks[64 * 64];

// The tile as the backends use it: (rank + 0.5) / 4096, the centres of 4096 equal bins of [0, 1)
// (libplacebo's tile is rank / 4096, its bins' lower edges). Mean exactly 1/2, so floor(x + n)
// is unbiased; floor(0 + n) == 0 for each (a zero change keeps a sample bit-exact), and so is
// floor(e + n) for |e| < 1/8192 code value (e.g. the float residue that a neutral R'G'B' change of
// a few code values leaves in Cb and Cr, about 2e-5 of a 16-bit code). Row-major, kBlueNoiseSize
// x kBlueNoiseSize floats; the same pointer for the process's lifetime.
const float *blue_noise_tile();

}  // namespace denoise

#endif
