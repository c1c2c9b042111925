// Native frames through the engine's public API (CPU backend): every pixel-format family
// (8/10/16-bit planar Y'CbCr at 4:2:0, 4:2:2 and 4:4:4, semi-planar nv12/p010 with its shift,
// packed 4:2:2 and packed R'G'B' with padding, gray, float), the colour matrices, the change
// amounts, and output written over the pushed frame's own memory.
//
// Reference: the same frames converted to planar float R'G'B' by this file's own code (the
// documented math: normalised code values, bilinear chroma at its location, the frame's decoding
// matrix) and run through the engine as rgb_f32_format(), whose output is the denoised R'G'B'
// itself; its change d is taken back to the native format by this file's own code (the inverse
// matrix, the adjoint of the upsampling). Every native output sample must lie within one code
// value of clip(code + change (2^depth - 1)) (the dither's floor(x + n), n in [0, 1), moves it
// by less than one), with a mean error near 0 (the dither is unbiased), and every bit outside the
// colour components (alpha, padding bytes, the low bits of p010 words) must be kept.
// Frames: 40x24 (padded to 64x64), 4 frames, smooth content plus noise, random weights
// (tests/data/golden_weights.safetensors), sigma 30: the network changes most samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "common/blue_noise.h"
#include "cpu/frame_convert.h"
#include "denoise.h"
#include "engine_test_util.h"
#include "pixfmt_descriptors.h"

using denoise_test::cpu_params;
using denoise_test::data_dir;
using denoise_test::pixfmt_descriptor;
using denoise_test::rgb_f32_format;
using denoise_test::rgb_f32_image;

namespace {

constexpr int kW = 40, kH = 24, kFrames = 4;
constexpr float kSigma = 30.0f;

const std::string &weights() {
    static const std::string w = data_dir() + "/golden_weights.safetensors";
    return w;
}

// A pixel format as the filter would describe it, with its planes, and the colour system its
// frames are made in.
struct Format : denoise_test::PixFmtDescriptor {
    enum pl_color_system sys;
};

const Format kYuv420p = {pixfmt_descriptor("yuv420p"), PL_COLOR_SYSTEM_BT_601};
const Format kYuva420p = {pixfmt_descriptor("yuva420p"), PL_COLOR_SYSTEM_BT_601};
const Format kNv12 = {pixfmt_descriptor("nv12"), PL_COLOR_SYSTEM_BT_601};
const Format kYuv420p10 = {pixfmt_descriptor("yuv420p10le"), PL_COLOR_SYSTEM_BT_709};
const Format kP010 = {pixfmt_descriptor("p010le"), PL_COLOR_SYSTEM_BT_709};
const Format kYuv422p = {pixfmt_descriptor("yuv422p"), PL_COLOR_SYSTEM_BT_709};
const Format kYuyv422 = {pixfmt_descriptor("yuyv422"), PL_COLOR_SYSTEM_BT_709};
const Format kYuv444p16 = {pixfmt_descriptor("yuv444p16le"), PL_COLOR_SYSTEM_BT_2020_NC};
const Format kGbrp = {pixfmt_descriptor("gbrp"), PL_COLOR_SYSTEM_RGB};
const Format kRgb24 = {pixfmt_descriptor("rgb24"), PL_COLOR_SYSTEM_RGB};
const Format kBgr0 = {pixfmt_descriptor("bgr0"), PL_COLOR_SYSTEM_RGB};
const Format kRgb48 = {pixfmt_descriptor("rgb48le"), PL_COLOR_SYSTEM_RGB};
const Format kGray = {pixfmt_descriptor("gray"), PL_COLOR_SYSTEM_BT_601};
const Format kGray10 = {pixfmt_descriptor("gray10le"), PL_COLOR_SYSTEM_BT_709};
const Format kGbrpf32 = {pixfmt_descriptor("gbrpf32le"), PL_COLOR_SYSTEM_RGB};
const Format kGrayf32 = {pixfmt_descriptor("grayf32le"), PL_COLOR_SYSTEM_RGB};

int comp_w(const DenoisePixelFormat &f, int c) { return c ? -((-kW) >> f.log2_chroma_w) : kW; }
int comp_h(const DenoisePixelFormat &f, int c) { return c ? -((-kH) >> f.log2_chroma_h) : kH; }

// A frame in memory: planes of random bytes (what is not a colour sample must survive), row
// pitch larger than the row.
struct Frame {
    std::vector<uint8_t> plane[4];
    ptrdiff_t linesize[4] = {};
    DenoiseColor color{};

