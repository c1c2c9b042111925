// libdenoise: the C API of denoise.h on the CPU engine, and the frame window / segment logic.
//
// Time indexing within a segment: frames are 0..N-1 in push order. Output t needs the features
// F_{t-1}, F_t, F_{t+1}; F_s is the U-Net of frames reflect(s-2..s+2) (model.py's
// denoise_sequence). N is only known at flush, but reflect(i, N) = |i| for every |i| <= N-1, so
// once frame t+3 has been pushed every index output t touches resolves the same whatever N turns
// out to be, and output t can be computed before the flush. Features are cached by s, so each
// U-Net pass runs once per output frame (plus two at each segment end, for F_{-1} and F_N).
//
// Memory: input frames are kept (converted once: x = 2v-1, reflect-padded, space-to-depth to
// (Hp/2, Wp/2, 12)) from index pulled-3 on, i.e. the 7-frame window plus whatever the caller has
// pushed and not yet pulled; features from index pulled-1 on (3 maps); one U-Net workspace.
#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/unet.h"
#include "denoise.h"
#include "gpu_backend.h"
#include "model_config.h"
#include "safetensors.h"

using namespace denoise;

namespace {

int reflect_index(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;  // Python's modulo
    return (int)(i >= n ? p - i : i);
}

struct Frame {
    std::vector<float> x;  // (Hp/2, Wp/2, 12) network units
    float sigma;
};

}  // namespace

struct DenoiseEngine {
    std::string error;
    std::string config_json;
    bool opened = false;
    DenoiseBackend backend = DENOISE_BACKEND_CPU;

    ModelConfig cfg;
    StFile file;
    cpu::UNetWeights W;
    cpu::Workspace ws;

    int width = 0, height = 0, hp = 0, wp = 0, h2 = 0, w2 = 0;
    std::vector<int> ry, rx;  // padded row/col -> source row/col
    float sigma = 0.f;

    // Current segment.
    int64_t pushed = 0, pulled = 0;
    bool flushed = false;
    std::map<int64_t, Frame> frames;
    std::map<int64_t, std::vector<float>> feats;
    std::vector<float> fusion_in, out;
    // CUDA backend (DENOISE_HAVE_CUDA builds): it keeps the frames' and features' data on the
    // device; `frames` (sigma only, x empty) and `feats` (empty vectors) still carry the
    // bookkeeping, so the window and segment logic below is the same for both backends.
    std::unique_ptr<GpuBackend> gpu;

    int fail(int code, const std::string &msg) {
        error = msg;
        return code;
    }
    void reset_segment() {
        pushed = pulled = 0;
        flushed = false;
        frames.clear();
        feats.clear();
        if (gpu) gpu->reset();
    }
    // Frame index i of the segment, mirrored; only called when the result cannot depend on N.
    int64_t resolve(int64_t i) const {
        if (flushed) return reflect_index(i, pushed);
        return i < 0 ? -i : i;
    }
};

