// libdenoise: the C API of denoise.h, and the frame window / segment logic, once for every
// backend (backend.h: CPU in kernels/cpu/backend_cpu.cpp, CUDA in kernels/cuda/).
//
// Time indexing within a segment: frames are 0..N-1 in push order. Output t needs the features
// F_{t-1}, F_t, F_{t+1}; F_s is the U-Net of frames reflect(s-r..s+r) (model.py's
// denoise_sequence, r = the fusion radius). N is only known at flush, but reflect(i, N) = |i| for
// every |i| <= N-1, so once frame t+R has been pushed (R = r + 1, the temporal radius) every index
// output t touches resolves the same whatever N turns out to be, and output t can be computed
// before the flush. Features are cached by s, so each U-Net pass runs once per output frame (plus
// two at each segment end, for F_{-1} and F_N).
//
// Schedule: output t is queued (backend queue_output) as soon as its inputs exist and it is at
// most pipeline_depth() ahead of the oldest output not yet pulled; a pull writes the oldest
// output (write_output). Kept: frames from min(next output to queue - R, oldest not pulled) on
// (what the next outputs read, mirrored ends included) and features from next-to-queue - 1 on.
//
// sigma: with a fixed sigma, F_s uses the sigma in force when frame s was pushed. With
// DENOISE_SIGMA_AUTO, each push adds the frame to the segment's noise estimate (sigma_auto.h) and
// records the estimate after it; F_s uses the estimate recorded at frame min(s + r, N - 1), the
// last frame of its window, so the value depends only on the frames, never on how pushes and
// pulls interleave or on the backend's pipelining. Output t reports the sigma of F_t.
// Where the backend's estimator is asynchronous (CUDA), push k only starts frame k's estimate and
// push k + 1 (or the flush) reads it, when the estimator's work is done in practice: frame k is
// "settled" from then on, and F_s waits for the frames of its window to settle. The same values
// come out either way; the deferral costs one frame of latency (denoise_latency()).
// DENOISE_SIGMA_AUTO_DEFER=0 or 1 in the environment (read at denoise_open) overrides the
// backend's choice, for the checks that compare the two orders (tests/unit/sigma_auto_test.cpp,
// tests/gpu/noise_check.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "backend.h"
#include "common/blue_noise.h"
#include "denoise.h"
#include "frame_scan.h"
#include "model.h"
#include "sigma_auto.h"

using namespace denoise;

namespace {

int reflect_index(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;  // Python's modulo
    return (int)(i >= n ? p - i : i);
}

const char *backend_str(DenoiseBackend b) {
    switch (b) {
    case DENOISE_BACKEND_CPU: return "cpu";
    case DENOISE_BACKEND_CUDA: return "cuda";
    default: return "auto";
    }
}

// Empty when `f` is a layout the engine reads, else why not.
std::string check_format(const DenoisePixelFormat &f) {
    if (f.nb_components != 1 && f.nb_components != 3)
        return "nb_components " + std::to_string(f.nb_components) + " (expected 1 or 3)";
    if (f.is_float ? f.bytes != 4 : f.bytes != 1 && f.bytes != 2)
        return "bytes " + std::to_string(f.bytes) + (f.is_float ? " for a float format (expected 4)" : " (expected 1 or 2)");
    if (f.log2_chroma_w < 0 || f.log2_chroma_w > 2 || f.log2_chroma_h < 0 || f.log2_chroma_h > 2)
        return "chroma subsampling log2 " + std::to_string(f.log2_chroma_w) + "x" + std::to_string(f.log2_chroma_h) +
               " outside 0..2";
    if (f.is_float && (f.log2_chroma_w || f.log2_chroma_h)) return "subsampled float format";
    for (int c = 0; c < f.nb_components; ++c) {
        const DenoiseComponent &k = f.comp[c];
        const std::string n = "component " + std::to_string(c) + ": ";
        if (k.plane < 0 || k.plane > 3) return n + "plane " + std::to_string(k.plane) + " outside 0..3";
        if (k.offset < 0 || k.step < f.bytes)
            return n + "offset " + std::to_string(k.offset) + " / step " + std::to_string(k.step) + " (step < bytes)";
        if (f.is_float ? k.depth != 32 || k.shift : k.depth < 8 || k.depth > 16)
            return n + "depth " + std::to_string(k.depth) + (f.is_float ? " (float32: 32, no shift)" : " outside 8..16");
        if (!f.is_float && (k.shift < 0 || k.shift + k.depth > 8 * f.bytes))
            return n + "shift " + std::to_string(k.shift) + " + depth " + std::to_string(k.depth) + " exceeds a " +
                   std::to_string(8 * f.bytes) + "-bit word";
        if (k.depth != f.comp[0].depth) return n + "depth differs from component 0's";
    }
    return "";
}

}  // namespace

