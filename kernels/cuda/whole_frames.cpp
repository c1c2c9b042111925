// The CUDA backend's whole-frame plans (class in backend_cuda_impl.h): each kept frame's network input
// converted once at the push, F_s computed once per time index into the feature ring, an output
// from three of them; the graph policy of their launches.
//
// Launches (whole-frame plans): a frame's U-Net pass, and an output's head and frame_out, each
// run as one CUDA graph (frame_graph.h: captured, the previous frame's executable graph updated,
// launched), from the second call of each kind on (the first runs directly, so that the ops'
// one-time set-up, shared-memory attributes and cuBLASLt heuristics, happens outside a capture).
// DENOISE_CUDA_GRAPH=0 (read at creation) launches on the stream instead; so does an engine whose
// capture CUDA refused once (the reason is in CudaPlanInfo::launches). Tiles launch on the stream.
#include "backend_cuda_impl.h"
#include "tile_shift.h"

namespace denoise {
namespace cuda {

// enqueue()'s launches through graph g, or on the stream: the first call of each kind
// (*warm false), and every call once graphs are off. A capture CUDA refuses turns graphs off
// for this engine (graph_off_ says why) and the same work is queued on the stream.
int CudaBackend::launch(cuda::FrameGraph &g, bool *warm, const std::function<int()> &enqueue) {
    if (!graph_off_.empty() || !*warm) {
        const int rc = enqueue();
        if (!rc) *warm = true;
        return rc;
    }
    const int rc = g.run(ctx_, enqueue);
    if (!rc || !g.capture_failed()) return rc;
    graph_off_ = ctx_.err;
    return enqueue();
}

int CudaBackend::convert_whole(Slot *s) {
    if (!s->x) {
        for (;;) {
            int rc = cuda::dev_alloc(ctx_, (void **)&s->x, (size_t)h2_ * w2_ * 12 * 2, "a network input of the input ring");
            if (!rc) break;
            if (rc != DENOISE_ENOMEM) return rc;
            const size_t before = plan_i_;
            if ((rc = fall_back(rc))) return rc;
            if (plan_i_ == before) return DENOISE_ENOMEM;
            if (plan().tiled) return 0;  // fell back to tiles: no network input is kept
        }
    }
    TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width, spec_.height, 0, 0,
                       spec_.hp, spec_.wp, s->x));
    s->has_x = true;
    return read_done(s);
}

int CudaBackend::features_whole(int64_t s) {
    const Recipe &r = recipes_.at(s);
    std::vector<const bf16 *> win;
    for (int64_t f : r.frames) win.push_back(frames_.at(f)->x);
    bf16 *F = nullptr;
    if (!free_feats_.empty()) {
        F = free_feats_.back();
        free_feats_.pop_back();
    } else {
        for (;;) {
            int rc = cuda::dev_alloc(ctx_, (void **)&F, (size_t)feat_bytes(), "the feature ring");
            if (!rc) break;
            if (rc != DENOISE_ENOMEM) return rc;
            const size_t before = plan_i_;
            if ((rc = fall_back(rc))) return rc;
            if (plan_i_ == before) return DENOISE_ENOMEM;
            if (plan().tiled) return 0;  // tiles recompute F_s from its recipe
        }
    }
    int rc = 0;
    if (cfg_.align && r.frames.size() <= pyrs_.size()) {
        // the window's luma pyramids on the stream before the graph: inside it the matching finds
        // them all kept, so the graph's kernels are the same for every window (only new frames
        // are converted, 1 a window in a stream's steady state)
        std::vector<const float *> p(r.frames.size());
        rc = luma_pyramids(r.frames.data(), (int)r.frames.size(), p.data());
    }
    if (!rc) rc = launch(feat_graph_, &feat_warm_, [&] {
        std::vector<cuda::TileShift> sh(win.size());
        if (cfg_.align) TRY(align_window_whole(r.frames, sh.data(), const_cast<int32_t *>(feat_maps(F))));
        return net_.features(ctx_, win.data(), (int)win.size(), r.sigma, h2_, w2_, F, cfg_.align ? sh.data() : nullptr);
    });
    for (size_t k = 0; !rc && k < r.frames.size(); ++k) rc = read_done(frames_.at(r.frames[k]));
    if (rc) {
        free_feats_.push_back(F);
        return rc;
    }
    auto old = feats_.find(s);
    if (old != feats_.end()) free_feats_.push_back(old->second);
    feats_[s] = F;
    return 0;
}

int CudaBackend::output_whole(int64_t t, const int64_t feats[3], Amount amount, Out *o) {
    const bf16 *F[3];
    for (int k = 0; k < 3; ++k) {
        auto it = feats_.find(feats[k]);
        if (it == feats_.end())
            return fail(DENOISE_EINVAL, "queue_output: feature map " + std::to_string(feats[k]) + " is not on the GPU");
        F[k] = it->second;
    }
    Slot *s = frames_.at(t);
    TRY(launch(out_graph_, &out_warm_, [&] {
        const bf16 *Fh[3] = {F[0], F[1], F[2]};
        cuda::TileShift sh[3];
        if (cfg_.align) {
            const int32_t *m = feat_maps(F[1]);
            const int32_t *maps[2] = {m, m + map_ints_};
            TRY(align_features(F, maps, h2_, w2_, Fh, sh));
        }
        TRY(net_.head(ctx_, Fh, s->x, h2_, w2_, change_, true, sh));
        return cuda::frame_out(ctx_, change_, 0, 0, spec_.hp, spec_.wp, cuda::compact_frame(L_, s->nat),
                               cuda::compact_frame(L_, o->dev), spec_.format, s->color, spec_.width, spec_.height,
                               0, spec_.height, 0, spec_.width, amount, noise_);
    }));
    return read_done(s);
}

}  // namespace cuda
}  // namespace denoise
