// sigma=auto through the engine API (denoise.h, kernels/sigma_auto.h), CPU backend: the
// estimation plan and its gains, the source interface against the plane interface, and the
// engine's per-frame sigma (denoise_output_sigma) on frames with known added noise: R'G'B' AWGN,
// Y'CbCr 4:2:0 noise on the native planes (the network's sigma through the decoding matrix),
// segments, fixed sigma, bad values, independence from how pushes and pulls interleave, and the
// deferred read of each estimate (DENOISE_SIGMA_AUTO_DEFER=1, the CUDA backend's order) giving
// the same outputs as the read within the push, one frame later.
// Weights: tests/data/golden_weights.safetensors (random; only the sigma matters here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "common/noise_estimate.h"
#include "engine_test_util.h"
#include "pixfmt_descriptors.h"
#include "sigma_auto.h"

using namespace denoise_test;

namespace {

const std::string &weights() {
    static const std::string w = data_dir() + "/golden_weights.safetensors";
    return w;
}

constexpr int kW = 96, kH = 80;

// Smooth content in [0.1, 0.9] with a textured band (x < 24) that no patch can pass as flat.
float content(int x, int y, int c, int t) {
    float v = 0.3f + 0.4f * x / kW + 0.1f * std::sin(0.05f * y + 0.9f * c + 0.2f * t);
    if (x < 24) v += 0.12f * std::sin(0.8f * x + 0.6f * y + c);
    return std::fmin(std::fmax(v, 0.1f), 0.9f);
}

// Planar float R'G'B' frames (R, G, B planes of kW x kH) with AWGN of `sigma` code values.
std::vector<std::vector<float>> rgb_frames(int n, double sigma, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<std::vector<float>> f(n, std::vector<float>((size_t)3 * kW * kH));
    for (int t = 0; t < n; ++t)
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < kH; ++y)
                for (int x = 0; x < kW; ++x)
                    f[t][((size_t)c * kH + y) * kW + x] = content(x, y, c, t) + (float)(sigma / 255) * g(rng);
    return f;
}

DenoiseImage rgb_image(std::vector<float> &f) {
    const size_t p = (size_t)kW * kH;
    return rgb_f32_image(f.data(), f.data() + p, f.data() + 2 * p, kW);
}

// 8-bit yuv420p frames (BT.601 limited): smooth Y'CbCr plus white noise of `s` code values on
// every Y', Cb, Cr sample (one per chroma site), rounded and clipped.
std::vector<std::vector<uint8_t>> yuv_frames(int n, double s, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    const int cw = kW / 2, ch = kH / 2;
    std::vector<std::vector<uint8_t>> f(n, std::vector<uint8_t>((size_t)kW * kH + 2 * cw * ch));
    for (int t = 0; t < n; ++t) {
        uint8_t *p = f[t].data();
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x)
                *p++ = (uint8_t)std::lround(std::fmin(255, std::fmax(0, 16 + 219 * content(x, y, 0, t) + s * g(rng))));
        for (int c = 1; c < 3; ++c)
            for (int y = 0; y < ch; ++y)
                for (int x = 0; x < cw; ++x)
                    *p++ = (uint8_t)std::lround(
                        std::fmin(255, std::fmax(0, 128 + 40 * (content(2 * x, 2 * y, c, t) - 0.5) + s * g(rng))));
    }
    return f;
}

DenoiseImage yuv_image(std::vector<uint8_t> &f) {
    DenoiseImage im{};
    const int cw = kW / 2, ch = kH / 2;
    im.data[0] = f.data();
    im.data[1] = f.data() + (size_t)kW * kH;
    im.data[2] = im.data[1] + (size_t)cw * ch;
    im.linesize[0] = kW;
    im.linesize[1] = im.linesize[2] = cw;
    im.color.repr.sys = PL_COLOR_SYSTEM_BT_601;
    im.color.repr.levels = PL_COLOR_LEVELS_LIMITED;
    im.color.chroma_xpos = 0;
    im.color.chroma_ypos = 128;
    return im;
}

struct Engine {
    DenoiseEngine *e = denoise_alloc();
    ~Engine() { denoise_free(&e); }
};

