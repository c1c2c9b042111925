// Scans of a host frame's samples that the engine offers its caller (denoise.h
// denoise_scene_cut, denoise_count_nonfinite), so that the caller reads no samples itself.
// Host-only.
#ifndef DENOISE_FRAME_SCAN_H
#define DENOISE_FRAME_SCAN_H

#include <cstdint>
#include <vector>

#include "denoise.h"

namespace denoise {

// Scene-cut scores of successive frames of one size, as FFmpeg's scdet filter scores them
// (libavfilter/vf_scdet.c, get_scene_score()): mafd = mean absolute frame difference in percent
// of full scale, score = min(mafd, |mafd - previous mafd|), a cut when score >= threshold; the
// min() makes a steady high difference (noise, constant motion) not a cut, only a jump. Unlike
// scdet the difference is taken on block means of the luma read from the native frame: Y' in
// R'G'B' units (normalised code values times the luma gain of the frame's decoding matrix, 255/219
// for 8-bit limited range, so that limited and full range score alike), or G' of R'G'B' frames
// (floats as the network sees them: non-finite as 0 or 1, clamped to [-1, 2]). Block means
// average the noise down (sigma 50 8-bit noise moves an 8x8 block mean by about 2-3%) while a
// hard cut changes most blocks by tens of percent.
// Blocks are B x B pixels, B sized for the frame so that every frame size is judged on about
// kGrid blocks (the 40 x 24 blocks of 8 x 8 of the 320x192 frames the threshold was first
// measured on), never smaller than kBlockMin: with a fixed 8 x 8 block a 1920x1080 frame's block
// means keep detail that a smaller frame's average away, so ordinary motion scored 2x higher
// there and cut shots apart. Frames with fewer than kMinPixels pixels are too small to judge (a
// few noisy samples look like a cut) and never make one. docs/robustness.md has the measurements.
class SceneScore {
public:
    static constexpr int kBlockMin = 8;
    static constexpr int kGrid = 960;
    static constexpr int kMinPixels = 256;

    // Block side for w x h frames: max(kBlockMin, round(sqrt(w h / kGrid))) (8 up to 320x192; 21
    // at 854x480, 46 at 1920x1080, 93 at 3840x2160).
    static int block_size(int w, int h);

    // For frames of w x h pixels in format fmt. Allocates (std::bad_alloc).
    SceneScore(const DenoisePixelFormat &fmt, int w, int h);

    // Score frame `in` (host memory, checked by the caller) against the frame scored before it:
    // 1 for a cut (score >= threshold > 0, frame of at least kMinPixels), else 0; 0 with score 0
    // for the first frame after construction or reset(). luma_gain: the decoding matrix's
    // dec[0][0] (1 for R'G'B'). The block sums run on the thread pool (common/parallel.h), each
    // block row on one thread in one order, so the scores do not depend on the thread count.
    int score(const DenoiseImage &in, float luma_gain, float threshold, double *score);

    // Forget the previous frame: the next one is a first frame.
    void reset() { have_prev_ = false; }

private:
    DenoisePixelFormat fmt_;
    int w_, h_, block_, bw_, bh_;
    std::vector<float> cur_, prev_;  // block means (R'G'B' units)
    std::vector<int> count_;         // pixels per block
    bool have_prev_ = false;
    double prev_mafd_ = 0;
};

// Non-finite samples (NaN, +-Inf) among the colour components of host frame `in` of w x h
// pixels in float format fmt (0 for an integer format).
int64_t count_nonfinite(const DenoisePixelFormat &fmt, int w, int h, const DenoiseImage &in);

}  // namespace denoise

#endif