extern "C" {

DenoiseEngine *denoise_alloc(void) { return new (std::nothrow) DenoiseEngine(); }

static int open_cpu(DenoiseEngine *e, const DenoiseParams *p) {
    const std::string file = base_name(p->model_path);
    std::string err;
    if (!load_safetensors(p->model_path, &e->file, &err)) return e->fail(DENOISE_EMODEL, err);
    const auto &md = e->file.metadata;
    auto meta = [&](const char *k) -> const std::string * {
        auto it = md.find(k);
        return it == md.end() ? nullptr : &it->second;
    };
    const std::string *fmt = meta("format"), *ver = meta("version"), *cj = meta("config");
    if (!fmt) return e->fail(DENOISE_EMODEL, file + ": __metadata__ has no 'format' (expected \"denoise-swin\")");
    if (*fmt != "denoise-swin")
        return e->fail(DENOISE_EMODEL, file + ": __metadata__ 'format' is \"" + *fmt + "\", expected \"denoise-swin\"");
    if (!ver) return e->fail(DENOISE_EMODEL, file + ": __metadata__ has no 'version' (expected \"1\")");
    if (*ver != "1")
        return e->fail(DENOISE_EMODEL, file + ": __metadata__ 'version' is \"" + *ver + "\", this engine runs version \"1\"");
    if (!cj) return e->fail(DENOISE_EMODEL, file + ": __metadata__ has no 'config'");
    if (!parse_model_config(*cj, &e->cfg, &err)) return e->fail(DENOISE_EMODEL, file + ": __metadata__ " + err);
    if (!cpu::bind_weights(e->file, e->cfg, &e->W, &err)) return e->fail(DENOISE_EMODEL, err);
    e->config_json = *cj;
    return 0;
}

int denoise_open(DenoiseEngine *e, const DenoiseParams *p) {
    if (!e) return DENOISE_EINVAL;
    if (e->opened) return e->fail(DENOISE_EINVAL, "denoise_open: engine is already open");
    if (!p) return e->fail(DENOISE_EINVAL, "denoise_open: params is NULL");
    if (!p->model_path || !*p->model_path) return e->fail(DENOISE_EINVAL, "denoise_open: model_path is empty");
    if (p->width < 1 || p->height < 1 || p->width > 32768 || p->height > 32768)
        return e->fail(DENOISE_EINVAL, "denoise_open: frame size " + std::to_string(p->width) + "x" +
                                           std::to_string(p->height) + " outside 1..32768");
    if (!(p->sigma >= 0.f && p->sigma <= 255.f))
        return e->fail(DENOISE_EINVAL, "denoise_open: sigma " + std::to_string(p->sigma) + " outside [0, 255]");
    if (p->threads < 0) return e->fail(DENOISE_EINVAL, "denoise_open: threads < 0");
    bool use_cuda = false;
    switch (p->backend) {
    case DENOISE_BACKEND_CUDA: {
#ifdef DENOISE_HAVE_CUDA
        std::string why;
        if (cuda_probe(p->device, &why)) return e->fail(DENOISE_ENOSYS, "backend cuda: " + why);
        use_cuda = true;
        break;
#else
        return e->fail(DENOISE_ENOSYS, "backend cuda: this libdenoise was built without CUDA "
                                       "(the CUDA engine needs ./configure --enable-cuda-engine)");
#endif
    }
    case DENOISE_BACKEND_AUTO: {
#ifdef DENOISE_HAVE_CUDA
        // CUDA only with a device of compute capability >= 8.0, else the CPU engine.
        std::string why;
        use_cuda = cuda_probe(p->device, &why) == 0;
#endif
        break;
    }
    case DENOISE_BACKEND_CPU:
        break;
    default:
        return e->fail(DENOISE_EINVAL, "denoise_open: unknown backend " + std::to_string((int)p->backend));
    }
    try {
        int rc = open_cpu(e, p);
        if (rc) return rc;
        // Process-wide: the engine's pool (cpu/parallel.h) and OpenBLAS's have no per-engine
        // thread counts; 0 leaves both at the number of cores.
        if (p->threads > 0) {
            cpu::set_num_threads(p->threads);
            openblas_set_num_threads(p->threads);
        }
        const int m = e->cfg.pad_multiple;
        e->width = p->width;
        e->height = p->height;
        e->hp = (p->height + m - 1) / m * m;
        e->wp = (p->width + m - 1) / m * m;
        e->h2 = e->hp / 2;
        e->w2 = e->wp / 2;
        e->ry.resize(e->hp);
        e->rx.resize(e->wp);
        for (int i = 0; i < e->hp; ++i) e->ry[i] = reflect_index(i, p->height);
        for (int i = 0; i < e->wp; ++i) e->rx[i] = reflect_index(i, p->width);
#ifdef DENOISE_HAVE_CUDA
        if (use_cuda) e->gpu = cuda_backend_new(e->W, p->device, e->width, e->height, e->hp, e->wp);
#else
        (void)use_cuda;
#endif
        if (!e->gpu) {
            e->ws.resize(e->cfg, e->h2, e->w2);
            e->fusion_in.assign((size_t)e->h2 * e->w2 * e->cfg.fusion_in_channels(), 0.f);
            e->out.assign((size_t)e->h2 * e->w2 * e->cfg.head_out_channels(), 0.f);
        }
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_open: out of memory sizing buffers for " + std::to_string(p->width) +
                                           "x" + std::to_string(p->height));
    }
    e->sigma = p->sigma;
    e->backend = e->gpu ? DENOISE_BACKEND_CUDA : DENOISE_BACKEND_CPU;
    e->opened = true;
    e->error.clear();
    return 0;
}