// Push every frame, flush, pull all (output t over frame t's own memory): the per-output sigma.
// `pull_early`: also pull whenever possible after each push.
template <class Frames, class Img>
std::vector<float> run(DenoiseEngine *e, Frames &frames, Img image, bool pull_early) {
    std::vector<float> sig;
    auto pull_all = [&]() {
        for (;;) {
            DenoiseImage out = image(frames[std::min(sig.size(), frames.size() - 1)]);  // the last: EOF
            const int rc = denoise_pull(e, &out);
            if (rc == DENOISE_EAGAIN || rc == DENOISE_EOF) return;
            EXPECT_EQ(rc, 0) << denoise_last_error(e);
            if (rc) return;
            float s = -2;
            EXPECT_EQ(denoise_output_sigma(e, &s), 0);
            sig.push_back(s);
        }
    };
    for (auto &f : frames) {
        DenoiseImage in = image(f);
        EXPECT_EQ(denoise_push(e, &in), 0) << denoise_last_error(e);
        if (pull_early) pull_all();
    }
    EXPECT_EQ(denoise_flush(e), 0);
    pull_all();
    return sig;
}

}  // namespace

TEST(SigmaAutoPlan, GainsFollowTheDecodingMatrix) {
    denoise::StreamSpec spec;
    spec.width = 64;
    spec.height = 48;
    spec.cw = 32;
    spec.ch = 24;
    spec.format = pixfmt_descriptor("yuv420p").f;
    DenoiseColor col{};
    col.repr.sys = PL_COLOR_SYSTEM_BT_709;
    col.repr.levels = PL_COLOR_LEVELS_LIMITED;
    const denoise::NoisePlan p = denoise::noise_plan(spec, denoise::frame_color(spec.format, col));
    EXPECT_TRUE(p.native);
    ASSERT_EQ(p.planes, 3);
    EXPECT_EQ(p.width[0], 64);
    EXPECT_EQ(p.height[2], 24);
    // weights/denoise_train/noise_models.py: luma (255/219)^2; chroma together K (255/224)^2, K = 2.0591
    EXPECT_NEAR(p.gain[0], std::pow(255.0 / 219, 2), 2e-4);
    const double K = (1.5748 * 1.5748 + 0.1873 * 0.1873 + 0.4681 * 0.4681 + 1.8556 * 1.8556) / 3;
    EXPECT_NEAR(p.gain[1] + p.gain[2], K * std::pow(255.0 / 224, 2), 2e-3);

    spec.format.log2_chroma_w = spec.format.log2_chroma_h = 0;  // 4:4:4: the converted R'G'B'
    spec.cw = spec.width;
    spec.ch = spec.height;
    const denoise::NoisePlan q = denoise::noise_plan(spec, denoise::frame_color(spec.format, col));
    EXPECT_FALSE(q.native);
    ASSERT_EQ(q.planes, 3);
    for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(q.gain[j], 1.0 / 3);
    spec.format.nb_components = 1;  // gray: R' = G' = B', one plane
    const denoise::NoisePlan g = denoise::noise_plan(spec, denoise::frame_color(spec.format, col));
    ASSERT_EQ(g.planes, 1);
    EXPECT_DOUBLE_EQ(g.gain[0], 1.0);
}

TEST(SigmaAutoPlan, SourceAndPlanesGiveTheSameEstimate) {
    auto f = rgb_frames(3, 9.0, 5);
    denoise::NoiseEstimator a, b;
    const size_t p = (size_t)kW * kH;
    for (auto &fr : f) {
        denoise::NoisePlane pl[3];
        for (int c = 0; c < 3; ++c) {
            pl[c].data = fr.data() + c * p;
            pl[c].row_stride = kW;
        }
        ASSERT_EQ(a.push(pl, 3, kW, kH), 0);
        denoise::CpuNoiseSource src(pl, 3, kW, kH, 1.f, 0.f, denoise::NoiseEstimateParams());
        ASSERT_EQ(b.push(src), 0);
        EXPECT_EQ(a.sigma(), b.sigma());
        EXPECT_EQ(a.sigma_frame(), b.sigma_frame());
    }
    const double third[3] = {1.0 / 3, 1.0 / 3, 1.0 / 3};
    EXPECT_NEAR(b.sigma_weighted(third), b.sigma(), 1e-5);
    EXPECT_NEAR(a.sigma(), 9.0, 0.6);
}

