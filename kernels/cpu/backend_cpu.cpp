// The CPU backend (backend.h): fp32 reference, synchronous (pipeline_depth 0).
//
// Per input frame (push_frame): the native samples are copied (frame_convert.cpp read), converted
// to full-resolution R'G'B' (to_rgb), then x = 2v - 1 is reflect-padded to hp x wp (model.py's
// reflect_index on both axes, so any size down to 1x1 works) and space-to-depth'd to
// (hp/2, wp/2, 12), channel c*4 + dy*2 + dx. Kept: x (network units) and the native copy.
// Per feature map (compute_features): the fusion input of frames s-r..s+r plus the sigma/255
// channel, one U-Net pass (unet.cpp) -> F_s (hp/2, wp/2, c0). Model option align (weights/denoise_train/align.py
// align_window): first every frame of the window but the centre is matched against x_s
// (block_match: per align_tile tile of the padded frame, a whole-pixel shift) and moved onto it
// (shift_tiles_s2d); the shift maps of taps r-1 and r+1 are kept with F_s for the head.
// Per output (queue_output): the head on F_{t-1}, F_t, F_{t+1} with the s2d residual of frame t,
// the change d = (out - x_t) / 2 in R'G'B' units (cropped to width x height), added to frame t's
// native samples (add_change) into an output buffer kept until write_output copies it out. With
// align, F_{t-1} and F_{t+1} are first moved onto x_t by window t's shifts of those frames, halved
// (floor), on tiles of align_tile / 2 (align.py align_features).
// Memory per kept frame: hp/2 * wp/2 * 12 floats + 2 bytes per colour sample (5.5 MB + 0.6 MB at
// 854x480 yuv420p); per feature map hp/2 * wp/2 * c0 floats (14.7 MB); buffers of evicted frames,
// features and outputs are reused. With align, scratch for 2r moved frames (4 x 5.5 MB), the two
// moved feature maps (2 x 14.7 MB) and block_match's luma planes (4.8 MB), and 2 shift maps per
// feature map (hp/align_tile x wp/align_tile x 2 int32 each).
#include <map>
#include <new>
#include <vector>

#include "../backend.h"
#include "../common/noise_estimate.h"
#include "../common/parallel.h"
#include "../sigma_auto.h"
#include "frame_convert.h"
#include "ops.h"
#include "unet.h"

namespace denoise {

namespace {

int reflect_index(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return (int)(i >= n ? p - i : i);
}

class CpuBackend final : public Backend {
public:
    CpuBackend(const Model &m, const StreamSpec &spec)
        : spec_(spec), conv_(spec.format, spec.width, spec.height, spec.cw, spec.ch) {
        cpu::pack_model(m, &pm_);
        const ModelConfig &cfg = m.cfg;
        h2_ = spec.hp / 2;
        w2_ = spec.wp / 2;
        ry_.resize(spec.hp);
        rx_.resize(spec.wp);
        for (int i = 0; i < spec.hp; ++i) ry_[i] = reflect_index(i, spec.height);
        for (int i = 0; i < spec.wp; ++i) rx_[i] = reflect_index(i, spec.width);
        ws_.resize(cfg, h2_, w2_);
        fusion_in_.assign((size_t)h2_ * w2_ * cfg.fusion_in_channels(), 0.f);
        head_out_.assign((size_t)h2_ * w2_ * cfg.head_out_channels(), 0.f);
        if (cfg.align) {
            map_ints_ = (size_t)(spec.hp / cfg.align_tile) * (spec.wp / cfg.align_tile) * 2;
            moved_frames_.resize((size_t)2 * cfg.fusion_radius * h2_ * w2_ * 12);
            moved_feats_.resize((size_t)2 * h2_ * w2_ * cfg.channels[0]);
            match_work_.resize(cpu::block_match_work_floats(h2_, w2_));
            tap_shifts_.resize(map_ints_);
            half_shifts_.resize(map_ints_);
        }
        const size_t plane = (size_t)spec.width * spec.height;
        rgb_.assign(3 * plane, 0.f);
    }