    DenoiseImage image() {
        DenoiseImage im{};
        for (int p = 0; p < 4; ++p) {
            im.data[p] = plane[p].empty() ? nullptr : plane[p].data();
            im.linesize[p] = linesize[p];
        }
        im.color = color;
        return im;
    }
};

Frame alloc_frame(const Format &F, std::mt19937 &rng) {
    Frame fr;
    for (int p = 0; p < F.nb_planes; ++p) {
        ptrdiff_t row = 0;
        int rows = kH;
        bool colour = false;
        for (int c = 0; c < F.f.nb_components; ++c)
            if (F.f.comp[c].plane == p) {
                row = std::max<ptrdiff_t>(row, F.f.comp[c].offset + (ptrdiff_t)(comp_w(F.f, c) - 1) * F.f.comp[c].step + F.f.bytes);
                rows = comp_h(F.f, c);
                colour = true;
            }
        if (!colour) row = kW * F.f.bytes;  // alpha
        fr.linesize[p] = row + 12;
        fr.plane[p].resize((size_t)fr.linesize[p] * rows);
        for (auto &b : fr.plane[p]) b = (uint8_t)rng();
    }
    fr.color.repr.sys = F.sys;
    fr.color.repr.levels = F.sys == PL_COLOR_SYSTEM_RGB ? PL_COLOR_LEVELS_FULL : PL_COLOR_LEVELS_LIMITED;
    fr.color.chroma_xpos = 0;    // left (MPEG-2 / H.26x)
    fr.color.chroma_ypos = 128;  // vertically centred
    return fr;
}

uint8_t *sample_ptr(Frame &fr, const DenoisePixelFormat &f, int c, int x, int y) {
    const DenoiseComponent &k = f.comp[c];
    return fr.plane[k.plane].data() + (ptrdiff_t)y * fr.linesize[k.plane] + k.offset + (ptrdiff_t)x * k.step;
}

// Integer code (or float bits) of component c at (x, y).
uint32_t get(const Frame &fr, const DenoisePixelFormat &f, int c, int x, int y) {
    const uint8_t *p = sample_ptr(const_cast<Frame &>(fr), f, c, x, y);
    const DenoiseComponent &k = f.comp[c];
    if (f.is_float) return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
    const uint32_t word = f.bytes == 2 ? (uint32_t)(p[0] | p[1] << 8) : p[0];
    return (word >> k.shift) & ((1u << k.depth) - 1);
}

void set(Frame &fr, const DenoisePixelFormat &f, int c, int x, int y, uint32_t v) {
    uint8_t *p = sample_ptr(fr, f, c, x, y);
    const DenoiseComponent &k = f.comp[c];
    if (f.is_float) {
        for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
        return;
    }
    const uint32_t mask = ((1u << k.depth) - 1) << k.shift;
    uint32_t word = f.bytes == 2 ? (uint32_t)(p[0] | p[1] << 8) : p[0];
    word = (word & ~mask) | (v << k.shift);
    p[0] = (uint8_t)word;
    if (f.bytes == 2) p[1] = (uint8_t)(word >> 8);
}

float as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Smooth moving content plus noise, inside each component's nominal range.
void fill_content(Frame &fr, const Format &F, int t, std::mt19937 &rng) {
    std::normal_distribution<double> noise(0.0, 0.04);
    const bool limited = F.sys != PL_COLOR_SYSTEM_RGB;
    for (int c = 0; c < F.f.nb_components; ++c)
        for (int y = 0; y < comp_h(F.f, c); ++y)
            for (int x = 0; x < comp_w(F.f, c); ++x) {
                double v = 0.5 + 0.3 * std::sin((x + 2 * t + 7 * c) / 6.0) * std::cos((y - 3 * c) / 5.0) + noise(rng);
                v = std::min(1.0, std::max(0.0, v));
                if (F.f.is_float) {
                    set(fr, F.f, c, x, y, float_bits((float)v));
                    continue;
                }
                const int d = F.f.comp[c].depth;
                const double top = (1 << d) - 1;
                double code = v * top;
                if (limited)  // 16..235 (luma) / 16..240 (chroma) at 8 bits, scaled for the depth
                    code = (16 + v * (c ? 224 : 219)) * (1 << (d - 8));
                set(fr, F.f, c, x, y, (uint32_t)std::lround(std::min(top, code)));
            }
}

std::vector<Frame> make_clip(const Format &F, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<Frame> clip;
    for (int t = 0; t < kFrames; ++t) {
        clip.push_back(alloc_frame(F, rng));
        fill_content(clip.back(), F, t, rng);
    }
    return clip;
}

constexpr DenoiseAmount kDefaultAmount = {DENOISE_AMOUNT_DEFAULTS};

// Amounts with the blend at 1: the luma and chroma scales only.
DenoiseAmount lc(float luma, float chroma) {
    DenoiseAmount a = kDefaultAmount;
    a.luma = luma;
    a.chroma = chroma;
    return a;
}

// Push every frame, flush, pull each output into outs[t] (when `in_place`, into the pushed
// frame's own memory, which must then stay untouched until its pull: the clip is copied first).
// `amount` is set before frame 0 (when not the defaults) and `later` before frame `change_at`.
std::vector<Frame> run(const Format &F, const std::vector<Frame> &clip, DenoiseAmount amount = kDefaultAmount,
                       bool in_place = false, int change_at = -1, DenoiseAmount later = kDefaultAmount,
                       const std::string &model = weights()) {
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p = cpu_params(model.c_str(), kSigma, kW, kH, F.f, 1);
    EXPECT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    if (amount.amount != 1.f || amount.luma != 1.f || amount.chroma != 1.f) {
        EXPECT_EQ(denoise_set_amount(e, &amount), 0) << denoise_last_error(e);
    }
    std::vector<Frame> in = clip, outs = clip;  // outputs start as copies: non-colour bits must stay
    size_t pulled = 0;
    auto pull_ready = [&]() {
        for (;;) {
            const size_t k = std::min(pulled, in.size() - 1);  // past the end: expects EOF
            DenoiseImage im = in_place ? in[k].image() : outs[k].image();
            const int rc = denoise_pull(e, &im);
            if (rc == DENOISE_EAGAIN || rc == DENOISE_EOF) return;
            ASSERT_EQ(rc, 0) << denoise_last_error(e);
            ASSERT_LT(pulled, in.size()) << "more outputs than inputs";
            if (in_place) outs[pulled] = in[pulled];
            ++pulled;
        }
    };
    for (size_t t = 0; t < in.size(); ++t) {
        if ((int)t == change_at) {
            EXPECT_EQ(denoise_set_amount(e, &later), 0) << denoise_last_error(e);
        }
        DenoiseImage im = in[t].image();
        EXPECT_EQ(denoise_push(e, &im), 0) << denoise_last_error(e);
        pull_ready();
    }
    EXPECT_EQ(denoise_flush(e), 0);
    pull_ready();
    EXPECT_EQ(pulled, in.size());
    denoise_free(&e);
    return outs;
}

// Bilinear taps of one axis (frame_convert.h): luma coordinate i reads chroma i0 (1 - w), i1 (w).
struct Taps {
    std::vector<int> i0, i1;
    std::vector<double> w;
};
Taps taps(int full, int n, int log2_sub, int pos) {
    Taps t;
    const int sub = 1 << log2_sub;
    const double off = pos / 256.0 * (sub - 1);
    for (int i = 0; i < full; ++i) {
        const double c = (i - off) / sub;
        const int c0 = (int)std::floor(c);
        t.i0.push_back(std::min(std::max(c0, 0), n - 1));
        t.i1.push_back(std::min(std::max(c0 + 1, 0), n - 1));
        t.w.push_back(c - c0);
    }
    return t;
}

// This file's own R'G'B' of a native frame: planes R, G, B of kW x kH floats.
std::vector<float> reference_rgb(const Frame &fr, const Format &F, const denoise::FrameColor &fc) {
    const DenoisePixelFormat &f = F.f;
    const double top = f.is_float ? 1.0 : (double)((1 << f.comp[0].depth) - 1);
    auto v = [&](int c, int x, int y) {
        const uint32_t s = get(fr, f, c, x, y);
        return f.is_float ? (double)as_float(s) : s / top;
    };
    std::vector<float> rgb((size_t)3 * kW * kH);
    const Taps tx = taps(kW, comp_w(f, 1), f.log2_chroma_w, fc.xpos), ty = taps(kH, comp_h(f, 1), f.log2_chroma_h, fc.ypos);
    for (int y = 0; y < kH; ++y)
        for (int x = 0; x < kW; ++x) {
            double in[3];
            if (f.nb_components == 1) {
                in[0] = v(0, x, y);
                in[1] = in[2] = fc.rgb ? in[0] : fc.neutral;
            } else {
                in[0] = v(0, x, y);
                for (int c = 1; c < 3; ++c) {
                    const double a = v(c, tx.i0[x], ty.i0[y]) * (1 - tx.w[x]) + v(c, tx.i1[x], ty.i0[y]) * tx.w[x];
                    const double b = v(c, tx.i0[x], ty.i1[y]) * (1 - tx.w[x]) + v(c, tx.i1[x], ty.i1[y]) * tx.w[x];
                    in[c] = a * (1 - ty.w[y]) + b * ty.w[y];
                }
            }
            for (int k = 0; k < 3; ++k) {
                double o = in[k];
                if (!fc.rgb) o = fc.dec[k][0] * in[0] + fc.dec[k][1] * in[1] + fc.dec[k][2] * in[2] + fc.dec_off[k];
                rgb[(size_t)k * kW * kH + (size_t)y * kW + x] = (float)o;
            }
        }
    return rgb;
}

// The expected change of every native sample (normalised units), from the R'G'B' change d.
std::vector<std::vector<double>> reference_change(const Format &F, const denoise::FrameColor &fc,
                                                  const std::vector<double> &d) {
    const DenoisePixelFormat &f = F.f;
    const size_t plane = (size_t)kW * kH;
    std::vector<std::vector<double>> ch(f.nb_components);
    auto D = [&](int k, int x, int y) { return d[k * plane + (size_t)y * kW + x]; };
    auto luma709 = [&](int x, int y) { return 0.2126 * D(0, x, y) + 0.7152 * D(1, x, y) + 0.0722 * D(2, x, y); };
    for (int c = 0; c < f.nb_components; ++c) {
        const int w = comp_w(f, c), h = comp_h(f, c);
        ch[c].resize((size_t)w * h);
        if (fc.rgb || c == 0 || (!f.log2_chroma_w && !f.log2_chroma_h)) {
            for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x)
                    ch[c][(size_t)y * w + x] = fc.rgb ? (f.nb_components == 1 ? luma709(x, y) : D(c, x, y))
                                                      : fc.enc[c][0] * D(0, x, y) + fc.enc[c][1] * D(1, x, y) +
                                                            fc.enc[c][2] * D(2, x, y);
            continue;
        }
        // subsampled chroma: the weighted mean over the luma pixels that read the sample
        const Taps tx = taps(kW, w, f.log2_chroma_w, fc.xpos), ty = taps(kH, h, f.log2_chroma_h, fc.ypos);
        std::vector<double> num((size_t)w * h * 3, 0.0), den((size_t)w * h, 0.0);
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x)
                for (int a = 0; a < 2; ++a)
                    for (int b = 0; b < 2; ++b) {
                        const int j = a ? ty.i1[y] : ty.i0[y], i = b ? tx.i1[x] : tx.i0[x];
                        const double wt = (a ? ty.w[y] : 1 - ty.w[y]) * (b ? tx.w[x] : 1 - tx.w[x]);
                        den[(size_t)j * w + i] += wt;
                        for (int k = 0; k < 3; ++k) num[((size_t)j * w + i) * 3 + k] += wt * D(k, x, y);
                    }
        for (size_t s = 0; s < (size_t)w * h; ++s) {
            const double *m = &num[s * 3];
            ch[c][s] = den[s] > 0 ? (fc.enc[c][0] * m[0] + fc.enc[c][1] * m[1] + fc.enc[c][2] * m[2]) / den[s] : 0.0;
        }
    }
    return ch;
}

