// CPU engine vs the PyTorch reference (tests/data/golden_*.safetensors, written by
// weights/make_goldens.py from randomised weights and noisy random clips).
// Tolerance: 1e-4 max abs in network units ([-1, 1]) for every stage, the output and the
// sequences; relative L2 is printed alongside (expected ~1e-6: fp32 with a different summation
// order). Through the public API the clips are pushed as planar float32 R'G'B'
// (rgb_f32_format()), whose output is the denoised value itself.
// Model v2's alignment (golden_align_*.safetensors, make_goldens.py --align: align 8, tile 32,
// clips whose regions move by different steps per frame): block_match's shifts equal align.py's
// exactly and most tiles move (a golden with shifts 0 could not catch a wrong warp), the aligned
// fusion input, the centre output and the sequences within the same tolerance.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu/ops.h"
#include "cpu/unet.h"
#include "denoise.h"
#include "model.h"
#include "engine_test_util.h"

using namespace denoise;
using denoise_test::compare;
using denoise_test::cpu_params;
using denoise_test::data_dir;
using denoise_test::rgb_f32_format;
using denoise_test::rgb_f32_image;

namespace {

constexpr double kTol = 1e-4;

int reflect(int i, int n) {
    if (n == 1) return 0;
    int p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return i >= n ? p - i : i;
}

// Frame f of a (T, 3, H, W) clip, reflect-padded to (Hp, Wp) and s2d'd to (Hp/2, Wp/2, 12).
std::vector<float> s2d_frame(const StTensor &clip, int f, int Hp, int Wp) {
    const int H = (int)clip.shape[2], Wd = (int)clip.shape[3];
    std::vector<float> out((size_t)Hp / 2 * Wp / 2 * 12);
    for (int y = 0; y < Hp / 2; ++y)
        for (int x = 0; x < Wp / 2; ++x)
            for (int c = 0; c < 3; ++c)
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx)
                        out[((size_t)y * (Wp / 2) + x) * 12 + c * 4 + dy * 2 + dx] =
                            clip.data[(((size_t)f * 3 + c) * H + reflect(2 * y + dy, H)) * Wd +
                                      reflect(2 * x + dx, Wd)];
    return out;
}

// (h, w, C) NHWC -> (C, h, w), the layout of the golden fusion input.
std::vector<float> to_nchw(const std::vector<float> &nhwc, int h, int w, int C) {
    std::vector<float> out((size_t)C * h * w);
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < h * w; ++p) out[(size_t)c * h * w + p] = nhwc[(size_t)p * C + c];
    return out;
}

// One pair of golden files, NAME_weights.safetensors and NAME_tensors.safetensors in tests/data.
struct GoldenSet {
    std::string wpath;  // the weights
    Model model;
    StFile g;           // the tensors
    cpu::CpuModel W;    // model packed for the CPU operators
    bool loaded = false;
    std::string err;
    const StTensor &G(const std::string &name) const { return g.tensors.at(name); }
};

// The pair NAME, loaded on first use and kept for the process.
const GoldenSet &golden_set(const std::string &name) {
    static std::map<std::string, std::unique_ptr<GoldenSet>> sets;
    std::unique_ptr<GoldenSet> &s = sets[name];
    if (!s) {
        s.reset(new GoldenSet);
        s->wpath = data_dir() + "/" + name + "_weights.safetensors";
        s->loaded = load_model(s->wpath, &s->model, &s->err) &&
                    load_safetensors(data_dir() + "/" + name + "_tensors.safetensors", &s->g, &s->err);
        if (s->loaded) cpu::pack_model(s->model, &s->W);
    }
    return *s;
}

// Model v1's goldens (make_goldens.py).
class Golden : public ::testing::Test {
protected:
    explicit Golden(const char *name = "golden") : name_(name) {}
    void SetUp() override {
        set_ = &golden_set(name_);
        ASSERT_TRUE(set_->loaded) << set_->err;
    }
    const StTensor &G(const std::string &name) const { return set_->G(name); }

    const char *name_;
    const GoldenSet *set_ = nullptr;
};

// Channels 64/64/128 (make_goldens.py --wide).
class GoldenWide : public Golden {
protected:
    GoldenWide() : Golden("golden_wide") {}
};

// Model v2's alignment (make_goldens.py --align).
class GoldenAlign : public Golden {
protected:
    GoldenAlign() : Golden("golden_align") {}
};

