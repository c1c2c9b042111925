// sigma=auto: which planes of a frame the noise estimator (common/noise_estimate.h) reads, and how
// their noise variances make the network's sigma.
//
// The network's sigma (weights/denoise_train/noise_models.py, docs/model.md) is the root mean square over the
// R', G', B' samples of the noise's standard deviation, in 8-bit code values: for noise n_c in
// R'G'B' component c, sigma^2 = (1/3) sum_c Var(n_c). The estimator measures the variance of
// spatially white noise on one plane (weak-texture PCA), so:
//   - formats without chroma subsampling (R'G'B', float, Y'CbCr 4:4:4, gray): the planes are the
//     frame converted to R'G'B' exactly as the network gets it (R', G', B'; gray: R' alone,
//     since R' = G' = B'), and sigma^2 = mean of their variances. White noise in Y'CbCr 4:4:4
//     stays white in R'G'B' (a per-pixel matrix), so this is exact for any such noise, whatever
//     its correlation between components.
//   - subsampled Y'CbCr (4:2:0, 4:2:2, ...): chroma noise lives at chroma resolution; in the
//     upsampled R'G'B' frame it is low-pass and the estimator would not see it. The planes are the
//     native Y', Cb, Cr planes at their own resolutions (normalised code values), and with the
//     frame's decoding matrix dec (R'G'B' = dec (Y', Cb, Cr) + dec_off, frame_color.cpp)
//       sigma^2 = (1/3) sum_c sum_j dec[c][j]^2 var_j,   gain_j = (1/3) sum_c dec[c][j]^2,
//     the R'G'B' noise of independent Y', Cb, Cr noise carried one sample per chroma site, as
//     weights/denoise_train/noise_models.py's ycc420 model defines it (BT.709: gain_Y = 1.164^2 for limited
//     range, sum of the chroma gains K = 2.0591 times 1.138^2).
// Host-only.
#ifndef DENOISE_SIGMA_AUTO_H
#define DENOISE_SIGMA_AUTO_H

#include "backend.h"
#include "common/noise_estimate.h"

namespace denoise {

struct NoisePlan {
    bool native = false;            // planes are native components (true) or converted R'G'B' (false)
    int planes = 0;                 // 1..3
    int width[3] = {}, height[3] = {};
    double gain[3] = {};            // sigma^2 = sum_j gain[j] var_j
    NoiseEstimateParams params;     // the estimator's; sources build the patch grid from it
};

// The plan for frames of `spec` with colour `color`.
NoisePlan noise_plan(const StreamSpec &spec, const FrameColor &color);

// Estimator state of one engine: a segment's estimate, updated per pushed frame.
// Smoothing (common/noise_estimate.cpp): the selected patches' scatter matrices S_f and counts n_f of
// the segment's frames are summed with weight 0.9^(age in frames), S = 0.9 S + S_f, n = 0.9 n + n_f
// (an exponential moving average of the patch statistics, about 10 frames of memory), and the
// variance is the PCA estimate of S / n. reset() starts a segment (scene cut, stream start).
class SigmaAuto {
public:
    // Add a frame (the backend's source over it) in two steps, begin() then end(); sigma()
    // includes it after end(). With an asynchronous source (NoiseSource::asynchronous(): the
    // GPU's) begin() only queues the frame's first statistics and end() reads them, waiting if
    // they are not done, and runs any further round there (a segment's first frame: Immerkaer's
    // start, then three rounds); with a synchronous one begin() adds the frame and end() has
    // nothing left to do. Between the two the source must stay over the frame, and no other
    // frame may begin. Both return 0 or the source's DENOISE_E* code; after a failed end() the
    // frame is still begun (end() again retries it) until cancel() or reset().
    int begin(NoiseSource &src, const NoisePlan &plan);
    int end();
    // Forget a frame begun and not ended (the engine dropped it); the estimate stays as it was.
    void cancel() { pending_ = nullptr; }
    // The segment's sigma after the frames ended so far (8-bit code values), or `fallback` while
    // there is no estimate (frames too small for the patch grid, or no weak-texture patch yet).
    float sigma(float fallback) const { return sigma_ >= 0 ? sigma_ : fallback; }
    void reset();
    // The per-plane state behind it (tools and tests).
    const NoiseEstimator &estimator() const { return est_; }

private:
    NoiseEstimator est_;
    float sigma_ = -1;
    NoiseSource *pending_ = nullptr;  // the asynchronous source of the frame begun, not yet ended
    double gain_[3] = {};             // its plan's gains
};

}  // namespace denoise

#endif