TEST(SigmaAutoEngine, RgbNoiseSegmentsAndFixedSigma) {
    Engine en;
    DenoiseParams p = cpu_params(weights().c_str(), DENOISE_SIGMA_AUTO, kW, kH, rgb_f32_format(), 1);
    ASSERT_EQ(denoise_open(en.e, &p), 0) << denoise_last_error(en.e);
    float s = 0;
    EXPECT_EQ(denoise_output_sigma(en.e, &s), DENOISE_EINVAL);  // nothing pulled yet
    auto img = [](std::vector<float> &f) { return rgb_image(f); };

    auto a = rgb_frames(6, 12.0, 1);
    const std::vector<float> sa = run(en.e, a, img, false);
    ASSERT_EQ(sa.size(), 6u);
    for (float v : sa) EXPECT_NEAR(v, 12.0, 0.05 * 12 + 0.3);

    // a new segment re-estimates from its own frames
    auto b = rgb_frames(6, 25.0, 2);
    const std::vector<float> sb = run(en.e, b, img, false);
    ASSERT_EQ(sb.size(), 6u);
    for (float v : sb) EXPECT_NEAR(v, 25.0, 0.05 * 25 + 0.3);

    // fixed sigma: reported as it is
    ASSERT_EQ(denoise_set_sigma(en.e, 7.5f), 0);
    auto c = rgb_frames(4, 25.0, 3);
    for (float v : run(en.e, c, img, false)) EXPECT_EQ(v, 7.5f);

    EXPECT_EQ(denoise_set_sigma(en.e, -0.5f), DENOISE_EINVAL);
    EXPECT_NE(std::string(denoise_last_error(en.e)).find("DENOISE_SIGMA_AUTO"), std::string::npos);
    EXPECT_EQ(denoise_set_sigma(en.e, DENOISE_SIGMA_AUTO), 0);
    p.sigma = -2.f;
    Engine bad;
    EXPECT_EQ(denoise_open(bad.e, &p), DENOISE_EINVAL);
}

// A fixed sigma set (a run-time command) before frame 5 of an auto segment: outputs 0..4 keep
// estimates (their feature maps' windows reach frames 5 and 6, whose fixed value must not stand in
// for an estimate), outputs 5.. report the fixed value.
TEST(SigmaAutoEngine, FixedSigmaAfterAutoLeavesEarlierEstimates) {
    Engine en;
    DenoiseParams p = cpu_params(weights().c_str(), DENOISE_SIGMA_AUTO, kW, kH, rgb_f32_format(), 1);
    ASSERT_EQ(denoise_open(en.e, &p), 0) << denoise_last_error(en.e);
    auto f = rgb_frames(9, 12.0, 5);
    std::vector<float> sig;
    auto pull_all = [&](size_t last) {
        for (;;) {
            DenoiseImage out = rgb_image(f[std::min(sig.size(), last)]);
            const int rc = denoise_pull(en.e, &out);
            if (rc == DENOISE_EAGAIN || rc == DENOISE_EOF) return;
            ASSERT_EQ(rc, 0) << denoise_last_error(en.e);
            float v = -2;
            ASSERT_EQ(denoise_output_sigma(en.e, &v), 0);
            sig.push_back(v);
        }
    };
    for (size_t i = 0; i < f.size(); ++i) {
        if (i == 5) {
            ASSERT_EQ(denoise_set_sigma(en.e, 50.f), 0);
        }
        DenoiseImage in = rgb_image(f[i]);
        ASSERT_EQ(denoise_push(en.e, &in), 0) << denoise_last_error(en.e);
        pull_all(f.size() - 1);
    }
    ASSERT_EQ(denoise_flush(en.e), 0);
    pull_all(f.size() - 1);
    ASSERT_EQ(sig.size(), f.size());
    for (size_t t = 0; t < 5; ++t) EXPECT_NEAR(sig[t], 12.0, 0.05 * 12 + 0.3) << "output " << t;
    for (size_t t = 5; t < f.size(); ++t) EXPECT_EQ(sig[t], 50.f) << "output " << t;
}

