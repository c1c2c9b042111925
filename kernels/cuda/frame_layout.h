// Where a native frame's colour samples are, for the copies that move frames to, from and
// within the GPU (backend_cuda.cu): per plane the byte span of a row that the colour components
// cover, which bits of those bytes are colour bits, and a compact layout (planes one after the
// other, rows at a 256-byte multiple pitch) used for the device rings and the pinned staging.
// Host-only (g++-includable).
#ifndef DENOISE_CUDA_FRAME_LAYOUT_H
#define DENOISE_CUDA_FRAME_LAYOUT_H

#include <cstdint>
#include <string>
#include <vector>

#include "../denoise.h"
#include "ops.h"

namespace denoise {
namespace cuda {

struct PlaneLayout {
    bool used = false;          // holds a colour component
    int64_t row_bytes = 0;      // bytes of a row up to the last colour byte
    int rows = 0;
    int64_t pitch = 0;          // in the compact copy
    int64_t offset = 0;         // of the plane in the compact copy
    std::vector<uint8_t> bits;  // row_bytes: the colour bits of each byte of a row
    bool covered = false;       // every bit of [0, row_bytes) is a colour bit
};

struct FrameLayout {
    PlaneLayout plane[4];
    int64_t bytes = 0;           // of the compact copy
    unsigned partial_planes = 0; // bit p: plane p used but not covered (alpha, padding, p010's low bits)
};

// The layout of fmt at width x height (chroma -((-W) >> log2_chroma_w) x ...).
FrameLayout frame_layout(const DenoisePixelFormat &fmt, int width, int height);

// "" when img's planes can hold the frame: a non-null pointer for every used plane and
// |linesize| >= row_bytes (negative linesizes only where allow_negative); else what is wrong.
std::string check_image(const FrameLayout &L, const DenoiseImage &img, bool allow_negative);

// The compact copy at base as a DevFrame (device or host pointer alike).
DevFrame compact_frame(const FrameLayout &L, uint8_t *base);
// img's planes as a DevFrame (positive linesizes).
DevFrame image_frame(const DenoiseImage &img);

// Host frame -> compact copy at dst (rows of row_bytes; linesizes may be negative), in bands of
// rows on the process-wide thread pool (common/parallel.h).
void copy_to_compact(const FrameLayout &L, const DenoiseImage &in, uint8_t *dst);
// Compact copy at src -> host frame: covered planes row by row, the others merged under their
// colour bits (every other bit of out kept).
void copy_from_compact(const FrameLayout &L, const uint8_t *src, const DenoiseImage &out);

}  // namespace cuda
}  // namespace denoise

#endif