// Runs the clip natively and through the float R'G'B' reference, and checks every sample.
void check_against_reference(const Format &F, unsigned seed) {
    SCOPED_TRACE(F.name);
    std::vector<Frame> clip = make_clip(F, seed);
    const std::vector<Frame> out = run(F, clip);
    const denoise::FrameColor fc = denoise::frame_color(F.f, clip[0].color);

    // reference: the same frames as float R'G'B'
    const size_t plane = (size_t)kW * kH;
    std::vector<std::vector<float>> rgb;
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p = cpu_params(weights().c_str(), kSigma, kW, kH, rgb_f32_format(), 1);
    ASSERT_EQ(denoise_open(e, &p), 0) << denoise_last_error(e);
    for (auto &fr : clip) {
        rgb.push_back(reference_rgb(fr, F, fc));
        float *q = rgb.back().data();
        const DenoiseImage im = rgb_f32_image(q, q + plane, q + 2 * plane, kW);
        ASSERT_EQ(denoise_push(e, &im), 0) << denoise_last_error(e);
    }
    ASSERT_EQ(denoise_flush(e), 0);

    const bool is_float = F.f.is_float;
    long samples = 0, moved = 0, worst_at = -1;
    double worst = 0, bias = 0;
    for (int t = 0; t < kFrames; ++t) {
        std::vector<float> o(3 * plane);
        const DenoiseImage im = rgb_f32_image(o.data(), o.data() + plane, o.data() + 2 * plane, kW);
        ASSERT_EQ(denoise_pull(e, &im), 0) << denoise_last_error(e);
        std::vector<double> d(3 * plane);
        for (size_t i = 0; i < d.size(); ++i) d[i] = (double)o[i] - rgb[t][i];
        const auto change = reference_change(F, fc, d);
        const Frame &in = clip[t], &got = out[t];
        for (int c = 0; c < F.f.nb_components; ++c) {
            const int w = comp_w(F.f, c), h = comp_h(F.f, c);
            const double top = is_float ? 1.0 : (double)((1 << F.f.comp[c].depth) - 1);
            for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x) {
                    const double want = change[c][(size_t)y * w + x];
                    double err;
                    if (is_float) {
                        err = (as_float(get(got, F.f, c, x, y)) - as_float(get(in, F.f, c, x, y)) - want) * 1e4;
                    } else {
                        const double x0 = std::min(top, std::max(0.0, get(in, F.f, c, x, y) + want * top));
                        err = get(got, F.f, c, x, y) - x0;
                        bias += err;
                    }
                    moved += get(got, F.f, c, x, y) != get(in, F.f, c, x, y);
                    if (std::fabs(err) > worst) worst = std::fabs(err), worst_at = samples;
                    ++samples;
                }
        }
        // nothing outside the colour components moved
        for (int pl = 0; pl < F.nb_planes; ++pl) {
            Frame a = in, b = got;
            for (int c = 0; c < F.f.nb_components; ++c)
                for (int y = 0; y < comp_h(F.f, c); ++y)
                    for (int x = 0; x < comp_w(F.f, c); ++x) {
                        set(a, F.f, c, x, y, 0);
                        set(b, F.f, c, x, y, 0);
                    }
            EXPECT_TRUE(a.plane[pl] == b.plane[pl]) << "plane " << pl << " of frame " << t << ": bits outside the colour components changed";
        }
    }
    denoise_free(&e);
    std::printf("  %-12s %ld samples, %.0f%% changed, worst |error| %.3f %s (sample %ld), mean error %+.4f\n", F.name,
                samples, 100.0 * moved / samples, is_float ? worst * 1e-4 : worst, is_float ? "" : "code values",
                worst_at, is_float ? 0.0 : bias / samples);
    if (is_float) {
        EXPECT_LT(worst, 1.0) << "float output off the reference change by more than 1e-4";
    } else {
        EXPECT_LE(worst, 1.001) << "a sample is more than one code value from clip(code + change)";
        EXPECT_LT(std::fabs(bias / samples), 0.05) << "the dither is biased";
    }
    EXPECT_GT(moved, samples / 4) << "the network changed too few samples for the test to mean anything";
}

}  // namespace

