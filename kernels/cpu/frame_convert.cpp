// Native frames <-> R'G'B' on the CPU (frame_convert.h has the math of each step).
//
// Generic over DenoiseComponent (plane, offset, step, shift, depth), so planar, semi-planar and
// packed layouts at 8..16-bit and float32 share one path, as libavutil's av_read_image_line2() /
// av_write_image_line2() do. The arithmetic is, operation for operation, the one the denoise
// filter used before the engine took over the pixel work (filter/vf_denoise.c of API v1), so
// outputs are unchanged, but for a float sample whose change is exactly 0: it now keeps its bits
// (before, -0.0 + 0 gave +0.0).
// Traffic per frame: read copies the colour samples once (2 bytes per integer sample); to_rgb
// writes 3 floats per pixel; add_change reads the change (3 floats per pixel) and, for subsampled
// chroma, writes and reads a 3 x height x cw horizontal pass; write touches each sample's word
// once. Every pass is parallel over rows (common/parallel.h).
#include "frame_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../common/parallel.h"

namespace denoise {
namespace cpu {

namespace {

inline unsigned rl16(const uint8_t *p) { return p[0] | (unsigned)p[1] << 8; }
inline uint32_t rl32(const uint8_t *p) {
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
inline void wl16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
inline void wl32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Float input before the network: one NaN or Inf would spread through the whole window.
inline float sanitize(float v) {
    if (!std::isfinite(v)) return std::isnan(v) ? 0.0f : v > 0 ? 1.0f : 0.0f;
    return std::min(2.0f, std::max(-1.0f, v));
}

void rows(int n, const std::function<void(int, int)> &fn) {
    parallel_for(n, grain_for(n), [&](int64_t a, int64_t b) { fn((int)a, (int)b); });
}

}  // namespace

FrameConvert::FrameConvert(const DenoisePixelFormat &fmt, int width, int height, int cw, int ch)
    : fmt_(fmt), width_(width), height_(height), cw_(cw), ch_(ch) {
    subsampled_ = fmt.nb_components == 3 && (fmt.log2_chroma_w || fmt.log2_chroma_h);
    mask_ = fmt.is_float ? 0u : (1u << fmt.comp[0].depth) - 1;
    if (subsampled_) {
        hbuf_.resize((size_t)3 * height * cw);
        cacc_.resize((size_t)3 * ch * cw);
    }
}

void FrameConvert::read(const DenoiseImage &in, NativeSamples *s) const {
    for (int c = 0; c < fmt_.nb_components; ++c) {
        const DenoiseComponent &cp = fmt_.comp[c];
        const int w = comp_w(c), h = comp_h(c), step = cp.step, shift = cp.shift;
        const unsigned mask = mask_;
        const uint8_t *base = in.data[cp.plane] + cp.offset;
        const ptrdiff_t ls = in.linesize[cp.plane];
        if (fmt_.is_float) {
            s->bits[c].resize((size_t)w * h);
            uint32_t *o = s->bits[c].data();
            rows(h, [&](int y0, int y1) {
                for (int y = y0; y < y1; ++y) {
                    const uint8_t *src = base + (ptrdiff_t)y * ls;
                    for (int x = 0; x < w; ++x) o[(size_t)y * w + x] = rl32(src + (ptrdiff_t)x * step);
                }
            });
        } else {
            s->code[c].resize((size_t)w * h);
            uint16_t *o = s->code[c].data();
            const bool word16 = fmt_.bytes == 2;
            rows(h, [&](int y0, int y1) {
                for (int y = y0; y < y1; ++y) {
                    const uint8_t *src = base + (ptrdiff_t)y * ls;
                    uint16_t *d = o + (size_t)y * w;
                    if (word16)
                        for (int x = 0; x < w; ++x) d[x] = (uint16_t)((rl16(src + (ptrdiff_t)x * step) >> shift) & mask);
                    else
                        for (int x = 0; x < w; ++x) d[x] = (uint16_t)((src[(ptrdiff_t)x * step] >> shift) & mask);
                }
            });
        }
    }
}

void FrameConvert::write(const NativeSamples &s, const DenoiseImage &out) const {
    for (int c = 0; c < fmt_.nb_components; ++c) {
        const DenoiseComponent &cp = fmt_.comp[c];
        const int w = comp_w(c), h = comp_h(c), step = cp.step, shift = cp.shift;
        const unsigned keep = ~(mask_ << shift);
        uint8_t *base = out.data[cp.plane] + cp.offset;
        const ptrdiff_t ls = out.linesize[cp.plane];
        rows(h, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y) {
                uint8_t *dst = base + (ptrdiff_t)y * ls;
                if (fmt_.is_float) {
                    const uint32_t *v = s.bits[c].data() + (size_t)y * w;
                    for (int x = 0; x < w; ++x) wl32(dst + (ptrdiff_t)x * step, v[x]);
                } else if (fmt_.bytes == 2) {
                    const uint16_t *v = s.code[c].data() + (size_t)y * w;
                    for (int x = 0; x < w; ++x) {
                        uint8_t *p = dst + (ptrdiff_t)x * step;
                        wl16(p, (rl16(p) & keep) | ((unsigned)v[x] << shift));
                    }
                } else {
                    const uint16_t *v = s.code[c].data() + (size_t)y * w;
                    for (int x = 0; x < w; ++x) {
                        uint8_t *p = dst + (ptrdiff_t)x * step;
                        *p = (uint8_t)((*p & keep) | ((unsigned)v[x] << shift));
                    }
                }
            }
        });
    }
}

void FrameConvert::make_taps(Taps *t, int full, int n, int log2_sub, int pos) {
    const int sub = 1 << log2_sub;
    const float off = pos / 256.0f * (sub - 1);
    t->i0.resize(full);
    t->i1.resize(full);
    t->w.resize(full);
    t->wsum.assign(n, 0.0f);
    t->first.assign(n, full);
    t->last.assign(n, -1);
    for (int i = 0; i < full; ++i) {
        const float c = (i - off) / sub;
        const int c0 = (int)std::floor(c);
        const float w = c - c0;
        t->i0[i] = std::min(std::max(c0, 0), n - 1);
        t->i1[i] = std::min(std::max(c0 + 1, 0), n - 1);
        t->w[i] = w;
        t->wsum[t->i0[i]] += 1.0f - w;
        t->wsum[t->i1[i]] += w;
        for (int k : {t->i0[i], t->i1[i]}) {
            t->first[k] = std::min(t->first[k], i);
            t->last[k] = std::max(t->last[k], i);
        }
    }
    t->pos = pos;
}

void FrameConvert::set_taps(const FrameColor &color) {
    if (tx_.pos != color.xpos) make_taps(&tx_, width_, cw_, fmt_.log2_chroma_w, color.xpos);
    if (ty_.pos != color.ypos) make_taps(&ty_, height_, ch_, fmt_.log2_chroma_h, color.ypos);
}

void FrameConvert::to_rgb(const NativeSamples &s, const FrameColor &fc, float *const rgb[3]) {
    const int W = width_, H = height_;
    const float scale = fmt_.is_float ? 1.0f : 1.0f / mask_;
    // Component c at full resolution as normalised values into dst (W x H).
    auto load = [&](int c, float *dst) {
        rows(H, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y) {
                float *d = dst + (size_t)y * W;
                if (fmt_.is_float) {
                    const uint32_t *b = s.bits[c].data() + (size_t)y * W;
                    for (int x = 0; x < W; ++x) d[x] = bits_to_float(b[x]);
                } else {
                    const uint16_t *v = s.code[c].data() + (size_t)y * W;
                    for (int x = 0; x < W; ++x) d[x] = v[x] * scale;
                }
            }
        });
    };

    if (fmt_.nb_components == 1) {
        load(0, rgb[0]);
        if (!fc.rgb) {
            // Y'CbCr gray: Y' with neutral chroma; the rows of a decoding matrix give the same R',
            // G', B' for neutral chroma, so row 0 (R') is used.
            const float m0 = fc.dec[0][0], mc = fc.dec[0][1] + fc.dec[0][2], c0 = fc.dec_off[0], nt = fc.neutral;
            rows(H, [&](int y0, int y1) {
                for (int y = y0; y < y1; ++y) {
                    float *p = rgb[0] + (size_t)y * W;
                    for (int x = 0; x < W; ++x) p[x] = m0 * p[x] + mc * nt + c0;
                }
            });
        }
        std::memcpy(rgb[1], rgb[0], sizeof(float) * W * H);
        std::memcpy(rgb[2], rgb[0], sizeof(float) * W * H);
    } else if (fc.rgb) {
        for (int c = 0; c < 3; ++c) load(c, rgb[c]);
    } else {
        load(0, rgb[0]);
        if (subsampled_) {
            set_taps(fc);
            const int cw = cw_;
            for (int c = 1; c < 3; ++c) {
                const uint16_t *plane = s.code[c].data();
                rows(H, [&](int y0, int y1) {
                    for (int y = y0; y < y1; ++y) {
                        const uint16_t *r0 = plane + (size_t)ty_.i0[y] * cw, *r1 = plane + (size_t)ty_.i1[y] * cw;
                        const float wy = ty_.w[y];
                        float *d = rgb[c] + (size_t)y * W;
                        for (int x = 0; x < W; ++x) {
                            const int i0 = tx_.i0[x], i1 = tx_.i1[x];
                            const float wx = tx_.w[x];
                            const float a0 = r0[i0] * scale, a1 = r0[i1] * scale;
                            const float b0 = r1[i0] * scale, b1 = r1[i1] * scale;
                            const float a = a0 + wx * (a1 - a0);
                            const float b = b0 + wx * (b1 - b0);
                            d[x] = a + wy * (b - a);
                        }
                    }
                });
            }
        } else {
            load(1, rgb[1]);
            load(2, rgb[2]);
        }
        const auto &m = fc.dec;
        const float *off = fc.dec_off;
        rows(H, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y) {
                float *p0 = rgb[0] + (size_t)y * W, *p1 = rgb[1] + (size_t)y * W, *p2 = rgb[2] + (size_t)y * W;
                for (int x = 0; x < W; ++x) {
                    const float a = p0[x], b = p1[x], c = p2[x];
                    p0[x] = m[0][0] * a + m[0][1] * b + m[0][2] * c;
                    p1[x] = m[1][0] * a + m[1][1] * b + m[1][2] * c;
                    p2[x] = m[2][0] * a + m[2][1] * b + m[2][2] * c;
                    p0[x] += off[0];
                    p1[x] += off[1];
                    p2[x] += off[2];
                }
            }
        });
    }

    if (fmt_.is_float)
        for (int c = 0; c < 3; ++c)
            rows(H, [&](int y0, int y1) {
                for (int y = y0; y < y1; ++y) {
                    float *p = rgb[c] + (size_t)y * W;
                    for (int x = 0; x < W; ++x) p[x] = sanitize(p[x]);
                }
            });
}