void expect_close(const std::string &name, const float *got, const StTensor &ref) {
    auto d = compare(got, ref.data.data(), (int64_t)ref.data.size());
    std::printf("  %-22s %-14s max_abs %.3e  rel_l2 %.3e\n", name.c_str(), shape_str(ref.shape).c_str(), d.max_abs,
                d.rel_l2);
    EXPECT_LE(d.max_abs, kTol) << name;
}

// The centre pass of a golden set stage by stage (the hook's stages named in `stages`), the three
// feature maps' pass inputs (full: the fusion input and F_{t-1}, F_{t+1} too) and the model output.
void check_centre_pass(const GoldenSet &set, const std::vector<const char *> &stages, bool full) {
    auto G = [&](const std::string &name) -> const StTensor & { return set.G(name); };
    const StTensor &clip = G("input.clip");
    const float sigma = G("input.sigma").data[0];
    const int Hp = 64, Wp = 128, h = Hp / 2, w = Wp / 2;
    std::vector<std::vector<float>> fr;
    for (int f = 0; f < 7; ++f) fr.push_back(s2d_frame(clip, f, Hp, Wp));

    const ModelConfig &cfg = set.model.cfg;
    const int Cin = cfg.fusion_in_channels();
    std::vector<float> fin((size_t)h * w * Cin), F[3];
    cpu::Workspace ws;
    std::map<std::string, std::vector<float>> got;
    for (int pass = 0; pass < 3; ++pass) {
        const float *win[5];
        for (int k = 0; k < 5; ++k) win[k] = fr[pass + k].data();
        cpu::build_fusion_input(win, 5, h, w, sigma, fin.data());
        F[pass].resize((size_t)h * w * cfg.channels[0]);
        cpu::StageHook hook;
        if (pass == 1)
            hook = [&](const char *name, const float *d, int hh, int ww, int C) {
                got[name].assign(d, d + (size_t)hh * ww * C);
            };
        cpu::unet_forward(set.W, fin.data(), h, w, F[pass].data(), ws, hook);
        if (pass == 1 && full) expect_close("stage.fusion_in", to_nchw(fin, h, w, Cin).data(), G("stage.fusion_in"));
    }
    for (const char *s : stages) {
        ASSERT_TRUE(got.count(s)) << "stage hook never reported " << s;
        const StTensor &ref = G(std::string("stage.") + s);
        ASSERT_EQ(got[s].size(), ref.data.size()) << s;
        expect_close(std::string("stage.") + s, got[s].data(), ref);
    }
    if (full) {
        expect_close("stage.F_tm1", F[0].data(), G("stage.F_tm1"));
        expect_close("stage.F_tp1", F[2].data(), G("stage.F_tp1"));
    }
    expect_close("stage.F_t (dec0)", F[1].data(), G("stage.dec0"));

    // Head + crop: the model output (3, 40, 70).
    std::vector<float> out((size_t)h * w * 12);
    const float *Fp[3] = {F[0].data(), F[1].data(), F[2].data()};
    cpu::head_forward(set.W, Fp, fr[3].data(), h, w, out.data(), ws);
    const StTensor &ref = G("output");
    const int H = (int)ref.shape[1], Wd = (int)ref.shape[2];
    std::vector<float> img((size_t)3 * H * Wd);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < Wd; ++x)
                img[((size_t)c * H + y) * Wd + x] = out[((size_t)(y / 2) * w + x / 2) * 12 + c * 4 + (y & 1) * 2 + (x & 1)];
    expect_close("output", img.data(), ref);
}

TEST_F(Golden, EveryStageOfTheCentrePass) {
    check_centre_pass(*set_, {"fusion", "enc0.block0", "enc0", "merge0", "enc1", "merge1", "mid", "expand1", "skip1",
                              "dec1", "expand0", "skip0", "dec0"},
                      true);
}

// Wider fine levels (make_goldens.py --wide: channels 64/64/128): patch merging 4C -> C at level 0,
// 4C -> 2C at level 1, and expanding C -> 4C' back; the stages whose widths differ from model v1's.
TEST_F(GoldenWide, EveryStageOfTheCentrePass) {
    ASSERT_EQ(set_->model.cfg.channels[0], 64);
    ASSERT_EQ(set_->model.cfg.channels[1], 64);
    check_centre_pass(*set_, {"merge0", "enc1", "merge1", "mid", "expand1", "skip1", "dec1", "expand0", "dec0"}, false);
}

