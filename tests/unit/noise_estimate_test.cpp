// The noise estimator behind sigma=auto (kernels/common/noise_estimate.h) on synthetic frames:
// flat and textured content with known white Gaussian noise, clipped 8-bit noise, the value
// mapping (scale, offset), interleaved planes, segments and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/noise_estimate.h"

using denoise::NoiseEstimateParams;
using denoise::NoiseEstimator;
using denoise::NoisePlane;

namespace {

// Test content in [0, 1] like a real frame's mix: a smooth ramp everywhere, and for x < 100
// strong texture (two sinusoid gratings and hard edges) that no patch there can pass as flat.
float content(int x, int y, int c) {
    float v = 0.2f + 0.5f * x / 512.f + 0.05f * std::sin(0.02f * y + 0.5f * c);
    if (x < 100) {
        v += 0.08f * std::sin(0.21f * x + 0.7f * c) * std::cos(0.13f * y) + 0.04f * std::sin(0.9f * x + 1.3f * y);
        v += ((x / 37 + y / 53) % 2) ? 0.1f : 0.f;
    }
    return std::min(std::max(v, 0.05f), 0.95f);
}

struct Frame {
    int w, h;
    std::vector<float> rgb;  // 3 planes
    NoisePlane planes[3];
    Frame(int w_, int h_) : w(w_), h(h_), rgb((size_t)3 * w_ * h_) {
        for (int c = 0; c < 3; ++c) {
            planes[c].data = rgb.data() + (size_t)c * w * h;
            planes[c].pixel_stride = 1;
            planes[c].row_stride = w;
        }
    }
    float &at(int c, int x, int y) { return rgb[((size_t)c * h + y) * w + x]; }
};

enum class Content { Flat, Textured };

// sigma in 8-bit code values; quantise8: clip to [0, 1] and round to 8-bit codes
Frame make_frame(int w, int h, Content kind, double sigma, unsigned seed, bool quantise8 = false, float flat = 0.5f) {
    Frame f(w, h);
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.f, 1.f);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                float v = (kind == Content::Flat ? flat : content(x, y, c)) + (float)(sigma / 255.0) * n(rng);
                if (quantise8) v = std::rint(std::min(std::max(v, 0.f), 1.f) * 255.f) / 255.f;
                f.at(c, x, y) = v;
            }
    return f;
}

float estimate_one(const Frame &f, const NoiseEstimateParams &p = NoiseEstimateParams()) {
    NoiseEstimator e(p);
    EXPECT_EQ(e.push(f.planes, 3, f.w, f.h), 0);
    return e.sigma();
}

}  // namespace

TEST(NoiseEstimate, Tau0IsTheGammaQuantileOfFlatPatchGradientEnergy) {
    // d = 7: rank 45, trace 35 -> Gamma(22.5, 2*35/45); compare with the Wilson-Hilferty
    // approximation of the chi-square quantile (k = 45 degrees of freedom, z(1 - 1e-6) = 4.7534)
    const double k = 45, z = 4.753424, theta = 2.0 * 35 / 45;
    const double chi2 = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    const double tau0 = denoise::noise_estimate_detail::weak_texture_tau0(7, 1 - 1e-6);
    EXPECT_NEAR(tau0, chi2 * theta / 2, 0.01 * tau0);
    EXPECT_GT(tau0, 35.0 * 2);  // far above the mean gradient energy 35 s2 of a flat patch
}

TEST(NoiseEstimate, SmallestEigenvalues) {
    // diag(3, 1, 2) rotated: eigenvalues 1, 2, 3
    const double c = std::cos(0.4), s = std::sin(0.4);
    const double r[9] = {c, -s, 0, s, c, 0, 0, 0, 1}, d[3] = {3, 1, 2};
    std::vector<double> a(9, 0.0);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k) a[i * 3 + j] += r[i * 3 + k] * d[k] * r[j * 3 + k];
    const std::vector<double> ev = denoise::noise_estimate_detail::smallest_eigenvalues(a, 3, 2);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_NEAR(ev[0], 1.0, 1e-12);
    EXPECT_NEAR(ev[1], 2.0, 1e-12);
}