    int push_frame(int64_t idx, const DenoiseImage &in, const FrameColor &color) override {
        if (frames_.count(idx)) return fail(DENOISE_EINVAL, "push_frame: frame " + std::to_string(idx) + " already kept");
        try {
            Frame f = take(free_frames_);
            conv_.read(in, &f.native);
            float *rgb[3] = {plane(0), plane(1), plane(2)};
            conv_.to_rgb(f.native, color, rgb);
            f.x.resize((size_t)h2_ * w2_ * 12);
            const int h2 = h2_, w2 = w2_, W = spec_.width;
            const int *ry = ry_.data(), *rx = rx_.data();
            float *x = f.x.data();
            parallel_for(h2, grain_for(h2), [&](int64_t y0, int64_t y1) {
                for (int y = (int)y0; y < (int)y1; ++y)
                    for (int xx = 0; xx < w2; ++xx) {
                        float *o = x + ((size_t)y * w2 + xx) * 12;
                        for (int c = 0; c < 3; ++c)
                            for (int dy = 0; dy < 2; ++dy) {
                                const float *row = rgb[c] + (size_t)ry[2 * y + dy] * W;
                                for (int dx = 0; dx < 2; ++dx) o[c * 4 + dy * 2 + dx] = 2.0f * row[rx[2 * xx + dx]] - 1.0f;
                            }
                    }
            });
            f.color = color;
            frames_.emplace(idx, std::move(f));
            rgb_of_ = idx;
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "push_frame: out of memory keeping frame " + std::to_string(idx));
        }
        return 0;
    }

    int compute_features(int64_t s, const int64_t *frames, int n, float sigma) override {
        const ModelConfig &cfg = pm_.model->cfg;
        if (n != 2 * cfg.fusion_radius + 1)
            return fail(DENOISE_EINVAL, "compute_features: " + std::to_string(n) + " frames, the model fuses " +
                                            std::to_string(2 * cfg.fusion_radius + 1));
        try {
            std::vector<const float *> win;
            for (int k = 0; k < n; ++k) {
                auto it = frames_.find(frames[k]);
                if (it == frames_.end())
                    return fail(DENOISE_EINVAL, "compute_features: frame " + std::to_string(frames[k]) + " is not kept");
                win.push_back(it->second.x.data());
            }
            Feature f = take(free_feats_);
            if (cfg.align) {
                const int r = cfg.fusion_radius;
                f.shifts.resize(2 * map_ints_);
                float *moved = moved_frames_.data();
                for (int k = 0; k < n; ++k) {
                    if (k == r) continue;
                    // the head's taps r-1 and r+1 keep their map with F_s, the others use scratch
                    int32_t *sk = k == r - 1   ? f.shifts.data()
                                  : k == r + 1 ? f.shifts.data() + map_ints_
                                               : tap_shifts_.data();
                    int rc = cpu::block_match(win[r], win[k], h2_, w2_, cfg.align, cfg.align_tile, sk,
                                              match_work_.data());
                    if (!rc) rc = cpu::shift_tiles_s2d(win[k], h2_, w2_, sk, cfg.align_tile, moved);
                    if (rc)
                        return fail(rc, "compute_features: aligning frame " + std::to_string(frames[k]) + " onto " +
                                            std::to_string(frames[r]) + " failed");
                    win[k] = moved;
                    moved += (size_t)h2_ * w2_ * 12;
                }
            }
            cpu::build_fusion_input(win.data(), n, h2_, w2_, sigma, fusion_in_.data());
            f.F.resize((size_t)h2_ * w2_ * cfg.channels[0]);
            cpu::unet_forward(pm_, fusion_in_.data(), h2_, w2_, f.F.data(), ws_);
            feats_[s] = std::move(f);
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "compute_features: out of memory");
        }
        return 0;
    }