// Full API on one 7-frame clip: output 3 of the stream is the model's centre output only when the
// stream has >= 7 frames, so push the clip, flush, and keep frame 3 in *out3 (network units).
void centre_output_through_api(const std::string &wpath, const StTensor &clip, float sigma, std::vector<float> *out3) {
    const int H = (int)clip.shape[2], Wd = (int)clip.shape[3];
    DenoiseEngine *e = denoise_alloc();
    ASSERT_NE(e, nullptr);
    // CPU explicitly: with the CUDA engine built and a GPU present, AUTO would pick CUDA
    // (tests/gpu/api_check.cpp compares that one).
    DenoiseParams p = cpu_params(wpath.c_str(), sigma, Wd, H, rgb_f32_format());
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    EXPECT_EQ(denoise_backend(e), DENOISE_BACKEND_CPU);
    EXPECT_EQ(denoise_latency(e), 3);
    std::vector<float> v((size_t)7 * 3 * H * Wd), d((size_t)3 * H * Wd);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * (clip.data[i] + 1.0f);
    int got = 0;
    auto drain = [&](bool flushed) {
        const DenoiseImage out = rgb_f32_image(&d[0], &d[(size_t)H * Wd], &d[(size_t)2 * H * Wd], Wd);
        for (;;) {
            int rc = denoise_pull(e, &out);
            if (rc == DENOISE_EAGAIN) { EXPECT_FALSE(flushed); return; }
            if (rc == DENOISE_EOF) { EXPECT_TRUE(flushed); return; }
            ASSERT_EQ(rc, 0) << denoise_last_error(e);
            if (got == 3) {
                out3->resize(d.size());
                for (size_t i = 0; i < d.size(); ++i) (*out3)[i] = 2.0f * d[i] - 1.0f;
            }
            ++got;
        }
    };
    for (int f = 0; f < 7; ++f) {
        float *pl[3];
        for (int c = 0; c < 3; ++c) pl[c] = &v[((size_t)f * 3 + c) * H * Wd];
        const DenoiseImage in = rgb_f32_image(pl[0], pl[1], pl[2], Wd);
        ASSERT_EQ(denoise_push(e, &in), 0) << denoise_last_error(e);
        drain(false);
        EXPECT_EQ(got, std::max(0, f + 1 - 3));
    }
    ASSERT_EQ(denoise_flush(e), 0);
    drain(true);
    EXPECT_EQ(got, 7);
    denoise_free(&e);
    EXPECT_EQ(e, nullptr);
}

// The set's clip through the public API: output 3 equals the model output.
void check_api_centre(const GoldenSet &set, const char *label) {
    std::vector<float> out3;
    centre_output_through_api(set.wpath, set.G("input.clip"), set.G("input.sigma").data[0], &out3);
    ASSERT_EQ(out3.size(), set.G("output").data.size());
    expect_close(label, out3.data(), set.G("output"));
}

TEST_F(Golden, PublicApiCentreFrameMatchesModelOutput) { check_api_centre(*set_, "api output[3]"); }

// Push frames one at a time, pulling whatever is ready, then flush and drain; returns the outputs
// in network units.
std::vector<float> run_sequence(DenoiseEngine *e, const StTensor &in, int *pulls_before_flush) {
    const int N = (int)in.shape[0], H = (int)in.shape[2], Wd = (int)in.shape[3];
    const size_t fs = (size_t)3 * H * Wd;
    std::vector<float> v(in.data.size()), out(in.data.size(), NAN);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * (in.data[i] + 1.0f);
    int t = 0;
    std::vector<float> d(fs);
    const DenoiseImage dimg = rgb_f32_image(&d[0], &d[(size_t)H * Wd], &d[(size_t)2 * H * Wd], Wd);
    auto take = [&]() {
        for (size_t i = 0; i < fs; ++i) out[t * fs + i] = 2.0f * d[i] - 1.0f;
        ++t;
    };
    for (int f = 0; f < N; ++f) {
        const DenoiseImage im = rgb_f32_image(&v[f * fs], &v[f * fs + (size_t)H * Wd], &v[f * fs + (size_t)2 * H * Wd], Wd);
        EXPECT_EQ(denoise_push(e, &im), 0) << denoise_last_error(e);
        int rc;
        while ((rc = denoise_pull(e, &dimg)) == 0) take();
        EXPECT_EQ(rc, DENOISE_EAGAIN);
        EXPECT_EQ(denoise_pending(e), f + 1 - t);
    }
    *pulls_before_flush = t;
    EXPECT_EQ(denoise_flush(e), 0);
    int rc;
    while ((rc = denoise_pull(e, &dimg)) == 0) take();
    EXPECT_EQ(rc, DENOISE_EOF) << denoise_last_error(e);
    EXPECT_EQ(t, N);
    EXPECT_EQ(denoise_pull(e, &dimg), DENOISE_EOF);
    EXPECT_EQ(denoise_pending(e), 0);
    return out;
}

