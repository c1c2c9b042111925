// The CUDA backend's class (cuda_backend_new, backend_cuda.cu): its state, and its members
// grouped by the file that defines them, one job each:
//   backend_cuda.cu     the Backend calls (push, features, output, pull, sigma=auto's source,
//                       eviction), the lazy start and the unrecoverable state
//   memory_plan.cpp     the plans that fit the GPU memory cap, their buffers, the fallback
//   staging.cpp         the native input ring, the output staging slots, the pinned buffers, and
//                       the copy streams and events between them and the caller
//   whole_frames.cpp    whole-frame plans: the network input at the push, the U-Net pass and the
//                       output, launched as CUDA graphs (the graph policy)
//   tiled_frames.cpp    tiled plans: an output computed tile by tile
//   alignment_pass.cpp  model option align: luma pyramids, shift maps, the consumers' TileShifts
// (device_probe.cpp has cuda_probe(), which needs no backend.)
// Host-only header (g++-includable with -I$CUDA_HOME/include), private to these files.
#ifndef DENOISE_CUDA_BACKEND_CUDA_IMPL_H
#define DENOISE_CUDA_BACKEND_CUDA_IMPL_H

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../backend.h"
#include "../common/noise_estimate.h"
#include "../sigma_auto.h"
#include "backend_cuda.h"
#include "frame_graph.h"
#include "frame_layout.h"
#include "network.h"
#include "noise_estimate.h"
#include "ops.h"

namespace denoise {
namespace cuda {

// Outputs queued ahead of the oldest not yet written (staging.cpp says why 1).
constexpr int kDepth = 1;
constexpr int kHalo = 64;                        // px per side; measured: docs/cuda.md "Tiles"
constexpr int kTileUnit = 64;                    // px: tile origins and sides (window grids align)
constexpr int64_t kBandBytes = (int64_t)32 << 20;  // head G band
constexpr int64_t kNoiseBytes = (int64_t)kBlueNoiseSize * kBlueNoiseSize * 4;
// sigma=auto's device memory at most (cuda/noise_estimate.h): per plane a float2 per grid patch
// (max_patches) and the sums; counted in every plan whether or not the estimator runs.
constexpr int64_t kNoiseEstimateBytes = 3 * (int64_t)NoiseEstimateParams().max_patches * 8 + 65536;
// Events the host waits on: it sleeps instead of spinning a core while a frame computes.
constexpr unsigned kHostWaitEvent = cudaEventBlockingSync | cudaEventDisableTiming;

struct Plan {
    bool tiled = false;
    int tile = 0;         // interior side (px)
    int dh = 0, dw = 0;   // largest domain (px)
    int tiles = 1;
    int pyramids = 0;     // align: whole-frame luma pyramids (2r + 1: a window's pairs in one
                          // launch; 2: one pair at a time)
    NetShape net;
    int64_t bytes = 0;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(const Model &m, const StreamSpec &spec);
    ~CudaBackend() override;

    int push_frame(int64_t idx, const DenoiseImage &in, const FrameColor &color) override;
    int compute_features(int64_t s, const int64_t *frames, int n, float sigma) override;
    int queue_output(int64_t t, const int64_t feats[3], Amount amount) override;
    int write_output(int64_t t, const DenoiseImage &out) override;
    int noise_source(int64_t idx, const DenoiseImage &in, const NoisePlan &plan, NoiseSource **src) override;
    bool async_noise_source() const override { return true; }
    void drop_frame(int64_t idx) override;
    void evict(int64_t frame_lo, int64_t feat_lo) override;
    void reset() override;

    const std::string &error() const override { return ctx_.err; }
    int pipeline_depth() const override { return kDepth; }
    int64_t gpu_memory_peak() const override { return ctx_.peak; }

