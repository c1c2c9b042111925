// sigma=auto (sigma_auto.h): the estimation planes of a frame and the map from their noise
// variances to the network's sigma, and the engine's per-segment estimator state.
#include "sigma_auto.h"

#include <algorithm>

namespace denoise {

NoisePlan noise_plan(const StreamSpec &spec, const FrameColor &color) {
    NoisePlan p;
    const DenoisePixelFormat &f = spec.format;
    const bool subsampled = f.nb_components == 3 && (f.log2_chroma_w || f.log2_chroma_h);
    if (!subsampled) {
        // the converted R'G'B' frame (gray: R' = G' = B', one plane)
        p.native = false;
        p.planes = f.nb_components == 1 ? 1 : 3;
        for (int j = 0; j < p.planes; ++j) {
            p.width[j] = spec.width;
            p.height[j] = spec.height;
            p.gain[j] = 1.0 / p.planes;
        }
        return p;
    }
    p.native = true;
    p.planes = 3;
    for (int j = 0; j < 3; ++j) {
        p.width[j] = j ? spec.cw : spec.width;
        p.height[j] = j ? spec.ch : spec.height;
        double g = 0;
        for (int c = 0; c < 3; ++c) g += (double)color.dec[c][j] * color.dec[c][j];
        p.gain[j] = g / 3.0;
    }
    return p;
}

int SigmaAuto::begin(NoiseSource &src, const NoisePlan &plan) {
    pending_ = nullptr;
    if (!src.asynchronous()) {
        const int rc = est_.push(src);
        if (rc) return rc;
        sigma_ = est_.sigma_weighted(plan.gain);
        return 0;
    }
    const int rc = est_.start(src);
    if (rc) return rc;
    pending_ = &src;
    std::copy(plan.gain, plan.gain + 3, gain_);
    return 0;
}

int SigmaAuto::end() {
    if (!pending_) return 0;
    const int rc = est_.push(*pending_);
    if (rc) return rc;
    pending_ = nullptr;
    sigma_ = est_.sigma_weighted(gain_);
    return 0;
}

void SigmaAuto::reset() {
    est_.reset();
    sigma_ = -1;
    pending_ = nullptr;
}

}  // namespace denoise