    int queue_output(int64_t t, const int64_t feats[3], Amount amount) override {
        auto fr = frames_.find(t);
        if (fr == frames_.end()) return fail(DENOISE_EINVAL, "queue_output: frame " + std::to_string(t) + " is not kept");
        const float *F[3];
        const Feature *window_t = nullptr;
        for (int k = 0; k < 3; ++k) {
            auto it = feats_.find(feats[k]);
            if (it == feats_.end())
                return fail(DENOISE_EINVAL, "queue_output: feature map " + std::to_string(feats[k]) + " is not computed");
            F[k] = it->second.F.data();
            if (k == 1) window_t = &it->second;
        }
        try {
            const ModelConfig &cfg = pm_.model->cfg;
            if (cfg.align) {
                // F_{t-1}, F_{t+1} through window t's maps of its taps r-1, r+1: engine.cpp mirrors
                // them as denoise_sequence mirrors the head's x_{t-1}, x_{t+1}, so they are the same
                // frame pairs
                const int C = cfg.channels[0];
                for (int j = 0; j < 2; ++j) {
                    const int32_t *s = window_t->shifts.data() + j * map_ints_;
                    for (size_t i = 0; i < map_ints_; ++i) half_shifts_[i] = floor_half(s[i]);
                    float *moved = moved_feats_.data() + (size_t)j * h2_ * w2_ * C;
                    const int rc =
                        cpu::shift_tiles(F[2 * j], h2_, w2_, C, half_shifts_.data(), cfg.align_tile / 2, moved);
                    if (rc)
                        return fail(rc, "queue_output: moving feature map " + std::to_string(feats[2 * j]) + " onto " +
                                            std::to_string(t) + " failed");
                    F[2 * j] = moved;
                }
            }
            const float *centre = fr->second.x.data();
            cpu::head_forward(pm_, F, centre, h2_, w2_, head_out_.data(), ws_);
            // the change in R'G'B' units, cropped to the frame
            const float *o = head_out_.data();
            const int H = spec_.height, W = spec_.width, w2 = w2_;
            float *d[3] = {plane(0), plane(1), plane(2)};
            rgb_of_ = -1;
            parallel_for(H, grain_for(H), [&](int64_t Y0, int64_t Y1) {
                for (int Y = (int)Y0; Y < (int)Y1; ++Y)
                    for (int c = 0; c < 3; ++c) {
                        float *dr = d[c] + (size_t)Y * W;
                        const size_t rowbase = (size_t)(Y / 2) * w2 * 12 + c * 4 + (Y & 1) * 2;
                        for (int X = 0; X < W; ++X) {
                            const size_t i = rowbase + (size_t)(X / 2) * 12 + (X & 1);
                            dr[X] = 0.5f * (o[i] - centre[i]);
                        }
                    }
            });
            cpu::NativeSamples out = take(free_outputs_);
            conv_.add_change(fr->second.native, fr->second.color, d, amount, spec_.blue_noise, &out);
            outputs_[t] = std::move(out);
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "queue_output: out of memory");
        }
        return 0;
    }

    int write_output(int64_t t, const DenoiseImage &out) override {
        auto it = outputs_.find(t);
        if (it == outputs_.end()) return fail(DENOISE_EINVAL, "write_output: output " + std::to_string(t) + " is not queued");
        conv_.write(it->second, out);
        give(free_outputs_, std::move(it->second));
        outputs_.erase(it);
        return 0;
    }

    int pipeline_depth() const override { return 0; }

    // Converted planes: the R'G'B' that push_frame(idx) left in rgb_ (recomputed if another call
    // has used rgb_ since). Native planes: the kept code values times 1 / (2^depth - 1).
    int noise_source(int64_t idx, const DenoiseImage &in, const NoisePlan &plan, NoiseSource **src) override {
        (void)in;
        auto fr = frames_.find(idx);
        if (fr == frames_.end()) return fail(DENOISE_EINVAL, "noise_source: frame " + std::to_string(idx) + " is not kept");
        try {
            NoisePlane pl[3];
            if (!plan.native) {
                if (rgb_of_ != idx) {
                    float *rgb[3] = {plane(0), plane(1), plane(2)};
                    conv_.to_rgb(fr->second.native, fr->second.color, rgb);
                    rgb_of_ = idx;
                }
                for (int j = 0; j < plan.planes; ++j) {
                    pl[j].data = plane(j);
                    pl[j].row_stride = spec_.width;
                }
            } else {
                const float scale = 1.0f / ((1u << spec_.format.comp[0].depth) - 1);
                for (int j = 0; j < plan.planes; ++j) {
                    const std::vector<uint16_t> &code = fr->second.native.code[j];
                    std::vector<float> &v = noise_planes_[j];
                    v.resize(code.size());
                    const uint16_t *c = code.data();
                    float *o = v.data();
                    parallel_for((int64_t)v.size(), grain_for((int64_t)v.size()), [&](int64_t a, int64_t b) {
                        for (int64_t k = a; k < b; ++k) o[k] = c[k] * scale;
                    });
                    pl[j].data = v.data();
                    pl[j].row_stride = plan.width[j];
                }
            }
            noise_src_.reset(new CpuNoiseSource(pl, plan.planes, plan.width, plan.height, 1.f, 0.f, plan.params));
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "noise_source: out of memory");
        }
        *src = noise_src_.get();
        return 0;
    }

    void evict(int64_t frame_lo, int64_t feat_lo) override {
        while (!frames_.empty() && frames_.begin()->first < frame_lo) {
            give(free_frames_, std::move(frames_.begin()->second));
            frames_.erase(frames_.begin());
        }
        while (!feats_.empty() && feats_.begin()->first < feat_lo) {
            give(free_feats_, std::move(feats_.begin()->second));
            feats_.erase(feats_.begin());
        }
    }

    void drop_frame(int64_t idx) override {
        auto it = frames_.find(idx);
        if (it == frames_.end()) return;
        give(free_frames_, std::move(it->second));
        frames_.erase(it);
        if (rgb_of_ == idx) rgb_of_ = -1;
    }

    void reset() override {
        evict(INT64_MAX, INT64_MAX);
        outputs_.clear();
        rgb_of_ = -1;
    }

    const std::string &error() const override { return err_; }