struct DenoiseEngine {
    std::string error, reason;
    bool opened = false;
    DenoiseBackend backend = DENOISE_BACKEND_CPU;

    Model model;                    // before `be`: the backend points into it
    std::unique_ptr<Backend> be;
    StreamSpec spec;
    float sigma = 0.f;              // DENOISE_SIGMA_AUTO or a fixed value
    SigmaAuto sigma_auto;
    float out_sigma = -1.f;         // sigma of the last pulled output (-1: none yet)
    float last_estimate = 0.f;      // the stream's last estimate: auto's value while a segment has none
    Amount amount;                  // the DenoiseAmount in force, folded: amount * luma, amount * chroma
    int R = 0, r = 0, depth = 0;
    bool defer = false;             // sigma=auto: frame k's estimate is read at push k + 1 or the flush

    // Current segment.
    int64_t pushed = 0, pulled = 0, queued = 0;
    int64_t estimating = -1;  // sigma=auto: the frame whose estimate is begun and not yet read (-1: none)
    bool flushed = false;
    struct Kept {
        float sigma;    // the sigma in force when the frame was pushed (auto: the estimate after it,
                        // from the time the frame is settled)
        bool est;       // pushed under sigma=auto
        Amount amount;  // the amounts in force when the frame was pushed (its output uses them)
    };
    std::map<int64_t, Kept> frames;    // kept frames
    std::set<int64_t> feats;           // computed feature maps
    std::map<int64_t, float> feat_sigma, out_sigmas;  // sigma of each kept F_s / queued output

    std::unique_ptr<SceneScore> scene;  // denoise_scene_cut's block means, made on its first call

