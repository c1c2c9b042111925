// The CUDA backend's memory plans (class in backend_cuda_impl.h), chosen at creation, allocated
// on the first push (docs/cuda.md has the figures):
//  - whole frames: a native ring slot per kept frame with its network input converted once
//    (frame_in at push), a feature ring (F_s computed once, reused by three outputs), the change
//    of one output, the U-Net workspace with the token-wise phases in chunks of 2^18 (or 2^16)
//    level-0 tokens and the head in bands of rows;
//  - tiles: only native slots are kept; compute_features records which frames and sigma make F_s,
//    and queue_output runs, per tile of T x T pixels (origins on multiples of 64 px, so every
//    window grid and shifted window of the three U-Net levels aligns with the whole frame's), on
//    the tile grown by a halo of kHalo px: frame_in of the (up to 2R+1) frames, the three U-Nets,
//    the head, and frame_out of the tile's interior. T is the largest that fits the cap.
// The first plan that fits the cap is allocated; cudaErrorMemoryAllocation (or the cap) at any
// allocation, then or later, moves to the next smaller plan (whole -> tiles -> smaller tiles),
// keeping the frames already pushed; when none is left the call fails with DENOISE_ENOMEM and the
// allocator's message (buffer, size, bytes held, cap).
#include "backend_cuda_impl.h"

#include <algorithm>
#include <cstdio>

