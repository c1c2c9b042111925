// Scans of a host frame's samples for the caller (frame_scan.h).
#include "frame_scan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/parallel.h"

namespace denoise {

namespace {

// Sample words as denoise.h's DenoiseComponent describes them: little-endian.
inline unsigned read16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
inline float read_float(const uint8_t *p) {
    const uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

inline const uint8_t *row_of(const DenoiseImage &in, const DenoiseComponent &c, int y) {
    return in.data[c.plane] + (ptrdiff_t)y * in.linesize[c.plane] + c.offset;
}

}  // namespace

int SceneScore::block_size(int w, int h) {
    return std::max(kBlockMin, (int)std::lrint(std::sqrt((double)w * h / kGrid)));
}

SceneScore::SceneScore(const DenoisePixelFormat &fmt, int w, int h) : fmt_(fmt), w_(w), h_(h) {
    block_ = block_size(w, h);
    bw_ = (w + block_ - 1) / block_;
    bh_ = (h + block_ - 1) / block_;
    cur_.assign((size_t)bw_ * bh_, 0.f);
    prev_.assign((size_t)bw_ * bh_, 0.f);
    count_.assign((size_t)bw_ * bh_, 0);
    for (int by = 0; by < bh_; by++)
        for (int bx = 0; bx < bw_; bx++)
            count_[(size_t)by * bw_ + bx] = (std::min((by + 1) * block_, h) - by * block_) *
                                            (std::min((bx + 1) * block_, w) - bx * block_);
}

int SceneScore::score(const DenoiseImage &in, float luma_gain, float threshold, double *score_out) {
    // the luma: G' of R'G'B' frames (components R', G', B'), else Y'
    const bool rgb = fmt_.nb_components == 3 && in.color.repr.sys == PL_COLOR_SYSTEM_RGB;
    const DenoiseComponent &c = fmt_.comp[rgb ? 1 : 0];
    const int w = w_, h = h_, bw = bw_, B = block_, nb = bw_ * bh_;
    const int step = c.step, shift = c.shift;
    const unsigned mask = (1u << std::min(c.depth, 16)) - 1;
    float scale = 1.0f / mask;
    if (in.color.repr.sys != PL_COLOR_SYSTEM_RGB) scale *= luma_gain;

    // Per row, each block's run of B samples is summed in a register (integers exactly; no
    // division per sample: a 3840x2160 frame is 8.3 M samples), then added to its block's sum.
    parallel_for(bh_, 1, [&](int64_t by0, int64_t by1) {
        std::fill(cur_.begin() + by0 * bw, cur_.begin() + by1 * bw, 0.f);
        for (int y = (int)by0 * B; y < std::min((int)by1 * B, h); y++) {
            const uint8_t *src = row_of(in, c, y);
            float *row = cur_.data() + (size_t)(y / B) * bw;
            for (int bx = 0, x0 = 0; bx < bw; bx++, x0 += B) {
                const int x1 = std::min(x0 + B, w);
                if (fmt_.is_float) {
                    float sum = 0;
                    for (int x = x0; x < x1; x++) {
                        const float v = read_float(src + x * step);
                        sum += !std::isfinite(v) ? (v > 0 ? 1.0f : 0.0f) : v < -1.0f ? -1.0f : v > 2.0f ? 2.0f : v;
                    }
                    row[bx] += sum;
                } else if (fmt_.bytes == 2) {
                    uint32_t sum = 0;
                    for (int x = x0; x < x1; x++) sum += (read16(src + x * step) >> shift) & mask;
                    row[bx] += sum * scale;
                } else {
                    uint32_t sum = 0;
                    for (int x = x0; x < x1; x++) sum += (src[x * step] >> shift) & mask;
                    row[bx] += sum * scale;
                }
            }
        }
    });
    for (int i = 0; i < nb; i++) cur_[i] /= count_[i];

    *score_out = 0;
    if (!have_prev_) {
        // first frame: nothing to compare with
        cur_.swap(prev_);
        have_prev_ = true;
        prev_mafd_ = 0;
        return 0;
    }
    double sad = 0;
    for (int i = 0; i < nb; i++) sad += count_[i] * std::fabs((double)cur_[i] - prev_[i]);
    cur_.swap(prev_);

    const double mafd = sad * 100.0 / ((double)w * h);
    const double diff = std::fabs(mafd - prev_mafd_);
    const double score = std::min(std::max(std::min(mafd, diff), 0.0), 100.0);
    prev_mafd_ = mafd;
    *score_out = score;
    return threshold > 0 && (int64_t)w * h >= kMinPixels && score >= threshold;
}

int64_t count_nonfinite(const DenoisePixelFormat &fmt, int w, int h, const DenoiseImage &in) {
    if (!fmt.is_float) return 0;
    std::atomic<int64_t> bad{0};
    for (int k = 0; k < fmt.nb_components; k++) {
        const DenoiseComponent &c = fmt.comp[k];
        parallel_for(h, grain_for(h), [&](int64_t y0, int64_t y1) {
            int64_t n = 0;
            for (int y = (int)y0; y < (int)y1; y++) {
                const uint8_t *row = row_of(in, c, y);
                for (int x = 0; x < w; x++) n += !std::isfinite(read_float(row + x * c.step));
            }
            bad += n;
        });
    }
    return bad;
}

}  // namespace denoise