    int fail(int code, const std::string &msg) {
        error = msg;
        return code;
    }
    int be_fail(int code) { return fail(code, be->error()); }
    void reset_segment() {
        pushed = pulled = queued = 0;
        estimating = -1;
        flushed = false;
        frames.clear();
        feats.clear();
        feat_sigma.clear();
        out_sigmas.clear();
        sigma_auto.reset();
        be->reset();
    }
    // Frames whose sigma is known: all pushed but the one still being estimated.
    int64_t settled() const { return pushed - (estimating >= 0 ? 1 : 0); }
    // sigma=auto: read the estimate of frame `estimating` (SigmaAuto::end) into its Kept entry.
    // 0 or the estimator's error; the frame then stays unread, and the next call retries it.
    int settle() {
        if (estimating < 0) return 0;
        int rc;
        try {
            rc = sigma_auto.end();
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "out of memory reading a frame's sigma estimate");
        }
        if (rc) return be_fail(rc);
        frames.at(estimating).sigma = last_estimate = sigma_auto.sigma(last_estimate);
        estimating = -1;
        return 0;
    }
    // Take frame idx, which the backend has just kept (push_frame): settle the frame before it,
    // record the one pushed under the sigma and amounts in force, and with sigma=auto begin its
    // estimate (read here unless `defer`). On failure nothing of frame idx is taken (the caller
    // drops it from the backend again); the earlier frame may have been settled.
    int take(int64_t idx, const DenoiseImage &in, const FrameColor &fc) {
        int rc = settle();
        if (rc) return rc;
        const bool est = sigma == DENOISE_SIGMA_AUTO;
        try {
            frames.emplace(idx, Kept{sigma, est, amount});
            if (est) {
                const NoisePlan plan = noise_plan(spec, fc);
                NoiseSource *src = nullptr;
                rc = be->noise_source(idx, in, plan, &src);
                if (!rc) rc = sigma_auto.begin(*src, plan);
                if (rc) rc = be_fail(rc);
            }
        } catch (const std::bad_alloc &) {
            rc = fail(DENOISE_ENOMEM, "denoise_push: out of memory estimating sigma");
        }
        if (!rc && est) {
            estimating = idx;
            if (!defer) rc = settle();
        }
        if (rc) {
            sigma_auto.cancel();
            frames.erase(idx);
            estimating = -1;
        }
        return rc;
    }
    // Frame index i of the segment, mirrored; only called when the result cannot depend on N.
    int64_t resolve(int64_t i) const {
        if (flushed) return reflect_index(i, pushed);
        return i < 0 ? -i : i;
    }
    void evict() {
        const int64_t frame_lo = std::min(queued - R, pulled), feat_lo = queued - 1;
        frames.erase(frames.begin(), frames.lower_bound(frame_lo));
        feats.erase(feats.begin(), feats.lower_bound(feat_lo));
        feat_sigma.erase(feat_sigma.begin(), feat_sigma.lower_bound(feat_lo));
        be->evict(frame_lo, feat_lo);
    }
    // Queue every output whose inputs exist, up to `depth` ahead of the oldest not pulled.
    int schedule() {
        while (queued < pushed && queued <= pulled + depth && (flushed || settled() >= queued + R + 1)) {
            const int64_t t = queued;
            for (int64_t s = t - 1; s <= t + 1; ++s) {
                if (feats.count(s)) continue;
                std::vector<int64_t> idx;
                for (int64_t k = s - r; k <= s + r; ++k) {
                    const int64_t i = resolve(k);
                    if (!frames.count(i))
                        return fail(DENOISE_EINVAL, "internal: frame " + std::to_string(i) + " evicted too early");
                    idx.push_back(i);
                }
                // auto: the estimate after the window's last frame, or after its latest frame
                // still in auto mode (sigma fixed by a command since: that frame and later ones
                // carry the fixed value, which must not reach the auto frames before it)
                const int64_t c = resolve(s);
                const Kept &k = frames.at(c);
                float sg = k.sigma;
                if (k.est) {
                    int64_t j = std::max(c, std::min(s + r, pushed - 1));
                    while (j > c && !(frames.count(j) && frames.at(j).est)) --j;
                    sg = frames.at(j).sigma;
                }
                int rc = be->compute_features(s, idx.data(), (int)idx.size(), sg);
                if (rc) return be_fail(rc);
                feats.insert(s);
                feat_sigma[s] = sg;
            }
            const int64_t fk[3] = {t - 1, t, t + 1};
            // a sigma gate (model v2) scales output t's change by min(1, sigma of F_t / gate)
            Amount a = frames.at(t).amount;
            if (model.cfg.sigma_gate > 0) {
                const float g = (float)std::min(1.0, feat_sigma.at(t) / model.cfg.sigma_gate);
                a.luma *= g;
                a.chroma *= g;
            }
            int rc = be->queue_output(t, fk, a);
            if (rc) return be_fail(rc);
            out_sigmas[t] = feat_sigma.at(t);
            queued++;
            evict();
        }
        return 0;
    }
    // Checks shared by push and pull: planes present, rows long enough, memory's sign rules.
    int check_image(const char *fn, const DenoiseImage *im) {
        if (!im) return fail(DENOISE_EINVAL, std::string(fn) + ": image is NULL");
        const DenoisePixelFormat &f = spec.format;
        for (int c = 0; c < f.nb_components; ++c) {
            const DenoiseComponent &k = f.comp[c];
            const int w = c ? spec.cw : spec.width;
            const int64_t row = (int64_t)k.offset + (int64_t)(w - 1) * k.step + f.bytes;
            const ptrdiff_t ls = im->linesize[k.plane];
            if (!im->data[k.plane])
                return fail(DENOISE_EINVAL, std::string(fn) + ": plane " + std::to_string(k.plane) + " is NULL");
            if ((ls < 0 ? -(int64_t)ls : (int64_t)ls) < row)
                return fail(DENOISE_EINVAL, std::string(fn) + ": linesize " + std::to_string(ls) + " of plane " +
                                                std::to_string(k.plane) + " < the " + std::to_string(row) +
                                                " bytes a row of component " + std::to_string(c) + " spans");
            if (ls < 0 && spec.memory == DENOISE_MEMORY_CUDA)
                return fail(DENOISE_EINVAL, std::string(fn) + ": negative linesize with memory CUDA");
        }
        return 0;
    }
    // 0 when in's colour is one the engine decodes (denoise.h DenoiseColor), else why not.
    int check_color(const char *fn, const DenoiseImage *in) {
        const enum pl_color_system sys = in->color.repr.sys;
        const DenoisePixelFormat &f = spec.format;
        if (!f.is_float && sys != PL_COLOR_SYSTEM_RGB &&
            (!pl_color_system_is_ycbcr_like(sys) || !pl_color_system_is_linear(sys)))
            return fail(DENOISE_EINVAL, std::string(fn) + ": colour system " + std::to_string((int)sys) +
                                            " is neither R'G'B' nor a Y'CbCr matrix (pl_color_system_is_linear)");
        if (sys == PL_COLOR_SYSTEM_RGB && (f.log2_chroma_w || f.log2_chroma_h))
            return fail(DENOISE_EINVAL, std::string(fn) + ": R'G'B' with subsampled components");
        return 0;
    }
    // 0 when the engine is open for host frames and `in` is a frame it reads.
    int check_host_image(const char *fn, const DenoiseImage *in) {
        if (!opened) return fail(DENOISE_EINVAL, std::string(fn) + ": engine not open");
        if (spec.memory != DENOISE_MEMORY_HOST) return fail(DENOISE_EINVAL, std::string(fn) + ": frames in CUDA memory");
        return check_image(fn, in);
    }
};