TEST(NoiseEstimate, ImmerkaerOnFlatNoise) {
    for (double sigma : {3.0, 20.0}) {
        const Frame f = make_frame(256, 192, Content::Flat, sigma, 7);
        const double s = denoise::noise_estimate_detail::immerkaer_sigma(f.planes[1], f.w, f.h, 1.f, 0.f);
        EXPECT_NEAR(s, sigma, 0.03 * sigma) << "sigma " << sigma;
    }
}

TEST(NoiseEstimate, FlatFrameWithWhiteNoise) {
    for (double sigma : {1.0, 5.0, 15.0, 30.0, 50.0}) {
        const Frame f = make_frame(320, 240, Content::Flat, sigma, 11);
        const float s = estimate_one(f);
        EXPECT_NEAR(s, sigma, 0.03 * sigma) << "sigma " << sigma;
    }
}

TEST(NoiseEstimate, TexturedFrameWithWhiteNoise) {
    // the texture's own energy (x < 100) must not be taken for noise
    for (double sigma : {2.0, 5.0, 10.0, 25.0, 50.0}) {
        const Frame f = make_frame(320, 240, Content::Textured, sigma, 13);
        const float s = estimate_one(f);
        EXPECT_NEAR(s, sigma, 0.04 * sigma + 0.2) << "sigma " << sigma;
    }
}

TEST(NoiseEstimate, NoiselessFlatFrameIsZero) {
    const Frame f = make_frame(64, 64, Content::Flat, 0.0, 1);
    EXPECT_EQ(estimate_one(f), 0.f);
}

TEST(NoiseEstimate, ClippedEightBitNoiseNearTheLimits) {
    // half the frame near white (240), half mid-grey; sigma 30 clips a large part of the bright
    // half. The clip guard skips the bright patches; without it the estimate drops.
    const int w = 320, h = 240;
    const double sigma = 30;
    Frame f(w, h);
    {
        std::mt19937 rng(5);
        std::normal_distribution<float> n(0.f, 1.f);
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x) {
                    const float base = x < w / 2 ? 240.f / 255.f : 0.5f;
                    const float v = base + (float)(sigma / 255) * n(rng);
                    f.at(c, x, y) = std::rint(std::min(std::max(v, 0.f), 1.f) * 255.f) / 255.f;
                }
    }
    const float guarded = estimate_one(f);
    // 8-bit rounding adds 1/12 code value^2 of variance
    EXPECT_NEAR(guarded, std::sqrt(sigma * sigma + 1.0 / 12), 0.04 * sigma);
    NoiseEstimateParams no_guard;
    no_guard.clip_guard = 0;
    EXPECT_LT(estimate_one(f, no_guard), guarded - 0.05 * sigma);
}

TEST(NoiseEstimate, ScaleOffsetAndInterleavedLayout) {
    const Frame f = make_frame(200, 150, Content::Textured, 12.0, 21);
    const float ref = estimate_one(f);
    // the same samples as x = 2 v - 1 in [-1, 1], interleaved (NHWC)
    std::vector<float> nhwc((size_t)f.w * f.h * 3);
    for (int c = 0; c < 3; ++c)
        for (size_t k = 0; k < (size_t)f.w * f.h; ++k) nhwc[k * 3 + c] = 2.f * f.rgb[c * (size_t)f.w * f.h + k] - 1.f;
    NoisePlane pl[3];
    for (int c = 0; c < 3; ++c) {
        pl[c].data = nhwc.data() + c;
        pl[c].pixel_stride = 3;
        pl[c].row_stride = (ptrdiff_t)f.w * 3;
    }
    NoiseEstimator e;
    ASSERT_EQ(e.push(pl, 3, f.w, f.h, 0.5f, 0.5f), 0);
    EXPECT_NEAR(e.sigma(), ref, 1e-3 * ref);
}