DenoiseBackend denoise_backend(const DenoiseEngine *e) { return e ? e->backend : DENOISE_BACKEND_CPU; }

int denoise_set_sigma(DenoiseEngine *e, float sigma) {
    if (!e) return DENOISE_EINVAL;
    if (!(sigma >= 0.f && sigma <= 255.f))
        return e->fail(DENOISE_EINVAL, "denoise_set_sigma: sigma " + std::to_string(sigma) + " outside [0, 255]");
    e->sigma = sigma;
    return 0;
}

int denoise_push(DenoiseEngine *e, const float *const planes[3], ptrdiff_t linesize) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_push: engine not open");
    if (!planes || !planes[0] || !planes[1] || !planes[2]) return e->fail(DENOISE_EINVAL, "denoise_push: NULL plane");
    if (linesize < e->width) return e->fail(DENOISE_EINVAL, "denoise_push: linesize < width");
    if (e->flushed) {
        if (e->pulled < e->pushed)
            return e->fail(DENOISE_EINVAL, "denoise_push: the flushed segment still has " +
                                               std::to_string(e->pushed - e->pulled) + " frames to pull");
        e->reset_segment();
    }
    if (e->gpu) {  // converted on the device; the host entry only carries the frame's sigma
        int rc = e->gpu->push_frame(e->pushed, planes, linesize);
        if (rc) return e->fail(rc, e->gpu->error());
        try {
            e->frames.emplace(e->pushed, Frame{{}, e->sigma});
        } catch (const std::bad_alloc &) {
            return e->fail(DENOISE_ENOMEM, "denoise_push: out of memory");
        }
        e->pushed++;
        return 0;
    }
    try {
        Frame f;
        f.sigma = e->sigma;
        f.x.resize((size_t)e->h2 * e->w2 * 12);
        const int h2 = e->h2, w2 = e->w2;
        const int *ry = e->ry.data(), *rx = e->rx.data();
        float *x = f.x.data();
        cpu::parallel_for(h2, cpu::grain_for(h2), [&](int64_t y0_, int64_t y1_) {
        for (int y = (int)y0_; y < (int)y1_; ++y)
            for (int xx = 0; xx < w2; ++xx) {
                float *o = x + ((size_t)y * w2 + xx) * 12;
                for (int c = 0; c < 3; ++c)
                    for (int dy = 0; dy < 2; ++dy) {
                        const float *row = planes[c] + (ptrdiff_t)ry[2 * y + dy] * linesize;
                        for (int dx = 0; dx < 2; ++dx) o[c * 4 + dy * 2 + dx] = 2.0f * row[rx[2 * xx + dx]] - 1.0f;
                    }
            }
        });
        e->frames.emplace(e->pushed, std::move(f));
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_push: out of memory");
    }
    e->pushed++;
    return 0;
}

int denoise_flush(DenoiseEngine *e) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_flush: engine not open");
    e->flushed = true;
    return 0;
}