extern "C" {

void denoise_params_defaults(DenoiseParams *p) {
    if (!p) return;
    *p = DenoiseParams();
    p->backend = DENOISE_BACKEND_AUTO;
    p->device = 0;
    p->sigma = 15.0f;
    p->memory = DENOISE_MEMORY_HOST;
    p->cuda_stream = nullptr;
    p->threads = 0;
    p->gpu_memory = 0;
    p->tile = 0;
}

DenoiseEngine *denoise_alloc(void) { return new (std::nothrow) DenoiseEngine(); }

int denoise_open(DenoiseEngine *e, const DenoiseParams *p) {
    if (!e) return DENOISE_EINVAL;
    if (e->opened) return e->fail(DENOISE_EINVAL, "denoise_open: engine is already open");
    if (!p) return e->fail(DENOISE_EINVAL, "denoise_open: params is NULL");
    if (!p->model_path || !*p->model_path) return e->fail(DENOISE_EINVAL, "denoise_open: model_path is empty");
    if (p->width < 1 || p->height < 1 || p->width > 32768 || p->height > 32768)
        return e->fail(DENOISE_EINVAL, "denoise_open: frame size " + std::to_string(p->width) + "x" +
                                           std::to_string(p->height) + " outside 1..32768");
    if (!(p->sigma >= 0.f && p->sigma <= 255.f) && p->sigma != DENOISE_SIGMA_AUTO)
        return e->fail(DENOISE_EINVAL, "denoise_open: sigma " + std::to_string(p->sigma) +
                                           " outside [0, 255] (and not DENOISE_SIGMA_AUTO, -1)");
    if (p->threads < 0) return e->fail(DENOISE_EINVAL, "denoise_open: threads < 0");
    if (p->device < 0) return e->fail(DENOISE_EINVAL, "denoise_open: device < 0");
    if (p->gpu_memory < 0 || p->tile < 0) return e->fail(DENOISE_EINVAL, "denoise_open: gpu_memory or tile < 0");
    if (p->memory != DENOISE_MEMORY_HOST && p->memory != DENOISE_MEMORY_CUDA)
        return e->fail(DENOISE_EINVAL, "denoise_open: unknown memory " + std::to_string((int)p->memory));
    const std::string bad = check_format(p->format);
    if (!bad.empty()) return e->fail(DENOISE_EINVAL, "denoise_open: pixel format: " + bad);
    if (p->backend != DENOISE_BACKEND_AUTO && p->backend != DENOISE_BACKEND_CPU && p->backend != DENOISE_BACKEND_CUDA)
        return e->fail(DENOISE_EINVAL, "denoise_open: unknown backend " + std::to_string((int)p->backend));

    // Backend: CUDA where built in and the probe passes (AUTO, CUDA), else the CPU with the reason.
    bool use_cuda = false;
    std::string why;
#ifdef DENOISE_HAVE_CUDA
    if (p->backend != DENOISE_BACKEND_CPU) {
        use_cuda = cuda_probe(p->device, &why) == 0;
        if (!use_cuda && p->backend == DENOISE_BACKEND_CUDA) return e->fail(DENOISE_ENOSYS, "backend cuda: " + why);
    } else {
        why = "backend cpu requested";
    }
#else
    why = p->backend == DENOISE_BACKEND_CPU ? "backend cpu requested" : "built without CUDA";
    if (p->backend == DENOISE_BACKEND_CUDA)
        return e->fail(DENOISE_ENOSYS, "backend cuda: this libdenoise was built without CUDA "
                                       "(the CUDA engine needs ./configure --enable-cuda-engine and nvcc)");
#endif
    if (p->memory == DENOISE_MEMORY_CUDA && !use_cuda)
        return e->fail(DENOISE_ENOSYS, std::string("denoise_open: frames in CUDA memory need the CUDA backend, which "
                                                   "does not run here (backend ") +
                                           backend_str(p->backend) + ": " + why + ")");

    std::string err;
    try {
        if (!load_model(p->model_path, &e->model, &err)) return e->fail(DENOISE_EMODEL, err);
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_open: out of memory loading " + base_name(p->model_path));
    }
    const ModelConfig &cfg = e->model.cfg;
    const int m = cfg.pad_multiple;
    StreamSpec &s = e->spec;
    s.width = p->width;
    s.height = p->height;
    s.hp = (p->height + m - 1) / m * m;
    s.wp = (p->width + m - 1) / m * m;
    const bool sub = p->format.nb_components == 3;
    s.cw = sub ? -((-p->width) >> p->format.log2_chroma_w) : p->width;
    s.ch = sub ? -((-p->height) >> p->format.log2_chroma_h) : p->height;
    s.format = p->format;
    s.memory = p->memory;
    s.cuda_stream = p->cuda_stream;
    s.device = p->device;
    s.threads = p->threads;
    s.gpu_memory = p->gpu_memory ? p->gpu_memory : DENOISE_GPU_MEMORY_DEFAULT;
    s.tile = p->tile;
    try {
        s.blue_noise = blue_noise_tile();
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_open: out of memory");
    }

    int code = DENOISE_ENOMEM;
#ifdef DENOISE_HAVE_CUDA
    if (use_cuda) e->be = cuda_backend_new(e->model, s, &err, &code);
    else
#endif
        e->be = cpu_backend_new(e->model, s, &err, &code);
    if (!e->be) return e->fail(code, err);

    e->R = cfg.temporal_radius();
    e->r = cfg.fusion_radius;
    e->depth = e->be->pipeline_depth();
    const char *defer = std::getenv("DENOISE_SIGMA_AUTO_DEFER");
    e->defer = defer && (!std::strcmp(defer, "0") || !std::strcmp(defer, "1")) ? *defer == '1'
                                                                               : e->be->async_noise_source();
    e->sigma = p->sigma;
    e->backend = use_cuda ? DENOISE_BACKEND_CUDA : DENOISE_BACKEND_CPU;
    e->reason = why;
    e->opened = true;
    e->error.clear();
    return 0;
}

DenoiseBackend denoise_backend(const DenoiseEngine *e) { return e ? e->backend : DENOISE_BACKEND_CPU; }

const char *denoise_backend_reason(const DenoiseEngine *e) { return e && e->opened ? e->reason.c_str() : ""; }

int denoise_latency(const DenoiseEngine *e) {
    if (!e || !e->opened) return DENOISE_EINVAL;
    return e->R + e->depth + (e->defer && e->sigma == DENOISE_SIGMA_AUTO ? 1 : 0);
}

int denoise_set_sigma(DenoiseEngine *e, float sigma) {
    if (!e) return DENOISE_EINVAL;
    if (!(sigma >= 0.f && sigma <= 255.f) && sigma != DENOISE_SIGMA_AUTO)
        return e->fail(DENOISE_EINVAL, "denoise_set_sigma: sigma " + std::to_string(sigma) +
                                           " outside [0, 255] (and not DENOISE_SIGMA_AUTO, -1)");
    e->sigma = sigma;
    return 0;
}

int denoise_output_sigma(const DenoiseEngine *e, float *sigma) {
    if (!e || !sigma || e->out_sigma < 0) return DENOISE_EINVAL;
    *sigma = e->out_sigma;
    return 0;
}

int denoise_set_amount(DenoiseEngine *e, const DenoiseAmount *a) {
    if (!e) return DENOISE_EINVAL;
    const DenoiseAmount def = {DENOISE_AMOUNT_DEFAULTS};
    if (!a) a = &def;
    auto unit = [](float v) { return v >= 0.f && v <= 1.f; };
    if (!unit(a->amount) || !unit(a->luma) || !unit(a->chroma))
        return e->fail(DENOISE_EINVAL, "denoise_set_amount: amount " + std::to_string(a->amount) + ", luma " +
                                           std::to_string(a->luma) + ", chroma " + std::to_string(a->chroma) +
                                           ": each must be in [0, 1]");
    // The backends scale the luma and chroma parts of the change (backend.h Amount): the blend
    // folds into both.
    e->amount.luma = a->amount * a->luma;
    e->amount.chroma = a->amount * a->chroma;
    return 0;
}

int denoise_model_sigma_range(const DenoiseEngine *e, float *lo, float *hi) {
    if (!e || !e->opened) return DENOISE_EINVAL;
    if (lo) *lo = e->model.sigma_lo;
    if (hi) *hi = e->model.sigma_hi;
    return e->model.sigma_range_from_file ? 1 : 0;
}

int denoise_push(DenoiseEngine *e, const DenoiseImage *in) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_push: engine not open");
    int rc = e->check_image("denoise_push", in);
    if (rc) return rc;
    if ((rc = e->check_color("denoise_push", in))) return rc;
    const DenoisePixelFormat &f = e->spec.format;
    if (e->flushed) {
        if (e->pulled < e->pushed)
            return e->fail(DENOISE_EINVAL, "denoise_push: the flushed segment still has " +
                                               std::to_string(e->pushed - e->pulled) + " frames to pull");
        e->reset_segment();
    }
    const FrameColor fc = frame_color(f, in->color);
    try {
        const int64_t idx = e->pushed;
        rc = e->be->push_frame(idx, *in, fc);
        if (rc) return e->be_fail(rc);
        // the backend keeps the frame already: a failure to take it drops it again, so that the
        // failed push takes nothing
        if ((rc = e->take(idx, *in, fc))) {
            e->be->drop_frame(idx);
            return rc;
        }
        e->pushed++;
        return e->schedule();
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_push: out of memory");
    }
}