void FrameConvert::apply_comp(const NativeSamples &s, int c, int phase, const float *delta, const float *noise,
                              NativeSamples *out) const {
    const int w = comp_w(c), h = comp_h(c);
    const int ox = phase * 23, oy = phase * 41;  // the dither tile's phase (backend.h)
    const int mask = kBlueNoiseSize - 1;
    if (fmt_.is_float) {
        out->bits[c].resize((size_t)w * h);
        rows(h, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y) {
                const uint32_t *src = s.bits[c].data() + (size_t)y * w;
                uint32_t *dst = out->bits[c].data() + (size_t)y * w;
                const float *d = delta + (size_t)y * w;
                for (int x = 0; x < w; ++x) {
                    const float o = bits_to_float(src[x]);
                    // a non-finite sample stays as it was, bit-exact; a non-finite change (never
                    // expected) is not applied
                    dst[x] = std::isfinite(o) && std::isfinite(d[x]) && d[x] != 0.0f ? float_to_bits(o + d[x]) : src[x];
                }
            }
        });
        return;
    }
    out->code[c].resize((size_t)w * h);
    const int top = (int)mask_;
    const float scale = (float)mask_;
    rows(h, [&](int y0, int y1) {
        for (int y = y0; y < y1; ++y) {
            const uint16_t *src = s.code[c].data() + (size_t)y * w;
            uint16_t *dst = out->code[c].data() + (size_t)y * w;
            const float *d = delta + (size_t)y * w;
            const float *n = noise + ((y + oy) & mask) * kBlueNoiseSize;
            for (int x = 0; x < w; ++x) {
                const int v = (int)src[x] + (int)std::floor(d[x] * scale + n[(x + ox) & mask]);
                dst[x] = (uint16_t)std::min(top, std::max(0, v));
            }
        }
    });
}