DenoiseEngine *open_engine(const std::string &wpath, int Wd, int H, float sigma) {
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p = cpu_params(wpath.c_str(), sigma, Wd, H, rgb_f32_format());
    EXPECT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    return e;
}

// The sequence goldens (N = 5, 1, 2) through push/pull/flush, one engine each.
void check_sequences(const GoldenSet &set) {
    for (const char *key : {"seq", "seq1", "seq2"}) {
        const StTensor &in = set.G(std::string(key) + ".input");
        const int N = (int)in.shape[0];
        const float sigma = set.G(std::string(key) + ".sigma").data[0];
        DenoiseEngine *e = open_engine(set.wpath, (int)in.shape[3], (int)in.shape[2], sigma);
        int early = 0;
        auto out = run_sequence(e, in, &early);
        EXPECT_EQ(early, std::max(0, N - 3)) << key;
        expect_close(std::string(key) + ".output N=" + std::to_string(N), out.data(), set.G(std::string(key) + ".output"));
        denoise_free(&e);
    }
}

// Segments back to back on one engine: after EOF the next push starts a fresh segment (the
// sequences share one sigma).
void check_back_to_back(const GoldenSet &set) {
    const StTensor &in = set.G("seq.input");
    DenoiseEngine *e = open_engine(set.wpath, (int)in.shape[3], (int)in.shape[2], set.G("seq.sigma").data[0]);
    for (const char *key : {"seq2", "seq", "seq1", "seq"}) {
        int early = 0;
        auto out = run_sequence(e, set.G(std::string(key) + ".input"), &early);
        expect_close(std::string("back-to-back ") + key, out.data(), set.G(std::string(key) + ".output"));
    }
    denoise_free(&e);
}

TEST_F(Golden, SequencesThroughPushPullFlush) { check_sequences(*set_); }

TEST_F(Golden, SegmentsBackToBackOnOneEngine) { check_back_to_back(*set_); }

TEST_F(GoldenWide, PublicApiCentreFrameMatchesModelOutput) { check_api_centre(*set_, "api output[3]"); }

TEST_F(GoldenWide, SequencesThroughPushPullFlush) { check_sequences(*set_); }

// The centre output's three windows (centres 2, 3, 4 of the 7-frame clip): block_match of every
// other tap against the centre gives align.py's shifts exactly, at least half of the tiles move
// (also after the head's halving), and the centre window's frames moved by shift_tiles_s2d give
// the aligned fusion input.
TEST_F(GoldenAlign, ShiftsAndAlignedFusionInput) {
    const ModelConfig &cfg = set_->model.cfg;
    ASSERT_GT(cfg.align, 0);
    const StTensor &clip = G("input.clip"), &ref = G("align.shifts");
    const int m = cfg.pad_multiple, T = cfg.align_tile, r = cfg.fusion_radius;
    const int Hp = ((int)clip.shape[2] + m - 1) / m * m, Wp = ((int)clip.shape[3] + m - 1) / m * m;
    const int h = Hp / 2, w = Wp / 2, tiles = (Hp / T) * (Wp / T);
    ASSERT_EQ(ref.data.size(), (size_t)3 * 2 * r * tiles * 2);
    std::vector<std::vector<float>> fr;
    for (int f = 0; f < 7; ++f) fr.push_back(s2d_frame(clip, f, Hp, Wp));
    std::vector<float> work(cpu::block_match_work_floats(h, w));
    std::vector<int32_t> sh((size_t)tiles * 2);
    std::vector<float> moved((size_t)2 * r * h * w * 12);
    auto floor_half = [](int v) { return (v - (v < 0)) / 2; };
    int moving = 0, moving_halved = 0, maps = 0, mismatches = 0;
    for (int c = 2; c <= 4; ++c) {
        const float *win[5];
        for (int k = 0; k < 2 * r + 1; ++k) win[k] = fr[c - r + k].data();
        int j = 0;
        for (int k = 0; k < 2 * r + 1; ++k) {
            if (k == r) continue;
            ASSERT_EQ(cpu::block_match(win[r], win[k], h, w, cfg.align, T, sh.data(), work.data()), 0);
            const float *want = ref.data.data() + (size_t)((c - 2) * 2 * r + j) * tiles * 2;
            for (int i = 0; i < tiles; ++i) {
                mismatches += sh[2 * i] != (int)want[2 * i] || sh[2 * i + 1] != (int)want[2 * i + 1];
                moving += sh[2 * i] || sh[2 * i + 1];
                moving_halved += floor_half(sh[2 * i]) || floor_half(sh[2 * i + 1]);
            }
            ++maps;
            if (c == 3) {
                float *o = moved.data() + (size_t)j * h * w * 12;
                ASSERT_EQ(cpu::shift_tiles_s2d(win[k], h, w, sh.data(), T, o), 0);
                win[k] = o;
            }
            ++j;
        }
        if (c == 3) {
            std::vector<float> fin((size_t)h * w * cfg.fusion_in_channels());
            cpu::build_fusion_input(win, 2 * r + 1, h, w, G("input.sigma").data[0], fin.data());
            expect_close("stage.fusion_in", to_nchw(fin, h, w, cfg.fusion_in_channels()).data(), G("stage.fusion_in"));
        }
    }
    std::printf("  %d shift maps of %d tiles: %d tiles differ from align.py's, %d move, %d after halving\n", maps, tiles,
                mismatches, moving, moving_halved);
    EXPECT_EQ(mismatches, 0);
    EXPECT_GE(2 * moving, maps * tiles) << "too few moving tiles for a golden of the warp";
    EXPECT_GE(2 * moving_halved, maps * tiles) << "too few tiles move under the head's halving";
}