// FrameColor against the textbook numbers: BT.601 / BT.709 limited range decode black and white
// to R'G'B' 0 and 1 at 8 and 10 bit, full range likewise, neutral chroma is gray, enc inverts dec,
// R'G'B' and float formats are the identity.
TEST(FrameColorTest, MatricesLevelsAndDepths) {
    struct Case { enum pl_color_system sys; enum pl_color_levels lv; int depth; double y0, y1, c0; };
    const Case cases[] = {{PL_COLOR_SYSTEM_BT_601, PL_COLOR_LEVELS_LIMITED, 8, 16, 235, 128},
                          {PL_COLOR_SYSTEM_BT_709, PL_COLOR_LEVELS_LIMITED, 10, 64, 940, 512},
                          {PL_COLOR_SYSTEM_BT_2020_NC, PL_COLOR_LEVELS_LIMITED, 16, 4096, 60160, 32768},
                          {PL_COLOR_SYSTEM_BT_709, PL_COLOR_LEVELS_FULL, 8, 0, 255, 128}};
    for (const Case &k : cases) {
        DenoisePixelFormat f = kYuv420p.f;
        for (auto &c : f.comp) c.depth = k.depth;
        f.bytes = k.depth > 8 ? 2 : 1;
        DenoiseColor col{};
        col.repr.sys = k.sys;
        col.repr.levels = k.lv;
        col.repr.bits.sample_depth = 3;  // not read: the component depth is used
        const denoise::FrameColor fc = denoise::frame_color(f, col);
        const double top = (1 << k.depth) - 1;
        EXPECT_FALSE(fc.rgb);
        EXPECT_NEAR(fc.neutral, (1 << (k.depth - 1)) / top, 1e-7);
        for (double Y : {k.y0, k.y1}) {
            const double v[3] = {Y / top, k.c0 / top, k.c0 / top};
            for (int i = 0; i < 3; ++i) {
                const double o = fc.dec[i][0] * v[0] + fc.dec[i][1] * v[1] + fc.dec[i][2] * v[2] + fc.dec_off[i];
                EXPECT_NEAR(o, Y == k.y0 ? 0.0 : 1.0, 2e-5) << "system " << (int)k.sys << " depth " << k.depth;
            }
        }
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                double s = 0;
                for (int m = 0; m < 3; ++m) s += fc.enc[i][m] * fc.dec[m][j];
                EXPECT_NEAR(s, i == j, 1e-5);
            }
    }
    // BT.601 red: Cr = 240 (8-bit limited) at Y = 81 decodes to R' ~ 1, G' ~ 0, B' ~ 0
    DenoiseColor col{};
    col.repr.sys = PL_COLOR_SYSTEM_BT_601;
    col.repr.levels = PL_COLOR_LEVELS_LIMITED;
    const denoise::FrameColor fc = denoise::frame_color(kYuv420p.f, col);
    const double v[3] = {81 / 255.0, 90 / 255.0, 240 / 255.0};
    const double want[3] = {1, 0, 0};
    for (int i = 0; i < 3; ++i)
        EXPECT_NEAR(fc.dec[i][0] * v[0] + fc.dec[i][1] * v[1] + fc.dec[i][2] * v[2] + fc.dec_off[i], want[i], 0.01);
    for (const Format *F : {&kGbrp, &kGbrpf32, &kGrayf32}) {
        DenoiseColor c{};
        c.repr.sys = F->sys;
        c.repr.levels = PL_COLOR_LEVELS_LIMITED;  // ignored for R'G'B'
        const denoise::FrameColor id = denoise::frame_color(F->f, c);
        EXPECT_TRUE(id.rgb) << F->name;
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                EXPECT_EQ(id.dec[i][j], i == j ? 1.f : 0.f);
                EXPECT_EQ(id.enc[i][j], i == j ? 1.f : 0.f);
            }
    }
}