    // memory_plan.cpp: the plans that fit the cap, largest first ("" or why none does); the
    // plan in use for CudaPlanInfo
    std::string make_plans();
    bool plan_info(CudaPlanInfo *i) const;

private:
    struct Slot {
        uint8_t *nat = nullptr;  // compact native copy (L_)
        bf16 *x = nullptr;       // network input of the padded frame (whole-frame plans)
        bool has_x = false;
        FrameColor color;
        cudaEvent_t ready = nullptr;     // upload done (copy stream)
        cudaEvent_t released = nullptr;  // the compute stream's last read done
    };
    struct Out {
        uint8_t *dev = nullptr;     // compact output frame
        uint8_t *pinned = nullptr;  // memory HOST: its download
        cudaEvent_t ready = nullptr;       // written (compute stream)
        cudaEvent_t downloaded = nullptr;  // its last copy out done (output copy stream)
    };
    struct Pin {
        uint8_t *host = nullptr;
        cudaEvent_t done = nullptr;  // the upload from it finished
    };
    struct Recipe {
        std::vector<int64_t> frames;
        float sigma;
        int32_t *maps = nullptr;  // tiles with align: 2r shift maps (recipe_maps), else null
    };

    const Plan &plan() const { return plans_[plan_i_]; }
    // Native slots every plan counts: at a push the engine keeps 2R + 1 frames (engine.cpp: from
    // min(next output - R, oldest not pulled) on, one output in flight) when the caller pulls
    // each output as soon as it can (more when it lags), and take_slot() keeps one spare.
    int64_t slot_count() const { return 2 * R_ + 2 + kDepth; }

    int fail(int code, const std::string &msg) { return cuda::fail(ctx_, code, "CUDA backend: " + msg); }
    int ck(cudaError_t e, const char *what) { return cuda::cuda_check(ctx_, e, what); }

    // backend_cuda.cu
    int enter();
    int die(int rc, const std::string &msg);
    int start();

    // memory_plan.cpp
    int configure(size_t i);
    int fall_back(int rc);
    void release_plan();
    int alloc_plan(const Plan &p);

    // staging.cpp
    int new_out(Out **po);
    int take_out(Out **po);
    int take_slot(Slot **ps);
    int upload(const DenoiseImage &in, Slot *s);
    int copy_in(const DenoiseImage &in, Slot *s);
    int copy_out(Out *o, const DenoiseImage &out);
    // s->released marks the compute stream's last read of the slot (read_done() after each kernel
    // that reads it), not the whole stream at release: the next copy into the slot then waits only
    // for that read, not for the network work of the frames queued since.
    // A luma pyramid of the slot's frame (alignment_pass.cpp) is forgotten with it.
    void release_slot(Slot *s) {
        for (LumaPyramid &q : pyrs_)
            if (q.src == s) q = LumaPyramid{q.p, nullptr, -1, 0};
        free_slots_.push_back(s);
    }
    int read_done(Slot *s);

    // whole_frames.cpp
    int launch(FrameGraph &g, bool *warm, const std::function<int()> &enqueue);
    int convert_whole(Slot *s);
    int features_whole(int64_t s);
    int output_whole(int64_t t, const int64_t feats[3], Amount amount, Out *o);

    // tiled_frames.cpp
    int output_tiled(int64_t t, const int64_t feats[3], Amount amount, Out *o);

    // alignment_pass.cpp; the sizes memory_plan.cpp counts too. Model option align. Bytes of: one shift map (whole frame); a luma pyramid of the padded frame;
    // a recipe's 2r maps (tiles); the scratch of a domain of tok tokens (the head's two moved
    // feature maps, only for the two-pass head: the fusion conv and the tensor-core head read
    // through the maps); a feature ring buffer (F, then with align the maps of its window's taps
    // r-1 and r+1). Whole frames: the maps of the other taps (2r - 2 scratch maps).
    int64_t map_bytes() const { return (int64_t)map_ints_ * 4; }
    int64_t pyr_bytes() const { return (int64_t)luma_pyramid_floats(spec_.hp, spec_.wp) * 4; }
    int64_t recipe_map_bytes() const { return 2 * cfg_.fusion_radius * map_bytes(); }
    int64_t align_scratch_bytes(int64_t tok) const { return tc_head_ ? 0 : 2 * tok * cfg_.channels[0] * 2; }
    int tap_maps() const { return cfg_.fusion_radius > 1 ? 2 * cfg_.fusion_radius - 2 : 0; }
    int64_t feat_bytes() const {
        return (int64_t)h2_ * w2_ * cfg_.channels[0] * 2 + (cfg_.align ? 2 * map_bytes() : 0);
    }
    const int32_t *feat_maps(const bf16 *F) const {
        return reinterpret_cast<const int32_t *>(F + (size_t)h2_ * w2_ * cfg_.channels[0]);
    }
    int luma_of(int64_t f, float *pyr);
    int luma_pyramids(const int64_t *frames, int n, const float **out);
    int window_maps(const std::vector<int64_t> &frames, int32_t *const *maps);
    int align_window_whole(const std::vector<int64_t> &frames, cuda::TileShift *sh, int32_t *maps);
    int recipe_maps(Recipe &r);
    void drop_recipes(std::map<int64_t, Recipe>::iterator a, std::map<int64_t, Recipe>::iterator b);
    int align_features(const bf16 *const F[3], const int32_t *const maps[2], int h, int w, const bf16 *Fh[3],
                       cuda::TileShift *sh);