private:
    struct Frame {
        std::vector<float> x;  // (hp/2, wp/2, 12), network units
        cpu::NativeSamples native;
        FrameColor color;
    };
    struct Feature {
        std::vector<float> F;  // (hp/2, wp/2, c0)
        // align: the window's shift maps of taps r-1 then r+1 against its centre, each
        // (hp/align_tile, wp/align_tile, 2) int32 (dy, dx) in full-resolution pixels; empty without
        std::vector<int32_t> shifts;
    };

    // floor(s / 2), as align.py's torch.div(s, 2, rounding_mode="floor")
    static int32_t floor_half(int32_t s) { return (s - (s < 0)) / 2; }

    // Buffers of evicted entries, reused by the next ones (at most two of each kind are kept).
    template <class T> static T take(std::vector<T> &pool) {
        if (pool.empty()) return T();
        T v = std::move(pool.back());
        pool.pop_back();
        return v;
    }
    template <class T> static void give(std::vector<T> &pool, T &&v) {
        if (pool.size() < 2) pool.push_back(std::move(v));
    }

    float *plane(int c) { return rgb_.data() + (size_t)c * spec_.width * spec_.height; }

    int fail(int code, const std::string &msg) {
        err_ = "CPU backend: " + msg;
        return code;
    }

    StreamSpec spec_;
    cpu::CpuModel pm_;
    cpu::FrameConvert conv_;
    cpu::Workspace ws_;
    int h2_ = 0, w2_ = 0;
    std::vector<int> ry_, rx_;
    std::map<int64_t, Frame> frames_;
    std::map<int64_t, Feature> feats_;
    std::map<int64_t, cpu::NativeSamples> outputs_;
    std::vector<Frame> free_frames_;
    std::vector<Feature> free_feats_;
    std::vector<cpu::NativeSamples> free_outputs_;
    std::vector<float> fusion_in_, head_out_;
    // align only (empty without): the window's moved frames (2r x (hp/2, wp/2, 12)), the head's
    // moved F_{t-1} and F_{t+1}, block_match's workspace, one tap's shift map, a halved map
    size_t map_ints_ = 0;  // ints per shift map
    std::vector<float> moved_frames_, moved_feats_, match_work_;
    std::vector<int32_t> tap_shifts_, half_shifts_;
    std::vector<float> rgb_;  // 3 planes width x height: a frame's R'G'B' on push, the change on output
    int64_t rgb_of_ = -1;     // the frame whose R'G'B' rgb_ holds (-1: none, or the change)
    std::vector<float> noise_planes_[3];
    std::unique_ptr<CpuNoiseSource> noise_src_;
    std::string err_;
};

}  // namespace

std::unique_ptr<Backend> cpu_backend_new(const Model &m, const StreamSpec &spec, std::string *err, int *code) {
    // Process-wide: the engine's pool (common/parallel.h) and OpenBLAS's have no per-engine thread
    // counts; 0: the pool at the number of cores, OpenBLAS at its count at load (set back where a
    // GPU engine opened before set 1).
    if (spec.threads > 0) set_num_threads(spec.threads);
    blas_threads_for_cpu_engine(spec.threads);
    try {
        return std::unique_ptr<Backend>(new CpuBackend(m, spec));
    } catch (const std::bad_alloc &) {
        *err = "CPU backend: out of memory sizing buffers for " + std::to_string(spec.width) + "x" +
               std::to_string(spec.height);
        *code = DENOISE_ENOMEM;
        return nullptr;
    }
}

}  // namespace denoise