// Each family against the float R'G'B' reference.
TEST(NativeFormats, PlanarYuv420p8) { check_against_reference(kYuv420p, 1); }
TEST(NativeFormats, PlanarYuv420p10) { check_against_reference(kYuv420p10, 2); }
TEST(NativeFormats, PlanarYuv422p8) { check_against_reference(kYuv422p, 3); }
TEST(NativeFormats, PlanarYuv444p16) { check_against_reference(kYuv444p16, 4); }
TEST(NativeFormats, SemiPlanarP010) { check_against_reference(kP010, 5); }
TEST(NativeFormats, PlanarGbrp) { check_against_reference(kGbrp, 6); }

// The dither of R'G'B' frames (backend.h): a neutral change (dR' = dG' = dB', fractional code
// values) on a neutral frame gives a neutral output, pixel by pixel, while the rounding itself
// varies over the frame (the dither is at work: the same fraction rounds up in some pixels and
// down in others). Y'CbCr frames keep one phase per component: the same change planes (within
// +-2.5 code values) on yuv444p16 (BT.2020, full range) leave Cb and Cr exactly as they were (a
// neutral change has no chroma, and its float residue stays under the tile's 1/8192 margin).
TEST(Dither, NeutralChangeStaysNeutral) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> frac(-2.5f, 2.5f);
    std::uniform_int_distribution<int> grey(40, 215);
    const size_t n = (size_t)kW * kH;
    for (const Format *F : {&kGbrp, &kYuv444p16}) {
        DenoiseColor col{};
        col.repr.sys = F->sys;
        col.repr.levels = PL_COLOR_LEVELS_FULL;
        const denoise::FrameColor fc = denoise::frame_color(F->f, col);
        denoise::cpu::FrameConvert conv(F->f, kW, kH, kW, kH);
        const int top = (1 << F->f.comp[0].depth) - 1;
        denoise::cpu::NativeSamples s, out;
        std::vector<float> d(3 * n);
        for (int c = 0; c < 3; ++c) s.code[c].resize(n);
        for (size_t i = 0; i < n; ++i) {
            const int g = grey(rng) * (top / 255);
            if (fc.rgb) {
                for (int c = 0; c < 3; ++c) s.code[c][i] = (uint16_t)g;
            } else {
                s.code[0][i] = (uint16_t)g;
                s.code[1][i] = s.code[2][i] = (uint16_t)((top + 1) / 2);
            }
            d[i] = d[n + i] = d[2 * n + i] = frac(rng) / 255.f;  // the same change in R', G', B'
        }
        float *dp[3] = {d.data(), d.data() + n, d.data() + 2 * n};
        const std::vector<float> want(d.begin(), d.begin() + n);
        conv.add_change(s, fc, dp, denoise::Amount{}, denoise::blue_noise_tile(), &out);
        size_t non_neutral = 0, up = 0, down = 0;
        for (size_t i = 0; i < n; ++i) {
            if (fc.rgb) {
                non_neutral += out.code[0][i] != out.code[1][i] || out.code[0][i] != out.code[2][i];
            } else {
                non_neutral += out.code[1][i] != s.code[1][i] || out.code[2][i] != s.code[2][i];
            }
            if (!fc.rgb) continue;
            const float exact = want[i] * 255.f;
            const int moved = (int)out.code[0][i] - (int)s.code[0][i];
            up += moved == (int)std::ceil(exact) && std::ceil(exact) != exact;
            down += moved == (int)std::floor(exact) && std::floor(exact) != exact;
        }
        EXPECT_EQ(non_neutral, 0u) << F->name << ": pixels whose neutral change was not neutral after the dither";
        if (fc.rgb) {
            EXPECT_GT(up, n / 8) << F->name << ": the dither rounded too few changes up to mean anything";
            EXPECT_GT(down, n / 8) << F->name << ": the dither rounded too few changes down to mean anything";
        }
    }
}
TEST(NativeFormats, PackedRgb48) { check_against_reference(kRgb48, 7); }
TEST(NativeFormats, Gray8AndGray10) {
    check_against_reference(kGray, 8);
    check_against_reference(kGray10, 9);
}
TEST(NativeFormats, FloatGbrpAndGray) {
    check_against_reference(kGbrpf32, 10);
    check_against_reference(kGrayf32, 11);
}