TEST(SigmaAutoEngine, IndependentOfPushPullInterleaving) {
    auto img = [](std::vector<float> &f) { return rgb_image(f); };
    std::vector<float> got[2];
    for (int k = 0; k < 2; ++k) {
        Engine en;
        DenoiseParams p = cpu_params(weights().c_str(), DENOISE_SIGMA_AUTO, kW, kH, rgb_f32_format(), 1);
        ASSERT_EQ(denoise_open(en.e, &p), 0) << denoise_last_error(en.e);
        auto f = rgb_frames(7, 18.0, 4);
        got[k] = run(en.e, f, img, k == 1);
    }
    ASSERT_EQ(got[0].size(), 7u);
    EXPECT_EQ(got[0], got[1]);
}

TEST(SigmaAutoEngine, YCbCr420NoiseInTheNetworksUnit) {
    Engine en;
    DenoiseParams p = cpu_params(weights().c_str(), DENOISE_SIGMA_AUTO, kW, kH, pixfmt_descriptor("yuv420p").f, 1);
    ASSERT_EQ(denoise_open(en.e, &p), 0) << denoise_last_error(en.e);
    auto img = [](std::vector<uint8_t> &f) { return yuv_image(f); };
    const double s = 8.0;
    auto f = yuv_frames(6, s, 7);
    const std::vector<float> got = run(en.e, f, img, false);
    ASSERT_EQ(got.size(), 6u);
    // the network's sigma of white noise s on every Y', Cb, Cr code: s sqrt(sum_j gain_j), BT.601
    // limited: luma (255/219)^2, chroma (1.402^2 + 0.714^2 + 0.344^2 + 1.772^2) (255/224)^2 / 3
    const double kc = std::pow(255.0 / 224, 2) * (1.402 * 1.402 + 0.714136 * 0.714136 + 0.344136 * 0.344136 + 1.772 * 1.772) / 3;
    const double want = s * std::sqrt(std::pow(255.0 / 219, 2) + kc);
    for (float v : got) EXPECT_NEAR(v, want, 0.06 * want) << "want " << want;
}