int denoise_scene_cut(DenoiseEngine *e, const DenoiseImage *in, float threshold, double *score) {
    if (!e || !score) return DENOISE_EINVAL;
    int rc = e->check_host_image("denoise_scene_cut", in);
    if (!rc) rc = e->check_color("denoise_scene_cut", in);
    if (rc) return rc;
    try {
        if (!e->scene) e->scene.reset(new SceneScore(e->spec.format, e->spec.width, e->spec.height));
        const FrameColor fc = frame_color(e->spec.format, in->color);
        return e->scene->score(*in, fc.dec[0][0], threshold, score);
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_scene_cut: out of memory");
    }
}

int denoise_scene_reset(DenoiseEngine *e) {
    if (!e) return DENOISE_EINVAL;
    if (e->scene) e->scene->reset();
    return 0;
}

int64_t denoise_count_nonfinite(DenoiseEngine *e, const DenoiseImage *in) {
    if (!e) return DENOISE_EINVAL;
    const int rc = e->check_host_image("denoise_count_nonfinite", in);
    if (rc) return rc;
    return count_nonfinite(e->spec.format, e->spec.width, e->spec.height, *in);
}

int denoise_flush(DenoiseEngine *e) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_flush: engine not open");
    // the segment's last windows need its last frame's estimate (a failure leaves the segment
    // open: the flush can be retried)
    int rc = e->settle();
    if (rc) return rc;
    e->flushed = true;
    try {
        return e->schedule();
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_flush: out of memory");
    }
}