int denoise_pull(DenoiseEngine *e, float *const delta[3], ptrdiff_t linesize) {
    if (!e) return DENOISE_EINVAL;
    if (!e->opened) return e->fail(DENOISE_EINVAL, "denoise_pull: engine not open");
    if (!delta || !delta[0] || !delta[1] || !delta[2]) return e->fail(DENOISE_EINVAL, "denoise_pull: NULL plane");
    if (linesize < e->width) return e->fail(DENOISE_EINVAL, "denoise_pull: linesize < width");
    const int64_t t = e->pulled;
    if (t == e->pushed) return e->flushed ? DENOISE_EOF : DENOISE_EAGAIN;
    const int R = e->cfg.temporal_radius(), r = e->cfg.fusion_radius;
    if (!e->flushed && e->pushed < t + R + 1) return DENOISE_EAGAIN;

    const int h2 = e->h2, w2 = e->w2, c0 = e->cfg.channels[0];
    try {
        for (int64_t s = t - 1; s <= t + 1; ++s) {
            if (e->feats.count(s)) continue;
            if (e->gpu) {
                std::vector<int64_t> idx;
                for (int64_t k = s - r; k <= s + r; ++k) {
                    if (!e->frames.count(e->resolve(k)))
                        return e->fail(DENOISE_EINVAL, "internal: frame " + std::to_string(e->resolve(k)) + " evicted too early");
                    idx.push_back(e->resolve(k));
                }
                int rc = e->gpu->compute_features(s, idx.data(), (int)idx.size(), e->frames.at(e->resolve(s)).sigma);
                if (rc) return e->fail(rc, e->gpu->error());
                e->feats.emplace(s, std::vector<float>());
                continue;
            }
            std::vector<const float *> win;
            for (int64_t k = s - r; k <= s + r; ++k) {
                auto it = e->frames.find(e->resolve(k));
                if (it == e->frames.end())
                    return e->fail(DENOISE_EINVAL, "internal: frame " + std::to_string(e->resolve(k)) + " evicted too early");
                win.push_back(it->second.x.data());
            }
            const float sig = e->frames.at(e->resolve(s)).sigma;
            cpu::build_fusion_input(win.data(), (int)win.size(), h2, w2, sig, e->fusion_in.data());
            std::vector<float> F((size_t)h2 * w2 * c0);
            cpu::unet_forward(e->W, e->fusion_in.data(), h2, w2, F.data(), e->ws);
            e->feats.emplace(s, std::move(F));
        }
    } catch (const std::bad_alloc &) {
        return e->fail(DENOISE_ENOMEM, "denoise_pull: out of memory");
    }
    if (e->gpu) {
        const int64_t fk[3] = {t - 1, t, t + 1};
        int rc = e->gpu->head(t, fk, delta, linesize);
        if (rc) return e->fail(rc, e->gpu->error());
    } else {
        const float *F[3] = {e->feats.at(t - 1).data(), e->feats.at(t).data(), e->feats.at(t + 1).data()};
        const float *centre = e->frames.at(t).x.data();
        cpu::head_forward(e->W, F, centre, h2, w2, e->out.data(), e->ws);

        const float *o = e->out.data();
        const int H = e->height, Wd = e->width;
        cpu::parallel_for(H, cpu::grain_for(H), [&](int64_t Y0_, int64_t Y1_) {
        for (int Y = (int)Y0_; Y < (int)Y1_; ++Y)
            for (int c = 0; c < 3; ++c) {
                float *d = delta[c] + (ptrdiff_t)Y * linesize;
                const size_t rowbase = (size_t)(Y / 2) * w2 * 12 + c * 4 + (Y & 1) * 2;
                for (int X = 0; X < Wd; ++X) {
                    const size_t i = rowbase + (size_t)(X / 2) * 12 + (X & 1);
                    d[X] = 0.5f * (o[i] - centre[i]);
                }
            }
        });
    }

    e->pulled++;
    // Output t+1 needs F_t.. and frames from t+1-R on (mirrors included, see the top comment).
    e->feats.erase(e->feats.begin(), e->feats.lower_bound(e->pulled - 1));
    e->frames.erase(e->frames.begin(), e->frames.lower_bound(e->pulled - R));
    if (e->gpu) e->gpu->evict(e->pulled - R, e->pulled - 1);
    return 0;
}

int denoise_pending(const DenoiseEngine *e) { return e ? (int)(e->pushed - e->pulled) : 0; }

const char *denoise_last_error(const DenoiseEngine *e) { return e ? e->error.c_str() : "no engine"; }

const char *denoise_model_config(const DenoiseEngine *e) { return e ? e->config_json.c_str() : ""; }

void denoise_free(DenoiseEngine **pe) {
    if (!pe) return;
    delete *pe;
    *pe = nullptr;
}

}  // extern "C"