TEST_F(GoldenAlign, PublicApiCentreFrameMatchesModelOutput) { check_api_centre(*set_, "aligned api output[3]"); }

TEST_F(GoldenAlign, SequencesThroughPushPullFlush) { check_sequences(*set_); }

TEST_F(GoldenAlign, SegmentsBackToBackOnOneEngine) { check_back_to_back(*set_); }

}  // namespace

// Sizes the goldens do not cover (1x1, odd, just above a multiple of 64): one output per input,
// finite, and the denoised value inside [min(0, in), max(1, in)] (the network output is clamped to
// [-1, 1] widened to the input sample).
TEST(EngineSizes, OddSizesRunAndStayInRange) {
    const std::string wpath = data_dir() + "/golden_weights.safetensors";
    for (auto wh : {std::pair<int, int>{1, 1}, {3, 5}, {65, 33}, {130, 2}}) {
        const int Wd = wh.first, H = wh.second, N = 4;
        DenoiseEngine *e = denoise_alloc();
        DenoiseParams p = cpu_params(wpath.c_str(), 30.0f, Wd, H, rgb_f32_format());
        ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
        const ptrdiff_t ls = Wd + 3;  // linesize larger than the width
        std::vector<float> v((size_t)3 * ls * H), d((size_t)3 * ls * H, NAN);
        uint32_t s = 7;
        int pulled = 0;
        for (int f = 0; f < N; ++f) {
            for (auto &x : v) {
                s = s * 1664525u + 1013904223u;
                x = (float)(s >> 8) / 16777216.0f * 1.2f - 0.1f;  // a little outside [0, 1], like noise
            }
            const DenoiseImage in = rgb_f32_image(&v[0], &v[(size_t)ls * H], &v[(size_t)2 * ls * H], ls);
            ASSERT_EQ(denoise_push(e, &in), 0) << denoise_last_error(e);
            if (f == N - 1) {
                ASSERT_EQ(denoise_flush(e), 0);
            }
            const DenoiseImage out = rgb_f32_image(&d[0], &d[(size_t)ls * H], &d[(size_t)2 * ls * H], ls);
            int rc;
            while ((rc = denoise_pull(e, &out)) == 0) {
                ++pulled;
                if (pulled != N) continue;  // v holds the last frame only
                for (int c = 0; c < 3; ++c)
                    for (int y = 0; y < H; ++y)
                        for (int x = 0; x < Wd; ++x) {
                            const size_t i = (size_t)c * ls * H + (size_t)y * ls + x;
                            ASSERT_TRUE(std::isfinite(d[i]));
                            EXPECT_GE(d[i], std::min(0.0f, v[i]) - 1e-6f);
                            EXPECT_LE(d[i], std::max(1.0f, v[i]) + 1e-6f);
                        }
            }
            EXPECT_EQ(rc, f == N - 1 ? DENOISE_EOF : DENOISE_EAGAIN);
        }
        EXPECT_EQ(pulled, N) << Wd << "x" << H;
        denoise_free(&e);
    }
}