// The same samples in other layouts give bit-identical outputs: nv12 = yuv420p, p010 (shift 6)
// = yuv420p10, yuyv422 (packed) = yuv422p, rgb24 and bgr0 (packed, a padding byte) = gbrp.
TEST(NativeFormats, LayoutsOfTheSameSamplesAgree) {
    const std::pair<const Format *, const Format *> pairs[] = {
        {&kYuv420p, &kNv12}, {&kYuv420p10, &kP010}, {&kYuv422p, &kYuyv422}, {&kGbrp, &kRgb24}, {&kGbrp, &kBgr0}};
    for (const auto &pr : pairs) {
        const Format &A = *pr.first, &B = *pr.second;
        SCOPED_TRACE(std::string(A.name) + " vs " + B.name);
        std::vector<Frame> a = make_clip(A, 21);
        std::mt19937 rng(22);
        std::vector<Frame> b;
        for (int t = 0; t < kFrames; ++t) {
            b.push_back(alloc_frame(B, rng));
            for (int c = 0; c < 3; ++c)
                for (int y = 0; y < comp_h(A.f, c); ++y)
                    for (int x = 0; x < comp_w(A.f, c); ++x) set(b[t], B.f, c, x, y, get(a[t], A.f, c, x, y));
        }
        const std::vector<Frame> oa = run(A, a), ob = run(B, b);
        long diff = 0, moved = 0;
        for (int t = 0; t < kFrames; ++t)
            for (int c = 0; c < 3; ++c)
                for (int y = 0; y < comp_h(A.f, c); ++y)
                    for (int x = 0; x < comp_w(A.f, c); ++x) {
                        diff += get(oa[t], A.f, c, x, y) != get(ob[t], B.f, c, x, y);
                        moved += get(oa[t], A.f, c, x, y) != get(a[t], A.f, c, x, y);
                    }
        EXPECT_EQ(diff, 0);
        EXPECT_GT(moved, 0);
    }
}

// The output may be written over the pushed frame's own memory (what the filter does): the same
// samples as into a separate buffer, and alpha (yuva420p's plane 3) untouched.
TEST(NativeFormats, OutputOverThePushedFrame) {
    for (const Format *F : {&kYuva420p, &kP010, &kBgr0, &kGbrpf32}) {
        SCOPED_TRACE(F->name);
        std::vector<Frame> clip = make_clip(*F, 31);
        const std::vector<Frame> apart = run(*F, clip), over = run(*F, clip, kDefaultAmount, true);
        for (int t = 0; t < kFrames; ++t)
            for (int p = 0; p < F->nb_planes; ++p)
                EXPECT_TRUE(apart[t].plane[p] == over[t].plane[p]) << "frame " << t << " plane " << p;
        if (F->nb_planes == 4) {
            for (int t = 0; t < kFrames; ++t) EXPECT_TRUE(over[t].plane[3] == clip[t].plane[3]) << "alpha of frame " << t;
        }
    }
}