// The estimate of frame k read at push k + 1 or the flush (DENOISE_SIGMA_AUTO_DEFER=1: the CUDA
// backend's default, here on the CPU backend) against the read within push k (the CPU's default):
// every output byte and every reported sigma equal, over segments of 9 frames (sigma fixed for
// frames 5 and 6, auto again from 7), 2 and 1 frames (shorter than the temporal radius: the flush
// reads the last estimate) and 6 (fixed for frames 0 and 1); denoise_latency() one more while
// sigma=auto is in force, and the outputs come out when the estimates they need are read.
TEST(SigmaAutoEngine, DeferredReadGivesTheSameOutputs) {
    struct Segment {
        int n;
        std::vector<std::pair<int, float>> sigma_at;  // (frame, sigma set before pushing it)
    };
    const std::vector<Segment> segs = {{9, {{5, 20.f}, {7, DENOISE_SIGMA_AUTO}}}, {2, {}}, {1, {}},
                                       {6, {{0, 9.f}, {2, DENOISE_SIGMA_AUTO}}}};
    struct Run {
        std::vector<std::vector<float>> out;  // per output, in order: frame samples after the pull
        std::vector<float> sig;
        std::vector<int> latency;             // denoise_latency() before each push
        std::vector<int> pulled_after;        // outputs pulled after each push (-1: at the flush)
        int lat_fixed = -1;
    };
    auto run_order = [&](const char *defer, Run &r) {
        setenv("DENOISE_SIGMA_AUTO_DEFER", defer, 1);
        Engine en;
        DenoiseParams p = cpu_params(weights().c_str(), DENOISE_SIGMA_AUTO, kW, kH, rgb_f32_format(), 1);
        const int rc = denoise_open(en.e, &p);
        unsetenv("DENOISE_SIGMA_AUTO_DEFER");
        ASSERT_EQ(rc, 0) << denoise_last_error(en.e);
        unsigned seed = 11;
        for (const Segment &sg : segs) {
            auto f = rgb_frames(sg.n, 14.0, seed++);
            size_t next = 0;  // next output of the segment
            auto pull_all = [&](bool flushed) {
                for (;;) {
                    DenoiseImage out = rgb_image(f[std::min(next, f.size() - 1)]);
                    const int q = denoise_pull(en.e, &out);
                    if (q == DENOISE_EAGAIN || q == DENOISE_EOF) return;
                    ASSERT_EQ(q, 0) << denoise_last_error(en.e);
                    float v = -2;
                    ASSERT_EQ(denoise_output_sigma(en.e, &v), 0);
                    r.sig.push_back(v);
                    r.out.push_back(f[next]);
                    r.pulled_after.push_back(flushed ? -1 : (int)r.latency.size());
                    ++next;
                }
            };
            for (int k = 0; k < sg.n; ++k) {
                for (const auto &c : sg.sigma_at) {
                    if (c.first == k) {
                        ASSERT_EQ(denoise_set_sigma(en.e, c.second), 0);
                    }
                }
                r.latency.push_back(denoise_latency(en.e));
                DenoiseImage in = rgb_image(f[k]);
                ASSERT_EQ(denoise_push(en.e, &in), 0) << denoise_last_error(en.e);
                pull_all(false);
            }
            EXPECT_EQ(denoise_flush(en.e), 0) << denoise_last_error(en.e);
            pull_all(true);
            EXPECT_EQ(next, f.size());
        }
        EXPECT_EQ(denoise_set_sigma(en.e, 9.f), 0);
        r.lat_fixed = denoise_latency(en.e);
    };
    Run now, later;
    run_order("0", now);
    run_order("1", later);
    const size_t total = 9 + 2 + 1 + 6;
    ASSERT_EQ(now.out.size(), total);
    ASSERT_EQ(later.out.size(), total);
    for (size_t t = 0; t < total; ++t) {
        EXPECT_EQ(now.out[t], later.out[t]) << "output " << t;
        EXPECT_EQ(now.sig[t], later.sig[t]) << "output " << t;
    }
    // sigma was auto for outputs 0..4, 7, 8 of the first segment: estimates, not the fixed 20
    for (size_t t : {0, 4, 7, 8, 9, 11, 14}) EXPECT_NEAR(now.sig[t], 14.0, 0.05 * 14 + 0.3) << "output " << t;
    EXPECT_EQ(now.sig[5], 20.f);
    EXPECT_EQ(now.sig[12], 9.f);
    // latency: one more while sigma=auto is in force, the same with a fixed sigma
    EXPECT_EQ(now.lat_fixed, later.lat_fixed);
    ASSERT_EQ(now.latency.size(), later.latency.size());
    for (size_t k = 0; k < now.latency.size(); ++k) {
        const bool fixed = k == 5 || k == 6 || k == 12 || k == 13;  // pushes under sigma 20 / 9
        EXPECT_EQ(now.latency[k], now.lat_fixed) << "push " << k;
        EXPECT_EQ(later.latency[k], now.lat_fixed + (fixed ? 0 : 1)) << "push " << k;
    }
    // segment 1: output t comes out after the first push P (of the stream) with frames
    // 0..t + R settled, where the deferred order leaves frame P - 1 unsettled if it was pushed
    // under sigma=auto: one push later, except where a fixed sigma (frames 5, 6) leaves nothing
    // to wait for; -1: at the flush
    ASSERT_EQ(now.lat_fixed, 3);  // R = 3 (the golden weights are model v1's shape)
    const int want_now[9] = {4, 5, 6, 7, 8, 9, -1, -1, -1}, want_later[9] = {5, 6, 6, 7, 9, -1, -1, -1, -1};
    for (int t = 0; t < 9; ++t) {
        EXPECT_EQ(now.pulled_after[t], want_now[t]) << "output " << t;
        EXPECT_EQ(later.pulled_after[t], want_later[t]) << "output " << t;
    }
    for (size_t t = 9; t < 12; ++t) {
        EXPECT_EQ(now.pulled_after[t], -1) << "output " << t;
        EXPECT_EQ(later.pulled_after[t], -1) << "output " << t;
    }
}