namespace denoise {
namespace cuda {

namespace {

std::string gib(int64_t b) {
    char t[32];
    std::snprintf(t, sizeof t, "%.2f GiB", b / 1073741824.0);
    return t;
}

}  // namespace

// Plans that fit the cap, largest first; "" or why none does.
std::string CudaBackend::make_plans() {
    const int64_t cap = spec_.gpu_memory;
    const int64_t Sn = L_.bytes, nslots = slot_count();
    const int64_t fixed = (int64_t)cuda::Net::weight_bytes_for(cfg_) + (int64_t)cuda::kLtWorkspaceBytes +
                          kNoiseBytes + kNoiseEstimateBytes + nslots * Sn + (kDepth + 1) * Sn;
    const int c0 = cfg_.channels[0];
    // the tensor-core head (the fused path's, where the device runs it) needs no G band: band 0
    tc_head_ = cuda::Net::fused_from_env() && cuda::head_conv3d_tc_supported(spec_.device, c0, nullptr) == 0;
    auto band = [&](int w) {
        return tc_head_ ? 0 : (int)std::max<int64_t>(1, kBandBytes / ((int64_t)w * 112 * 4) - 2);
    };
    // align: whole-frame luma pyramids, 2r + 1 (a window's 2r pairs in one launch) where the cap
    // allows, else 2 (a pair at a time): alignment_pass.cpp
    std::vector<int> pyr_counts = {0};
    if (cfg_.align && cfg_.fusion_radius) pyr_counts = {2 * cfg_.fusion_radius + 1, 2};
    int64_t need_min = INT64_MAX;
    if (!spec_.tile) {
        for (int P : pyr_counts)
            for (int64_t K : {(int64_t)1 << 18, (int64_t)1 << 16}) {
                Plan p;
                p.net = {h2_, w2_, K, band(w2_)};
                p.pyramids = P;
                const int64_t tok = (int64_t)h2_ * w2_;
                p.bytes = fixed + nslots * tok * 12 * 2 + 3 * tok * c0 * 2 + tok * 12 * 4 +
                          (int64_t)cuda::Net::workspace_bytes_for(cfg_, p.net);
                if (cfg_.align)  // 2 maps per feature ring buffer; pyramids, the two-pass head's moved maps, other taps' maps
                    p.bytes += 3 * 2 * map_bytes() + P * pyr_bytes() + align_scratch_bytes(tok) +
                               tap_maps() * map_bytes();
                need_min = std::min(need_min, p.bytes);
                if (p.bytes <= cap) plans_.push_back(p);
            }
    }
    // Tiles: square interiors, a multiple of 64 px. First the largest side that fits the cap,
    // shrunk to the smallest side with as few tiles (less work beyond the frame edges), then
    // halving sides as the fallbacks, down to 64 px.
    const int top = (std::max(spec_.hp, spec_.wp) + unit_ - 1) / unit_ * unit_;
    auto tiled = [&](int T, int P) {
        Plan p;
        p.tiled = true;
        p.tile = T;
        p.pyramids = P;
        p.dh = std::min(spec_.hp, T + 2 * halo_);
        p.dw = std::min(spec_.wp, T + 2 * halo_);
        p.tiles = ((spec_.height + T - 1) / T) * ((spec_.width + T - 1) / T);
        p.net = {p.dh / 2, p.dw / 2, (int64_t)1 << 16, band(p.dw / 2)};
        const int64_t tok = (int64_t)p.net.h * p.net.w;
        p.bytes = fixed + (2 * R_ + 1) * tok * 12 * 2 + 3 * tok * c0 * 2 + tok * 12 * 4 +
                  (int64_t)cuda::Net::workspace_bytes_for(cfg_, p.net);
        if (cfg_.align)  // whole-frame pyramids, the maps of kept recipes, the tile's scratch
            p.bytes += P * pyr_bytes() + kRecipeMaps * recipe_map_bytes() + align_scratch_bytes(tok);
        return p;
    };
    // the tile side as large as the least pyramids allow; then the most pyramids if they fit too
    const int pmin = pyr_counts.back();
    auto most_pyramids = [&](const Plan &p) {
        const Plan q = tiled(p.tile, pyr_counts.front());
        return q.bytes <= cap ? q : p;
    };
    const int U = unit_;
    int T = spec_.tile ? std::min(top, std::max(U, spec_.tile / U * U)) : top;
    for (; T > U && tiled(T, pmin).bytes > cap; T -= U) {
    }
    Plan best = tiled(T, pmin);
    need_min = std::min(need_min, tiled(U, pmin).bytes);
    if (best.bytes <= cap) {
        while (best.tile > U && tiled(best.tile - U, pmin).tiles == best.tiles) best = tiled(best.tile - U, pmin);
        plans_.push_back(most_pyramids(best));
        for (int t = best.tile / 2 / U * U; t >= U; t = t / 2 / U * U) {
            plans_.push_back(most_pyramids(tiled(t, pmin)));
            if (t == U) break;
        }
        if (plans_.back().tile != U) plans_.push_back(most_pyramids(tiled(U, pmin)));
    }
    if (plans_.empty())
        return "the GPU memory cap of " + gib(cap) + " is too small for " + std::to_string(spec_.width) + "x" +
               std::to_string(spec_.height) + ": the smallest plan (tiles of " + std::to_string(unit_) + " px) needs " + gib(need_min) +
               " (weights, " + std::to_string(nslots) + " native frames of " + std::to_string(Sn) +
               " bytes, the U-Net workspace of one tile)";
    return "";
}

bool CudaBackend::plan_info(CudaPlanInfo *i) const {
    if (plan_i_ >= plans_.size()) return false;
    const Plan &p = plans_[plan_i_];
    i->tiled = p.tiled;
    i->tile = p.tile;
    i->halo = p.tiled ? halo_ : 0;
    i->tiles = p.tiles;
    i->planned_bytes = p.bytes;
    i->chunk = p.net.chunk;
    i->text = (p.tiled ? "tiles of " + std::to_string(p.tile) + " px + " + std::to_string(halo_) + " px halo (" +
                             std::to_string(p.tiles) + " per frame)"
                       : std::string("whole frames")) +
              ", " + gib(p.bytes) + " planned of a " + gib(spec_.gpu_memory) + " cap, chunks of " +
              std::to_string(p.net.chunk) + " tokens" +
              (p.pyramids ? ", " + std::to_string(p.pyramids) + " luma pyramids (" +
                                (p.pyramids > 2 ? "a window's pairs matched in one launch)" : "one pair at a time)")
                          : std::string());
    i->align_pyramids = p.pyramids;
    i->swin = net_.uploaded() ? net_.swin_path() : "";
    i->graph_launches = feat_graph_.launches() + out_graph_.launches();
    i->graph_instantiations = feat_graph_.instantiations() + out_graph_.instantiations();
    i->noise_reads = nsrc_ ? nsrc_->reads() : NoiseReads();
    i->launches = p.tiled ? "stream launches (tiles)"
                  : graph_off_.empty() ? "a CUDA graph per U-Net pass and per output"
                                       : "stream launches: " + graph_off_;
    return true;
}

// Allocate plan i's buffers, or the next plan's when i's do not fit.
int CudaBackend::configure(size_t i) {
    std::string last;
    // a new plan: each graph's next call runs on the stream first again (new shapes may need
    // set-up outside a capture)
    feat_warm_ = out_warm_ = false;
    for (; i < plans_.size(); ++i) {
        release_plan();
        plan_i_ = i;
        int rc = alloc_plan(plans_[i]);
        if (!rc) return 0;
        if (rc != DENOISE_ENOMEM) return rc;
        last = ctx_.err;
    }
    release_plan();
    plan_i_ = plans_.size() - 1;
    return die(DENOISE_ENOMEM, "CUDA backend: out of GPU memory in every plan down to " +
                                   (plans_.back().tiled ? "tiles of " + std::to_string(plans_.back().tile) + " px"
                                                        : std::string("whole frames")) +
                                   ": " + last);
}

// After an allocation failed with ENOMEM once frames are in flight: the next tiled plan, or the
// failure. Not the next whole-frame plan (one with fewer luma pyramids): configure() releases the
// kept frames' network inputs and the feature maps, which only tiles recompute (from the native
// frames and the recipes); a whole-frame plan would find them gone.
int CudaBackend::fall_back(int rc) {
    if (rc != DENOISE_ENOMEM) return rc;
    size_t i = plan_i_ + 1;
    while (i < plans_.size() && !plans_[i].tiled) ++i;
    if (i >= plans_.size()) return rc;
    return configure(i);
}

void CudaBackend::release_plan() {
    net_.release(ctx_);
    for (auto &kv : feats_) cuda::dev_free(ctx_, kv.second);
    feats_.clear();
    for (bf16 *p : free_feats_) cuda::dev_free(ctx_, p);
    free_feats_.clear();
    for (auto &s : slots_) {
        cuda::dev_free(ctx_, s->x);
        s->x = nullptr;
        s->has_x = false;
    }
    cuda::dev_free(ctx_, moved_F_);
    cuda::dev_free(ctx_, tap_maps_);
    moved_F_ = nullptr;
    tap_maps_ = nullptr;
    for (LumaPyramid &q : pyrs_) cuda::dev_free(ctx_, q.p);
    pyrs_.clear();
    for (bf16 *p : tile_x_) cuda::dev_free(ctx_, p);
    tile_x_.clear();
    for (bf16 *&p : tile_F_) {
        cuda::dev_free(ctx_, p);
        p = nullptr;
    }
    cuda::dev_free(ctx_, change_);
    change_ = nullptr;
}

int CudaBackend::alloc_plan(const Plan &p) {
    TRY(net_.resize(ctx_, p.net));
    const int64_t tok = (int64_t)p.net.h * p.net.w;
    TRY(cuda::dev_alloc(ctx_, (void **)&change_, (size_t)tok * 12 * 4, "the change of one output"));
    if (cfg_.align) {
        // the fusion conv reads the window's frames through their shift maps, the tensor-core head
        // F_{t-1} and F_{t+1} likewise; the two-pass head reads moved copies
        const int c0 = cfg_.channels[0];
        if (!net_.head_fused())
            TRY(cuda::dev_alloc(ctx_, (void **)&moved_F_, (size_t)2 * tok * c0 * 2, "the head's moved feature maps"));
        for (int k = 0; k < p.pyramids; ++k) {
            pyrs_.emplace_back();  // held from here: release_plan frees it
            TRY(cuda::dev_alloc(ctx_, (void **)&pyrs_.back().p, (size_t)pyr_bytes(), "a whole-frame luma pyramid"));
        }
        if (!p.tiled && tap_maps())
            TRY(cuda::dev_alloc(ctx_, (void **)&tap_maps_, (size_t)tap_maps() * map_bytes(),
                                "the other taps' shift maps"));
    }
    if (p.tiled) {
        for (int k = 0; k < 2 * R_ + 1; ++k) {
            bf16 *b = nullptr;
            TRY(cuda::dev_alloc(ctx_, (void **)&b, (size_t)tok * 12 * 2, "a tile's network input"));
            tile_x_.push_back(b);
        }
        for (bf16 *&f : tile_F_)
            TRY(cuda::dev_alloc(ctx_, (void **)&f, (size_t)tok * cfg_.channels[0] * 2, "a tile's feature map"));
        return 0;
    }
    for (int k = 0; k < 3; ++k) {
        bf16 *f = nullptr;
        TRY(cuda::dev_alloc(ctx_, (void **)&f, (size_t)feat_bytes(), "the feature ring"));
        free_feats_.push_back(f);
    }
    // frames already kept (a fallback never returns to whole frames, so only at start)
    for (auto &kv : frames_) TRY(convert_whole(kv.second));
    return 0;
}

}  // namespace cuda
}  // namespace denoise