// Amounts: 0 returns the input bit-exact (floats included, -0.0 and NaN samples kept); 1 is the
// default; luma only moves no chroma sample of a 4:2:0 frame and gives the full run's Y'; chroma
// only keeps Y' and gives the full run's chroma; gray ignores the chroma amount; R'G'B' with luma
// only moves R', G' and B' of a pixel by the same amount, the BT.709 luma of the full change.
TEST(Amounts, ZeroOneLumaChroma) {
    for (const Format *F : {&kYuv420p, &kP010, &kGbrp, &kGbrpf32}) {
        SCOPED_TRACE(F->name);
        std::vector<Frame> clip = make_clip(*F, 41);
        if (F->f.is_float) {
            set(clip[1], F->f, 0, 3, 4, float_bits(-0.0f));
            set(clip[2], F->f, 2, 5, 6, float_bits(NAN));
        }
        const std::vector<Frame> zero = run(*F, clip, lc(0.f, 0.f));
        for (int t = 0; t < kFrames; ++t)
            for (int p = 0; p < F->nb_planes; ++p) EXPECT_TRUE(zero[t].plane[p] == clip[t].plane[p]) << "frame " << t;
        const std::vector<Frame> dflt = run(*F, clip), one = run(*F, clip, lc(1.f, 1.f));
        long moved = 0;
        for (int t = 0; t < kFrames; ++t)
            for (int p = 0; p < F->nb_planes; ++p) {
                EXPECT_TRUE(one[t].plane[p] == dflt[t].plane[p]) << "frame " << t;
                moved += dflt[t].plane[p] != clip[t].plane[p];
            }
        EXPECT_GT(moved, 0);
    }
    // 4:2:0: luma only / chroma only
    {
        std::vector<Frame> clip = make_clip(kYuv420p, 42);
        const std::vector<Frame> full = run(kYuv420p, clip), luma = run(kYuv420p, clip, lc(1.f, 0.f)),
                                 chroma = run(kYuv420p, clip, lc(0.f, 1.f));
        for (int t = 0; t < kFrames; ++t) {
            EXPECT_TRUE(luma[t].plane[0] == full[t].plane[0]) << "Y' of the luma-only run, frame " << t;
            EXPECT_TRUE(luma[t].plane[1] == clip[t].plane[1] && luma[t].plane[2] == clip[t].plane[2])
                << "a chroma sample moved with chroma amount 0, frame " << t;
            EXPECT_TRUE(chroma[t].plane[0] == clip[t].plane[0]) << "Y' moved with luma amount 0, frame " << t;
            EXPECT_TRUE(chroma[t].plane[1] == full[t].plane[1] && chroma[t].plane[2] == full[t].plane[2]);
        }
    }
    // gray: luma only
    {
        std::vector<Frame> clip = make_clip(kGray, 43);
        const std::vector<Frame> full = run(kGray, clip), nochroma = run(kGray, clip, lc(1.f, 0.f));
        for (int t = 0; t < kFrames; ++t) EXPECT_TRUE(full[t].plane[0] == nochroma[t].plane[0]);
    }
    // R'G'B' split, in float so the changes are seen exactly
    {
        std::vector<Frame> clip = make_clip(kGbrpf32, 44);
        const std::vector<Frame> full = run(kGbrpf32, clip), luma = run(kGbrpf32, clip, lc(1.f, 0.f)),
                                 half = run(kGbrpf32, clip, lc(0.5f, 0.5f));
        double worst_luma = 0, worst_half = 0;
        for (int t = 0; t < kFrames; ++t) {
            const Frame &in = clip[t], &f = full[t], &l = luma[t], &h = half[t];
            for (int y = 0; y < kH; ++y)
                for (int x = 0; x < kW; ++x) {
                    double d[3], dl[3];
                    for (int c = 0; c < 3; ++c) {
                        const double i = as_float(get(in, kGbrpf32.f, c, x, y));
                        d[c] = as_float(get(f, kGbrpf32.f, c, x, y)) - i;
                        dl[c] = as_float(get(l, kGbrpf32.f, c, x, y)) - i;
                        worst_half = std::max(worst_half, std::fabs(as_float(get(h, kGbrpf32.f, c, x, y)) - i - 0.5 * d[c]));
                    }
                    const double lum = 0.2126 * d[0] + 0.7152 * d[1] + 0.0722 * d[2];
                    for (int c = 0; c < 3; ++c) worst_luma = std::max(worst_luma, std::fabs(dl[c] - lum));
                }
        }
        std::printf("  R'G'B' luma-only: worst |change - luma of the full change| %.2e; half: %.2e\n", worst_luma, worst_half);
        EXPECT_LT(worst_luma, 1e-6);
        EXPECT_LT(worst_half, 1e-6);
    }
}

namespace {

// A copy of the golden weights with the output head's weight and bias set to zero: the head then
// adds nothing to its residual (the s2d centre frame). Written into
// the test binary's working directory; the path is returned.
std::string zero_head_weights() {
    std::FILE *f = std::fopen(weights().c_str(), "rb");
    EXPECT_TRUE(f) << weights();
    std::vector<char> b;
    char buf[65536];
    for (size_t n; f && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) b.insert(b.end(), buf, buf + n);
    if (f) std::fclose(f);
    uint64_t hl = 0;
    std::memcpy(&hl, b.data(), 8);
    const std::string header(b.data() + 8, hl);
    int zeroed = 0;
    for (const char *name : {"\"head.weight\"", "\"head.bias\""}) {
        const size_t at = header.find(name), offs = header.find("\"data_offsets\"", at);
        if (at == std::string::npos || offs == std::string::npos) continue;
        unsigned long long begin = 0, end = 0;
        if (std::sscanf(header.c_str() + header.find('[', offs), "[%llu,%llu]", &begin, &end) != 2) continue;
        std::memset(b.data() + 8 + hl + begin, 0, end - begin);
        ++zeroed;
    }
    EXPECT_EQ(zeroed, 2) << "head.weight / head.bias not found in " << weights();
    const std::string out = "engine_frames_test_zero_head.safetensors";
    std::FILE *o = std::fopen(out.c_str(), "wb");
    EXPECT_TRUE(o) << out;
    if (o) {
        std::fwrite(b.data(), 1, b.size(), o);
        std::fclose(o);
    }
    return out;
}

}  // namespace