    const Model &m_;
    const ModelConfig cfg_;
    const StreamSpec spec_;
    const bool host_;
    FrameLayout L_;
    int h2_ = 0, w2_ = 0, R_ = 0;
    int unit_ = kTileUnit, halo_ = kHalo;  // tiles: origin / side unit and halo (px)
    // align: tiles per row of a shift map, ints per map; scratch (plan-sized): the head's moved
    // F_{t-1} and F_{t+1} (two-pass head only), the other taps' maps (whole frames);
    // plan().pyramids whole-frame luma pyramids, each of a kept frame's slot and index (src, frame)
    // or empty (src null, used 0), kept while the frame is, least recently used (pyr_clock_) first to go; free
    // recipe map sets (tiles)
    struct LumaPyramid {
        float *p = nullptr;
        const Slot *src = nullptr;
        int64_t frame = -1;  // the frame index it was converted from: a slot refilled by a path that
                             // bypassed release_slot cannot hand out another frame's pyramid
        uint64_t used = 0;
    };
    int map_tw_ = 0;
    size_t map_ints_ = 0;
    static constexpr int kRecipeMaps = 4;
    bf16 *moved_F_ = nullptr;
    bool tc_head_ = false;  // the plans count the tensor-core head (make_plans): no moved feature maps
    int32_t *tap_maps_ = nullptr;
    std::vector<LumaPyramid> pyrs_;
    uint64_t pyr_clock_ = 0;
    std::vector<int32_t *> free_maps_;

    Ctx ctx_;
    Net net_;
    bool ctx_created_ = false, started_ = false;
    int dead_rc_ = 0;
    std::string dead_msg_;
    std::vector<Plan> plans_;
    size_t plan_i_ = 0;

    cudaStream_t up_ = nullptr;      // input copy stream (upload, or memory CUDA's device copy)
    cudaStream_t down_ = nullptr;    // output copy stream (download, or memory CUDA's device copy)
    Pin pins_[2];
    int pin_next_ = 0;
    cudaEvent_t caller_ev_ = nullptr;  // memory CUDA: the caller's stream at a push or pull
    float *noise_ = nullptr;
    cudaStream_t est_ = nullptr;     // sigma=auto's stream (highest priority), made on first use
    // the estimator's reads of a kept frame are done before its slot is released (drop_frame,
    // reset: the host waits for est_, which a settled estimate has emptied already)
    void estimator_idle() {
        if (est_) cudaStreamSynchronize(est_);
    }
    std::unique_ptr<CudaNoiseSource> nsrc_;

    std::vector<std::unique_ptr<Slot>> slots_;
    std::map<int64_t, Slot *> frames_;
    std::deque<Slot *> free_slots_;  // oldest release first
    std::map<int64_t, bf16 *> feats_;
    std::vector<bf16 *> free_feats_;
    std::map<int64_t, Recipe> recipes_;
    std::vector<std::unique_ptr<Out>> outs_;
    std::vector<Out *> free_outs_;
    std::map<int64_t, Out *> pending_;

    FrameGraph feat_graph_, out_graph_;  // whole frames: the U-Net pass; head + frame_out
    bool feat_warm_ = false, out_warm_ = false;  // each has run once on the stream
    std::string graph_off_;                    // why the launches go on the stream ("": graphs)

    float *change_ = nullptr;
    std::vector<bf16 *> tile_x_;
    bf16 *tile_F_[3] = {nullptr, nullptr, nullptr};
};

}  // namespace cuda
}  // namespace denoise

#endif