void FrameConvert::add_change(const NativeSamples &s, const FrameColor &fc, float *const d[3], Amount amount,
                              const float *noise, NativeSamples *out) {
    const int W = width_, H = height_;
    const float luma = amount.luma, chroma = amount.chroma;

    if (fc.rgb) {
        // R'G'B' (or float gray): the change's BT.709 luma l and the rest, scaled apart
        const bool gray = fmt_.nb_components == 1;
        if (gray || luma != chroma || luma != 1.0f)
            rows(H, [&](int y0, int y1) {
                for (int y = y0; y < y1; ++y) {
                    float *r = d[0] + (size_t)y * W, *g = d[1] + (size_t)y * W, *b = d[2] + (size_t)y * W;
                    for (int x = 0; x < W; ++x) {
                        const float l = 0.2126f * r[x] + 0.7152f * g[x] + 0.0722f * b[x];
                        if (gray) {
                            r[x] = luma * l;
                        } else if (luma == chroma) {
                            r[x] *= luma;
                            g[x] *= luma;
                            b[x] *= luma;
                        } else {
                            const float ll = luma * l;
                            r[x] = ll + chroma * (r[x] - l);
                            g[x] = ll + chroma * (g[x] - l);
                            b[x] = ll + chroma * (b[x] - l);
                        }
                    }
                }
            });
        // one dither phase for R', G' and B' (backend.h)
        for (int c = 0; c < fmt_.nb_components; ++c) apply_comp(s, c, 0, d[c], noise, out);
        return;
    }

    const auto &e = fc.enc;
    if (fmt_.nb_components == 3 && subsampled_) {
        // Chroma first: it needs the R'G'B' change before the Y' pass overwrites d[0]. Averaging
        // R'G'B' first and converting after is the same thing, the conversion being linear.
        set_taps(fc);
        const int cw = cw_, ch = ch_;
        const size_t hplane = (size_t)H * cw, cplane = (size_t)ch * cw;
        float *hb = hbuf_.data(), *ca = cacc_.data();
        // horizontal adjoint of every row
        rows(H, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y)
                for (int k = 0; k < 3; ++k) {
                    const float *src = d[k] + (size_t)y * W;
                    float *hr = hb + k * hplane + (size_t)y * cw;
                    std::fill(hr, hr + cw, 0.0f);
                    for (int x = 0; x < W; ++x) {
                        const float wx = tx_.w[x];
                        hr[tx_.i0[x]] += (1.0f - wx) * src[x];
                        hr[tx_.i1[x]] += wx * src[x];
                    }
                }
        });
        // vertical adjoint, per chroma row (rows y in increasing order, the i0 tap before the i1
        // tap of the same row), normalised, then to Cb and Cr
        rows(ch, [&](int j0, int j1) {
            for (int j = j0; j < j1; ++j) {
                float *acc[3];
                for (int k = 0; k < 3; ++k) {
                    acc[k] = ca + k * cplane + (size_t)j * cw;
                    std::fill(acc[k], acc[k] + cw, 0.0f);
                }
                for (int y = ty_.first[j]; y <= ty_.last[j]; ++y) {
                    const float wy = ty_.w[y];
                    for (int k = 0; k < 3; ++k) {
                        const float *hr = hb + k * hplane + (size_t)y * cw;
                        if (ty_.i0[y] == j)
                            for (int i = 0; i < cw; ++i) acc[k][i] += (1.0f - wy) * hr[i];
                        if (ty_.i1[y] == j)
                            for (int i = 0; i < cw; ++i) acc[k][i] += wy * hr[i];
                    }
                }
                for (int i = 0; i < cw; ++i) {
                    const float wt = tx_.wsum[i] * ty_.wsum[j];
                    const float inv = wt > 0.0f ? 1.0f / wt : 0.0f;
                    float v[3];
                    for (int k = 0; k < 3; ++k) v[k] = acc[k][i] * inv;
                    acc[1][i] = (e[1][0] * v[0] + e[1][1] * v[1] + e[1][2] * v[2]) * chroma;
                    acc[2][i] = (e[2][0] * v[0] + e[2][1] * v[1] + e[2][2] * v[2]) * chroma;
                }
            }
        });
        apply_comp(s, 1, 1, ca + 1 * cplane, noise, out);
        apply_comp(s, 2, 2, ca + 2 * cplane, noise, out);
    } else if (fmt_.nb_components == 3) {
        // 4:4:4: (Y', Cb, Cr) change per pixel
        rows(H, [&](int y0, int y1) {
            for (int y = y0; y < y1; ++y) {
                float *p0 = d[0] + (size_t)y * W, *p1 = d[1] + (size_t)y * W, *p2 = d[2] + (size_t)y * W;
                for (int x = 0; x < W; ++x) {
                    const float R = p0[x], G = p1[x], B = p2[x];
                    p0[x] = (e[0][0] * R + e[0][1] * G + e[0][2] * B) * luma;
                    p1[x] = (e[1][0] * R + e[1][1] * G + e[1][2] * B) * chroma;
                    p2[x] = (e[2][0] * R + e[2][1] * G + e[2][2] * B) * chroma;
                }
            }
        });
        for (int c = 0; c < 3; ++c) apply_comp(s, c, c, d[c], noise, out);
        return;
    }

    // Y' change (subsampled Y'CbCr and gray)
    rows(H, [&](int y0, int y1) {
        for (int y = y0; y < y1; ++y) {
            float *p0 = d[0] + (size_t)y * W;
            const float *p1 = d[1] + (size_t)y * W, *p2 = d[2] + (size_t)y * W;
            for (int x = 0; x < W; ++x) p0[x] = (e[0][0] * p0[x] + e[0][1] * p1[x] + e[0][2] * p2[x]) * luma;
        }
    });
    apply_comp(s, 0, 0, d[0], noise, out);
}

}  // namespace cpu
}  // namespace denoise