TEST(NoiseEstimate, SegmentSmoothsAndResetForgets) {
    const int w = 160, h = 120;
    NoiseEstimator e;
    EXPECT_EQ(e.sigma(), -1.f);  // nothing pushed
    float frame_err = 0, seg_err = 0;
    for (int t = 0; t < 8; ++t) {
        const Frame f = make_frame(w, h, Content::Textured, 20.0, 100 + t);
        ASSERT_EQ(e.push(f.planes, 3, w, h), 0);
        frame_err += std::fabs(e.sigma_frame() - 20.f);
        seg_err += std::fabs(e.sigma() - 20.f);
        EXPECT_NEAR(e.sigma(), 20.0, 1.0) << "frame " << t;
    }
    EXPECT_GT(e.patches(), 3 * 4 * 49.0);
    // summing the frames' patches is no worse than each frame alone
    EXPECT_LE(seg_err, frame_err + 0.05f);
    // a new segment with another noise level: after reset() the old one is forgotten at once
    e.reset();
    const Frame g = make_frame(w, h, Content::Textured, 5.0, 999);
    ASSERT_EQ(e.push(g.planes, 3, w, h), 0);
    EXPECT_NEAR(e.sigma(), 5.0, 0.5);
    // decay 0: every frame on its own
    NoiseEstimateParams p;
    p.decay = 0;
    NoiseEstimator e0(p);
    const Frame a = make_frame(w, h, Content::Flat, 30.0, 1), b = make_frame(w, h, Content::Flat, 10.0, 2);
    ASSERT_EQ(e0.push(a.planes, 3, w, h), 0);
    ASSERT_EQ(e0.push(b.planes, 3, w, h), 0);
    EXPECT_FLOAT_EQ(e0.sigma(), e0.sigma_frame());
    EXPECT_NEAR(e0.sigma(), 10.0, 0.5);
}

TEST(NoiseEstimate, PerPlaneAndGray) {
    // planes with different noise: sigma_plane() tells them apart, sigma() is their RMS
    const int w = 200, h = 160;
    Frame f(w, h);
    const double sig[3] = {4.0, 8.0, 16.0};
    std::mt19937 rng(3);
    std::normal_distribution<float> n(0.f, 1.f);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) f.at(c, x, y) = content(x, y, c) + (float)(sig[c] / 255) * n(rng);
    NoiseEstimator e;
    ASSERT_EQ(e.push(f.planes, 3, w, h), 0);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(e.sigma_plane(c), sig[c], 0.06 * sig[c]) << "plane " << c;
    EXPECT_NEAR(e.sigma(), std::sqrt((16.0 + 64.0 + 256.0) / 3), 0.5);
    EXPECT_EQ(e.sigma_plane(3), -1.f);
    NoiseEstimator gray;
    ASSERT_EQ(gray.push(f.planes + 1, 1, w, h), 0);
    EXPECT_NEAR(gray.sigma(), 8.0, 0.5);
}

TEST(NoiseEstimate, BadArgumentsAndTinyFrames) {
    NoiseEstimator e;
    const Frame f = make_frame(48, 48, Content::Flat, 10.0, 4);
    EXPECT_EQ(e.push(nullptr, 3, 48, 48), -1);
    EXPECT_EQ(e.push(f.planes, 0, 48, 48), -1);
    EXPECT_EQ(e.push(f.planes, 4, 48, 48), -1);
    EXPECT_EQ(e.push(f.planes, 3, 6, 48), -1);  // narrower than a patch
    NoisePlane missing[3] = {f.planes[0], NoisePlane(), f.planes[2]};
    EXPECT_EQ(e.push(missing, 3, 48, 48), -1);
    EXPECT_EQ(e.sigma(), -1.f);
    // 8x8: too few patches for a 49-dimensional covariance: no estimate, but no error
    const Frame tiny = make_frame(8, 8, Content::Flat, 10.0, 4);
    EXPECT_EQ(e.push(tiny.planes, 3, 8, 8), 0);
    EXPECT_EQ(e.sigma(), -1.f);
    // a usable frame afterwards gives an estimate
    EXPECT_EQ(e.push(f.planes, 3, 48, 48), 0);
    EXPECT_NEAR(e.sigma(), 10.0, 1.5);
}