int denoise_pull(DenoiseEngine *e, const DenoiseImage *out) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_pull: engine not open");
    int rc = e->check_image("denoise_pull", out);
    if (rc) return rc;
    const int64_t t = e->pulled;
    if (t == e->pushed) return e->flushed ? DENOISE_EOF : DENOISE_EAGAIN;
    if (!e->flushed && e->settled() < t + e->R + e->depth + 1) return DENOISE_EAGAIN;
    try {
        if ((rc = e->schedule())) return rc;
        if (e->queued <= t) return e->fail(DENOISE_EINVAL, "internal: output " + std::to_string(t) + " not queued");
        if ((rc = e->be->write_output(t, *out))) return e->be_fail(rc);
        e->out_sigma = e->out_sigmas.at(t);
        e->out_sigmas.erase(t);
        e->pulled++;
        e->evict();
        // Queue what the pull made room for. The frame is written: a failure here is reported by
        // the next push, pull or flush, whose schedule() retries it.
        e->schedule();
        return 0;
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_pull: out of memory");
    }
}

int denoise_pending(const DenoiseEngine *e) { return e ? (int)(e->pushed - e->pulled) : 0; }

int64_t denoise_gpu_memory_peak(const DenoiseEngine *e) { return e && e->be ? e->be->gpu_memory_peak() : 0; }

const char *denoise_last_error(const DenoiseEngine *e) { return e ? e->error.c_str() : "no engine"; }

const char *denoise_model_config(const DenoiseEngine *e) { return e && e->opened ? e->model.config_json.c_str() : ""; }

void denoise_free(DenoiseEngine **pe) {
    if (!pe) return;
    delete *pe;
    *pe = nullptr;
}

}  // extern "C"

const Backend *denoise::engine_backend(const DenoiseEngine *e) { return e && e->opened ? e->be.get() : nullptr; }