// A network that changes nothing returns every sample bit-exact, also where the frame decodes to
// R'G'B' outside [0, 1] (saturated Y'CbCr, float R'G'B' beyond the range): the head's clamp range
// is widened to the input sample, [min(-1, x), max(1, x)], so the clamp moves no sample by itself.
// Fails with the plain clamp to [-1, 1] (it pulls such samples into range).
TEST(Identity, ZeroHeadReturnsTheInputOutOfRangeIncluded) {
    const std::string model = zero_head_weights();
    for (const Format *F : {&kYuv420p, &kP010, &kYuv444p16, &kGbrp, &kGbrpf32}) {
        SCOPED_TRACE(F->name);
        std::vector<Frame> clip = make_clip(*F, 51);
        const int depth = F->f.comp[0].depth;
        const uint32_t top = F->f.is_float ? 0 : (1u << depth) - 1;
        long outside = 0;
        for (Frame &fr : clip)
            for (int y = 0; y < kH; y += 3)
                for (int x = 0; x < kW; x += 5) {
                    // saturated corners of the code range: Y'CbCr max/min with extreme chroma decode
                    // to R'G'B' beyond [0, 1]; floats get values beyond it directly
                    const bool hi = ((x + y) / 3) & 1;
                    for (int c = 0; c < 3; ++c) {
                        const int cx = c ? x >> F->f.log2_chroma_w : x, cy = c ? y >> F->f.log2_chroma_h : y;
                        if (F->f.is_float)
                            set(fr, F->f, c, cx, cy, float_bits(hi ? 1.25f : -0.2f));
                        else if (F->sys == PL_COLOR_SYSTEM_RGB)
                            set(fr, F->f, c, cx, cy, hi ? top : 0);
                        else
                            set(fr, F->f, c, cx, cy, c == 0 ? (hi ? top : 0) : (hi == (c == 1) ? top : 0));
                    }
                    outside += F->sys != PL_COLOR_SYSTEM_RGB || F->f.is_float;
                }
        const std::vector<Frame> out = run(*F, clip, kDefaultAmount, false, -1, kDefaultAmount, model);
        for (int t = 0; t < kFrames; ++t)
            for (int p = 0; p < F->nb_planes; ++p) EXPECT_TRUE(out[t].plane[p] == clip[t].plane[p]) << "frame " << t << " plane " << p;
        if (F->sys != PL_COLOR_SYSTEM_RGB || F->f.is_float) {
            EXPECT_GT(outside, 0);
        }
    }
    std::remove(model.c_str());
}

// The blend: amount a scales the whole change, on top of luma and chroma: {a, l, c} is the same
// as {1, a l, a c} (bit-exact, the engine folds it), amount 0 gives the input back bit-exact
// whatever luma and chroma say, and a blend of 0.5 on float R'G'B' moves every sample by half of
// the full change.
TEST(Amounts, Blend) {
    std::vector<Frame> clip = make_clip(kYuv420p, 45);
    const DenoiseAmount blend = {0.5f, 1.f, 0.5f}, zero = {0.f, 1.f, 1.f};
    const std::vector<Frame> b = run(kYuv420p, clip, blend), folded = run(kYuv420p, clip, lc(0.5f, 0.25f)),
                             z = run(kYuv420p, clip, zero), full = run(kYuv420p, clip);
    long moved = 0;
    for (int t = 0; t < kFrames; ++t)
        for (int p = 0; p < kYuv420p.nb_planes; ++p) {
            EXPECT_TRUE(b[t].plane[p] == folded[t].plane[p]) << "frame " << t << " plane " << p;
            EXPECT_TRUE(z[t].plane[p] == clip[t].plane[p]) << "amount 0 moved frame " << t << " plane " << p;
            moved += b[t].plane[p] != full[t].plane[p];
        }
    EXPECT_GT(moved, 0) << "a blend of 0.5 gave the full change";

    std::vector<Frame> fclip = make_clip(kGbrpf32, 46);
    const DenoiseAmount half = {0.5f, 1.f, 1.f};
    const std::vector<Frame> ff = run(kGbrpf32, fclip), fh = run(kGbrpf32, fclip, half);
    double worst = 0;
    for (int t = 0; t < kFrames; ++t)
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < kH; ++y)
                for (int x = 0; x < kW; ++x) {
                    const double i = as_float(get(fclip[t], kGbrpf32.f, c, x, y));
                    const double d = as_float(get(ff[t], kGbrpf32.f, c, x, y)) - i;
                    worst = std::max(worst, std::fabs(as_float(get(fh[t], kGbrpf32.f, c, x, y)) - i - 0.5 * d));
                }
    std::printf("  blend 0.5 on float R'G'B': worst |change - half the full change| %.2e\n", worst);
    EXPECT_LT(worst, 1e-6);
}

// Amounts set between pushes apply from the next pushed frame's output on, exactly: outputs of
// frames pushed before the change are those of the default run, outputs of frames pushed after
// it the input itself (amount 0), although output t is computed only once frame t + R is pushed.
TEST(Amounts, ChangeAppliesFromTheNextPushedFrame) {
    const int k = 2;
    std::vector<Frame> clip = make_clip(kYuv420p, 47);
    const DenoiseAmount off = {0.f, 1.f, 1.f};
    const std::vector<Frame> full = run(kYuv420p, clip),
                             changed = run(kYuv420p, clip, kDefaultAmount, false, k, off);
    for (int t = 0; t < kFrames; ++t)
        for (int p = 0; p < kYuv420p.nb_planes; ++p) {
            if (t < k) {
                EXPECT_TRUE(changed[t].plane[p] == full[t].plane[p]) << "frame " << t << " pushed before the change";
                EXPECT_FALSE(changed[t].plane[p] == clip[t].plane[p]) << "frame " << t << " was not denoised";
            } else {
                EXPECT_TRUE(changed[t].plane[p] == clip[t].plane[p]) << "frame " << t << " pushed after amount 0";
            }
        }
}
