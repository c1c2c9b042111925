// The CUDA backend (backend.h): native frames in, native frames out, the pixel work and the
// network on the GPU, every device byte counted against StreamSpec.gpu_memory.
//
// Streams and copies. One compute stream (ctx.stream) runs every kernel in call order, so buffers
// that go back to a pool are reused safely by later work on it.
// Every output is converted on the compute stream into an output staging slot (o->ready marks
// that), and leaves it on an output copy stream; the compute stream waits for that copy
// (o->downloaded) before it writes the slot again. pipeline_depth() = 1 with either memory: the
// engine queues output t+1 before it writes t, so what write_output(t) waits for (or makes the
// caller's stream wait for) is the work queued one push earlier, while output t+1's network
// keeps the GPU busy.
//  - memory HOST: push copies the frame's colour rows into one of two pinned staging buffers (the
//    host waits only for the upload from two pushes ago), uploads them on an upload stream into
//    the frame's native ring slot (after the compute stream's last read of that slot, an event),
//    and the compute stream waits for the upload. queue_output downloads the output on the
//    output copy stream into its pinned buffer; write_output waits (sleeping, not spinning) for
//    that download only, then copies the colour samples into the caller's frame: uploads,
//    compute and downloads of two frames overlap. Only native bytes cross the bus (1.5 B per
//    pixel each way for yuv420p).
//  - memory CUDA: the caller's context is used as it is (no cudaSetDevice); push orders a
//    device-to-device copy of the frame's rows on the input copy stream, after the work queued on
//    the caller's stream (an event) and the slot's last read, and makes the compute stream and the
//    caller's stream wait for the copy only; write_output copies output t on the output copy
//    stream (staging slot -> caller's planes: cudaMemcpy2DAsync, or a bit-masked copy kernel for
//    planes that also hold alpha / padding / p010's low bits), after the caller's stream's work
//    queued before the pull and output t's own work (o->ready), and makes the caller's stream
//    wait for that copy only. No host synchronisation, except sigma=auto's (noise_source: the
//    host waits for the estimator's kernels, which follow the input copy, which follows the
//    caller's stream, which waits for output t-1 at most: the network of output t, queued at the
//    push before, runs meanwhile). With pipeline depth 0 the caller's stream would wait for the
//    network queued at the latest push, and the host's estimate behind it for the whole queue:
//    the GPU would drain once per frame while the host waits.
// Memory plans (chosen at creation, allocated on the first push; docs/cuda.md has the figures):
//  - whole frames: a native ring slot per kept frame with its network input converted once
//    (frame_in at push), a feature ring (F_s computed once, reused by three outputs), the change
//    of one output, the U-Net workspace with the token-wise phases in chunks of 2^18 (or 2^16)
//    level-0 tokens and the head in bands of rows;
//  - tiles: only native slots are kept; compute_features records which frames and sigma make F_s,
//    and queue_output runs, per tile of T x T pixels (origins on multiples of 64 px, so every
//    window grid and shifted window of the three U-Net levels aligns with the whole frame's), on
//    the tile grown by a halo of kHalo px: frame_in of the (up to 2R+1) frames, the three U-Nets,
//    the head, and frame_out of the tile's interior. T is the largest that fits the cap.
// Model option align (weights/denoise_train/align.py; the CPU backend's compute_features / queue_output):
//  - whole frames: a U-Net pass (its graph) first writes the centre's luma and box means (frame_in
//    with a luma plane only, luma_pyramid) into one whole-frame pyramid, then per other frame of
//    the window the same into a second one, matches it against the centre (block_match) and moves
//    it onto it (shift_tiles_s2d) into scratch frames that the fusion conv reads; the maps of taps
//    r-1 and r+1 stay with F_s in its feature ring buffer (after F); an output moves F_{t-1} and
//    F_{t+1} by window t's maps halved with floor on tiles of align_tile / 2 (shift_tiles) into two
//    scratch maps that the head reads. (Luma per pair from the native frame, not kept per slot:
//    2 pyramids instead of 2R + 3, 290 MiB less at 3840x2160, for 2r + 1 small conversions.)
//  - tiles: before an output's tiles, each of its windows gets its maps on the whole frame the same
//    way, kept with its recipe; each tile moves its domain's frames and feature maps through the
//    maps' part over the domain (reads clamped to the domain). The halo grows by the alignment's
//    reach, to 64 px + R rounded up to the tile unit (tile origins are multiples of 64 px and of
//    align_tile): docs/cuda.md "Model v2's alignment".
// Launches (whole-frame plans): a frame's U-Net pass, and an output's head and frame_out, each
// run as one CUDA graph (frame_graph.h: captured, the previous frame's executable graph updated,
// launched), from the second call of each kind on (the first runs directly, so that the ops'
// one-time set-up, shared-memory attributes and cuBLASLt heuristics, happens outside a capture).
// DENOISE_CUDA_GRAPH=0 (read at creation) launches on the stream instead; so does an engine whose
// capture CUDA refused once (the reason is in CudaPlanInfo::launches). Tiles launch on the stream.
// The first plan that fits the cap is allocated; cudaErrorMemoryAllocation (or the cap) at any
// allocation, then or later, moves to the next smaller plan (whole -> tiles -> smaller tiles),
// keeping the frames already pushed; when none is left the call fails with DENOISE_ENOMEM and the
// allocator's message (buffer, size, bytes held, cap). Every other CUDA or cuBLASLt error is
// DENOISE_EDEVICE with the runtime's error name and string.
#include "../denoise.h"
#include "backend_cuda.h"
#include "common.cuh"
#include "frame_graph.h"
#include "frame_layout.h"
#include "network.h"
#include "noise_estimate.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <vector>

namespace denoise {

int cuda_probe(int device, std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        // the runtime says "driver version is insufficient" also when there is no driver at all
        if (e == cudaErrorInsufficientDriver) {
            void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
            if (!libcuda) {
                const char *d = dlerror();
                *why = std::string("no NVIDIA driver: libcuda.so.1 not found (") + (d ? d : "dlopen failed") + ")";
                return DENOISE_ENOSYS;
            }
            dlclose(libcuda);
        }
        *why = std::string(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ? "no CUDA driver or device: "
                                                                                         : "CUDA unavailable: ") +
               "cudaGetDeviceCount: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
        return DENOISE_ENOSYS;
    }
    if (n <= 0) {
        *why = "no CUDA device";
        return DENOISE_ENOSYS;
    }
    if (device < 0 || device >= n) {
        *why = "device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " CUDA devices)";
        return DENOISE_ENOSYS;
    }
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = std::string("cudaGetDeviceProperties: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
        return DENOISE_ENOSYS;
    }
    const std::string cc = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    if (prop.major < 8) {
        *why = "device " + std::to_string(device) + " (" + prop.name + ") has compute capability " + cc +
               "; the CUDA engine needs 8.0 or newer (bf16 tensor cores)";
        return DENOISE_ENOSYS;
    }
    *why = "CUDA device " + std::to_string(device) + ": " + prop.name + ", compute capability " + cc;
    return 0;
}

namespace {

using cuda::bf16;
using cuda::DevFrame;
using cuda::FrameLayout;


// Outputs queued ahead of the oldest not yet written (see the note at the top).
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

std::string gib(int64_t b) {
    char t[32];
    std::snprintf(t, sizeof t, "%.2f GiB", b / 1073741824.0);
    return t;
}

struct Plan {
    bool tiled = false;
    int tile = 0;         // interior side (px)
    int dh = 0, dw = 0;   // largest domain (px)
    int tiles = 1;
    cuda::NetShape net;
    int64_t bytes = 0;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(const Model &m, const StreamSpec &spec)
        : m_(m), cfg_(m.cfg), spec_(spec), host_(spec.memory == DENOISE_MEMORY_HOST) {
        L_ = cuda::frame_layout(spec.format, spec.width, spec.height);
        h2_ = spec.hp / 2;
        w2_ = spec.wp / 2;
        R_ = cfg_.temporal_radius();
        if (cfg_.align) {
            const int T = cfg_.align_tile;
            int a = kTileUnit, b = T;
            while (b) {
                const int t = a % b;
                a = b;
                b = t;
            }
            unit_ = kTileUnit / a * T;  // lcm(64, align_tile)
            halo_ = (kHalo + cfg_.align + unit_ - 1) / unit_ * unit_;
            map_tw_ = spec.wp / T;
            map_ints_ = (size_t)(spec.hp / T) * map_tw_ * 2;
        }
        const char *g = std::getenv("DENOISE_CUDA_GRAPH");
        if (g && !std::strcmp(g, "0")) graph_off_ = "DENOISE_CUDA_GRAPH=0";
    }

    ~CudaBackend() override {
        if (!ctx_created_) return;
        if (host_) cudaSetDevice(spec_.device);
        if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
        if (up_) cudaStreamSynchronize(up_);
        if (down_) cudaStreamSynchronize(down_);
        for (auto &s : slots_) {
            if (s->ready) cudaEventDestroy(s->ready);
            if (s->released) cudaEventDestroy(s->released);
        }
        for (auto &o : outs_) {
            if (o->pinned) cudaFreeHost(o->pinned);
            if (o->ready) cudaEventDestroy(o->ready);
            if (o->downloaded) cudaEventDestroy(o->downloaded);
        }
        for (auto &p : pins_) {
            if (p.host) cudaFreeHost(p.host);
            if (p.done) cudaEventDestroy(p.done);
        }
        if (caller_ev_) cudaEventDestroy(caller_ev_);
        if (est_) cudaStreamSynchronize(est_);
        nsrc_.reset();  // its device blocks go back through ctx_
        if (est_) cudaStreamDestroy(est_);
        if (up_) cudaStreamDestroy(up_);
        if (down_) cudaStreamDestroy(down_);
        cuda::ctx_destroy(ctx_);  // frees every device block still held
    }

    // Plans that fit the cap, largest first; "" or why none does.
    std::string make_plans() {
        const int64_t cap = spec_.gpu_memory;
        const int64_t Sn = L_.bytes, nslots = slot_count();
        const int64_t fixed = (int64_t)cuda::Net::weight_bytes_for(cfg_) + (int64_t)cuda::kLtWorkspaceBytes +
                              kNoiseBytes + kNoiseEstimateBytes + nslots * Sn + (kDepth + 1) * Sn;
        const int c0 = cfg_.channels[0];
        // the tensor-core head (the fused path's, where the device runs it) needs no G band: band 0
        const bool tc_head = cuda::Net::fused_from_env() && cuda::head_conv3d_tc_supported(spec_.device, nullptr) == 0;
        auto band = [&](int w) {
            return tc_head ? 0 : (int)std::max<int64_t>(1, kBandBytes / ((int64_t)w * 112 * 4) - 2);
        };
        int64_t need_min = INT64_MAX;
        if (!spec_.tile) {
            for (int64_t K : {(int64_t)1 << 18, (int64_t)1 << 16}) {
                Plan p;
                p.net = {h2_, w2_, K, band(w2_)};
                const int64_t tok = (int64_t)h2_ * w2_;
                p.bytes = fixed + nslots * tok * 12 * 2 + 3 * tok * c0 * 2 + tok * 12 * 4 +
                          (int64_t)cuda::Net::workspace_bytes_for(cfg_, p.net);
                if (cfg_.align)  // 2 maps per feature ring buffer; two pyramids, scratch frames, a map
                    p.bytes += 3 * 2 * map_bytes() + 2 * pyr_bytes() + align_scratch_bytes(tok) + map_bytes();
                need_min = std::min(need_min, p.bytes);
                if (p.bytes <= cap) plans_.push_back(p);
            }
        }
        // Tiles: square interiors, a multiple of 64 px. First the largest side that fits the cap,
        // shrunk to the smallest side with as few tiles (less work beyond the frame edges), then
        // halving sides as the fallbacks, down to 64 px.
        const int top = (std::max(spec_.hp, spec_.wp) + unit_ - 1) / unit_ * unit_;
        auto tiled = [&](int T) {
            Plan p;
            p.tiled = true;
            p.tile = T;
            p.dh = std::min(spec_.hp, T + 2 * halo_);
            p.dw = std::min(spec_.wp, T + 2 * halo_);
            p.tiles = ((spec_.height + T - 1) / T) * ((spec_.width + T - 1) / T);
            p.net = {p.dh / 2, p.dw / 2, (int64_t)1 << 16, band(p.dw / 2)};
            const int64_t tok = (int64_t)p.net.h * p.net.w;
            p.bytes = fixed + (2 * R_ + 1) * tok * 12 * 2 + 3 * tok * c0 * 2 + tok * 12 * 4 +
                      (int64_t)cuda::Net::workspace_bytes_for(cfg_, p.net);
            if (cfg_.align)  // two whole-frame pyramids, the maps of kept recipes, the tile's scratch
                p.bytes += 2 * pyr_bytes() + kRecipeMaps * recipe_map_bytes() + align_scratch_bytes(tok);
            return p;
        };
        const int U = unit_;
        int T = spec_.tile ? std::min(top, std::max(U, spec_.tile / U * U)) : top;
        for (; T > U && tiled(T).bytes > cap; T -= U) {
        }
        Plan best = tiled(T);
        need_min = std::min(need_min, tiled(U).bytes);
        if (best.bytes <= cap) {
            while (best.tile > U && tiled(best.tile - U).tiles == best.tiles) best = tiled(best.tile - U);
            plans_.push_back(best);
            for (int t = best.tile / 2 / U * U; t >= U; t = t / 2 / U * U) {
                plans_.push_back(tiled(t));
                if (t == U) break;
            }
            if (plans_.back().tile != U) plans_.push_back(tiled(U));
        }
        if (plans_.empty())
            return "the GPU memory cap of " + gib(cap) + " is too small for " + std::to_string(spec_.width) + "x" +
                   std::to_string(spec_.height) + ": the smallest plan (tiles of " + std::to_string(unit_) + " px) needs " + gib(need_min) +
                   " (weights, " + std::to_string(nslots) + " native frames of " + std::to_string(Sn) +
                   " bytes, the U-Net workspace of one tile)";
        return "";
    }

    const std::string &error() const override { return ctx_.err; }
    int pipeline_depth() const override { return kDepth; }
    int64_t gpu_memory_peak() const override { return ctx_.peak; }

    bool plan_info(CudaPlanInfo *i) const {
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
                  std::to_string(p.net.chunk) + " tokens";
        i->swin = net_.uploaded() ? net_.swin_path() : "";
        i->graph_launches = feat_graph_.launches() + out_graph_.launches();
        i->graph_instantiations = feat_graph_.instantiations() + out_graph_.instantiations();
        i->launches = p.tiled ? "stream launches (tiles)"
                      : graph_off_.empty() ? "a CUDA graph per U-Net pass and per output"
                                           : "stream launches: " + graph_off_;
        return true;
    }

    int push_frame(int64_t idx, const DenoiseImage &in, const FrameColor &color) override {
        try {
            TRY(enter());
            const std::string bad = cuda::check_image(L_, in, host_);
            if (!bad.empty()) return fail(DENOISE_EINVAL, "push_frame: " + bad);
            if (frames_.count(idx)) return fail(DENOISE_EINVAL, "push_frame: frame " + std::to_string(idx) + " already kept");
            Slot *s = nullptr;
            TRY(take_slot(&s));
            s->color = color;
            s->has_x = false;
            int rc = host_ ? upload(in, s) : copy_in(in, s);
            if (!rc && !plan().tiled) rc = convert_whole(s);
            if (rc) {
                free_slots_.push_front(s);
                return rc;
            }
            frames_[idx] = s;
            return 0;
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "push_frame: out of host memory");
        }
    }

    int compute_features(int64_t s, const int64_t *frames, int n, float sigma) override {
        try {
            TRY(enter());
            if (n != 2 * cfg_.fusion_radius + 1)
                return fail(DENOISE_EINVAL, "compute_features: " + std::to_string(n) + " frames, the model fuses " +
                                                std::to_string(2 * cfg_.fusion_radius + 1));
            for (int k = 0; k < n; ++k)
                if (!frames_.count(frames[k]))
                    return fail(DENOISE_EINVAL, "compute_features: frame " + std::to_string(frames[k]) + " is not kept");
            auto old = recipes_.find(s);
            if (old != recipes_.end()) drop_recipes(old, std::next(old));
            recipes_[s] = Recipe{std::vector<int64_t>(frames, frames + n), sigma, nullptr};
            if (plan().tiled) return 0;
            return features_whole(s);
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "compute_features: out of host memory");
        }
    }

    int queue_output(int64_t t, const int64_t feats[3], Amount amount) override {
        try {
            TRY(enter());
            auto fr = frames_.find(t);
            if (fr == frames_.end()) return fail(DENOISE_EINVAL, "queue_output: frame " + std::to_string(t) + " is not kept");
            for (int k = 0; k < 3; ++k)
                if (!recipes_.count(feats[k]))
                    return fail(DENOISE_EINVAL, "queue_output: feature map " + std::to_string(feats[k]) +
                                                    " is not computed");
            if (pending_.count(t)) return fail(DENOISE_EINVAL, "queue_output: output " + std::to_string(t) + " already queued");
            Out *o = nullptr;
            TRY(take_out(&o));
            // the slot's last copy out (download or device copy) is done before it is written again
            TRY(ck(cudaStreamWaitEvent(ctx_.stream, o->downloaded, 0), "cudaStreamWaitEvent (output staging)"));
            int rc = plan().tiled ? output_tiled(t, feats, amount, o) : output_whole(t, feats, amount, o);
            if (!rc) rc = ck(cudaEventRecord(o->ready, ctx_.stream), "cudaEventRecord (output ready)");
            if (!rc && host_) {
                rc = ck(cudaStreamWaitEvent(down_, o->ready, 0), "cudaStreamWaitEvent (download)");
                if (!rc)
                    rc = ck(cudaMemcpyAsync(o->pinned, o->dev, (size_t)L_.bytes, cudaMemcpyDeviceToHost, down_),
                            "cudaMemcpyAsync (output download)");
                if (!rc) rc = ck(cudaEventRecord(o->downloaded, down_), "cudaEventRecord (output downloaded)");
            }
            if (rc) {
                free_outs_.push_back(o);
                return rc;
            }
            pending_[t] = o;
            return 0;
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "queue_output: out of host memory");
        }
    }

    int write_output(int64_t t, const DenoiseImage &out) override {
        TRY(enter());
        auto it = pending_.find(t);
        if (it == pending_.end()) return fail(DENOISE_EINVAL, "write_output: output " + std::to_string(t) + " is not queued");
        const std::string bad = cuda::check_image(L_, out, host_);
        if (!bad.empty()) return fail(DENOISE_EINVAL, "write_output: " + bad);
        Out *o = it->second;
        int rc;
        if (host_) {
            rc = ck(cudaEventSynchronize(o->downloaded), "cudaEventSynchronize (output download)");
            if (!rc) cuda::copy_from_compact(L_, o->pinned, out);
        } else {
            rc = copy_out(o, out);
        }
        if (rc) return rc;
        pending_.erase(it);
        free_outs_.push_back(o);
        return 0;
    }

    // The estimator reads the kept native copy after its upload or input copy (s->ready), on its
    // own stream of the highest priority, so that it does not wait for the network's queued work;
    // the host waits for the estimator's kernels only (noise_estimate.h). With memory CUDA the
    // input copy follows the work queued on the caller's stream before the push, which waits for
    // at most the copy of the output pulled last (pipeline depth 1, see the note at the top).
    int noise_source(int64_t idx, const DenoiseImage &in, const NoisePlan &plan, NoiseSource **src) override {
        try {
            TRY(enter());
            auto it = frames_.find(idx);
            if (it == frames_.end()) return fail(DENOISE_EINVAL, "noise_source: frame " + std::to_string(idx) + " is not kept");
            Slot *s = it->second;
            if (!est_) {
                int least = 0, greatest = 0;
                TRY(ck(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange"));
                TRY(ck(cudaStreamCreateWithPriority(&est_, cudaStreamNonBlocking, greatest),
                       "cudaStreamCreateWithPriority (noise estimator)"));
                nsrc_.reset(new cuda::CudaNoiseSource(ctx_));
            }
            TRY(ck(cudaStreamWaitEvent(est_, s->ready, 0), "cudaStreamWaitEvent (noise estimator, input copy)"));
            const DevFrame f = cuda::compact_frame(L_, s->nat);
            TRY(nsrc_->bind(f, spec_.format, s->color, spec_.width, spec_.height, spec_.cw, spec_.ch, plan, est_));
            *src = nsrc_.get();
            return 0;
        } catch (const std::bad_alloc &) {
            return fail(DENOISE_ENOMEM, "noise_source: out of host memory");
        }
    }

    void drop_frame(int64_t idx) override {
        auto it = frames_.find(idx);
        if (it == frames_.end()) return;
        if (host_) cudaSetDevice(spec_.device);
        release_slot(it->second);
        frames_.erase(it);
    }

    void evict(int64_t frame_lo, int64_t feat_lo) override {
        if (!started_) return;
        if (host_) cudaSetDevice(spec_.device);
        while (!frames_.empty() && frames_.begin()->first < frame_lo) {
            release_slot(frames_.begin()->second);
            frames_.erase(frames_.begin());
        }
        while (!feats_.empty() && feats_.begin()->first < feat_lo) {
            free_feats_.push_back(feats_.begin()->second);
            feats_.erase(feats_.begin());
        }
        drop_recipes(recipes_.begin(), recipes_.lower_bound(feat_lo));
    }

    void reset() override {
        evict(INT64_MAX, INT64_MAX);
        for (auto &kv : pending_) free_outs_.push_back(kv.second);
        pending_.clear();
    }

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

    // Every call: the device (memory HOST; memory CUDA keeps the caller's context), then the lazy
    // start on the first call.
    int enter() {
        if (dead_rc_) {
            ctx_.err = dead_msg_;
            return dead_rc_;
        }
        if (host_ && ctx_created_) TRY(ck(cudaSetDevice(spec_.device), "cudaSetDevice"));
        if (started_) return 0;
        int rc = start();
        if (rc) return die(rc, "CUDA backend start: " + ctx_.err);
        started_ = true;
        return 0;
    }

    // A state no call can continue from (start failed, no plan fits): every later call returns
    // the same error.
    int die(int rc, const std::string &msg) {
        dead_rc_ = rc;
        dead_msg_ = msg;
        ctx_.err = msg;
        return rc;
    }

    int start() {
        ctx_.cap = spec_.gpu_memory;
        ctx_created_ = true;
        TRY(cuda::ctx_create(ctx_, spec_.device, host_));
        TRY(net_.upload(ctx_, m_));
        TRY(cuda::dev_alloc(ctx_, (void **)&noise_, (size_t)kNoiseBytes, "blue-noise tile"));
        // on the compute stream, which reads it (see Net::put)
        TRY(ck(cudaMemcpyAsync(noise_, spec_.blue_noise, (size_t)kNoiseBytes, cudaMemcpyHostToDevice, ctx_.stream),
               "cudaMemcpyAsync (blue noise)"));
        TRY(ck(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking), "cudaStreamCreate (input copy stream)"));
        TRY(ck(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), "cudaStreamCreate (output copy stream)"));
        if (host_) {
            for (Pin &p : pins_) {
                TRY(ck(cudaHostAlloc((void **)&p.host, (size_t)L_.bytes, cudaHostAllocDefault),
                       "cudaHostAlloc (input staging)"));
                TRY(ck(cudaEventCreateWithFlags(&p.done, kHostWaitEvent), "cudaEventCreate"));
            }
        } else {
            TRY(ck(cudaEventCreateWithFlags(&caller_ev_, cudaEventDisableTiming), "cudaEventCreate"));
        }
        for (int k = 0; k <= kDepth; ++k) {
            Out *o = nullptr;
            TRY(new_out(&o));
            free_outs_.push_back(o);
        }
        return configure(0);
    }

    // Allocate plan i's buffers, or the next plan's when i's do not fit.
    int configure(size_t i) {
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

    // After an allocation failed with ENOMEM: the next smaller plan, or the failure.
    int fall_back(int rc) {
        if (rc != DENOISE_ENOMEM) return rc;
        if (plan_i_ + 1 >= plans_.size()) return rc;
        return configure(plan_i_ + 1);
    }

    void release_plan() {
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
        cuda::dev_free(ctx_, moved_);
        cuda::dev_free(ctx_, moved_F_);
        cuda::dev_free(ctx_, tap_map_);
        moved_ = moved_F_ = nullptr;
        tap_map_ = nullptr;
        for (float *&p : match_pyr_) {
            cuda::dev_free(ctx_, p);
            p = nullptr;
        }
        for (bf16 *p : tile_x_) cuda::dev_free(ctx_, p);
        tile_x_.clear();
        for (bf16 *&p : tile_F_) {
            cuda::dev_free(ctx_, p);
            p = nullptr;
        }
        cuda::dev_free(ctx_, change_);
        change_ = nullptr;
    }

    int alloc_plan(const Plan &p) {
        TRY(net_.resize(ctx_, p.net));
        const int64_t tok = (int64_t)p.net.h * p.net.w;
        TRY(cuda::dev_alloc(ctx_, (void **)&change_, (size_t)tok * 12 * 4, "the change of one output"));
        if (cfg_.align) {
            const int c0 = cfg_.channels[0];
            TRY(cuda::dev_alloc(ctx_, (void **)&moved_, (size_t)2 * cfg_.fusion_radius * tok * 12 * 2,
                                "the fusion window's moved frames"));
            TRY(cuda::dev_alloc(ctx_, (void **)&moved_F_, (size_t)2 * tok * c0 * 2, "the head's moved feature maps"));
            for (float *&q : match_pyr_) TRY(cuda::dev_alloc(ctx_, (void **)&q, (size_t)pyr_bytes(), "a whole-frame luma pyramid"));
            if (!p.tiled) TRY(cuda::dev_alloc(ctx_, (void **)&tap_map_, (size_t)map_bytes(), "a shift map"));
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

    int new_out(Out **po) {
        std::unique_ptr<Out> o(new Out());
        int rc = cuda::dev_alloc(ctx_, (void **)&o->dev, (size_t)L_.bytes, "an output staging frame");
        if (rc) return rc;
        outs_.push_back(std::move(o));  // owned from here: the destructor frees what follows
        Out *q = outs_.back().get();
        if (host_)
            TRY(ck(cudaHostAlloc((void **)&q->pinned, (size_t)L_.bytes, cudaHostAllocDefault), "cudaHostAlloc (output staging)"));
        TRY(ck(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming), "cudaEventCreate"));
        TRY(ck(cudaEventCreateWithFlags(&q->downloaded, host_ ? kHostWaitEvent : cudaEventDisableTiming), "cudaEventCreate"));
        TRY(ck(cudaEventRecord(q->downloaded, down_), "cudaEventRecord"));  // nothing has read it yet
        *po = q;
        return 0;
    }

    int take_out(Out **po) {
        if (!free_outs_.empty()) {
            *po = free_outs_.back();
            free_outs_.pop_back();
            return 0;
        }
        for (;;) {
            int rc = new_out(po);
            if (rc != DENOISE_ENOMEM) return rc;
            const size_t before = plan_i_;
            if ((rc = fall_back(rc))) return rc;
            if (plan_i_ == before) return DENOISE_ENOMEM;
        }
    }

    // The free slot released longest ago (its last read was queued earliest), with one slot of
    // slot_count() kept spare where the cap allows: a slot released at the latest push was last
    // read by the work queued there (the tiled plan reads a frame until the last output of its
    // window), and a copy into it would wait for all of that.
    int take_slot(Slot **ps) {
        if (free_slots_.size() >= 2 || (!free_slots_.empty() && (int64_t)slots_.size() >= slot_count())) {
            *ps = free_slots_.front();
            free_slots_.pop_front();
            return 0;
        }
        std::unique_ptr<Slot> s(new Slot());
        for (;;) {
            int rc = cuda::dev_alloc(ctx_, (void **)&s->nat, (size_t)L_.bytes, "a native frame of the input ring");
            if (!rc) break;
            if (rc != DENOISE_ENOMEM) return rc;
            if (!free_slots_.empty()) {  // no spare: the free one
                *ps = free_slots_.front();
                free_slots_.pop_front();
                return 0;
            }
            const size_t before = plan_i_;
            if ((rc = fall_back(rc))) return rc;
            if (plan_i_ == before) return DENOISE_ENOMEM;
        }
        slots_.push_back(std::move(s));  // owned from here: the destructor frees what follows
        Slot *q = slots_.back().get();
        TRY(ck(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming), "cudaEventCreate"));
        TRY(ck(cudaEventCreateWithFlags(&q->released, cudaEventDisableTiming), "cudaEventCreate"));
        TRY(ck(cudaEventRecord(q->released, up_), "cudaEventRecord"));  // nothing has read it yet
        *ps = q;
        return 0;
    }

    // s->released marks the compute stream's last read of the slot (read_done() after each kernel
    // that reads it), not the whole stream at release: the next copy into the slot then waits only
    // for that read, not for the network work of the frames queued since.
    void release_slot(Slot *s) { free_slots_.push_back(s); }

    int read_done(Slot *s) { return ck(cudaEventRecord(s->released, ctx_.stream), "cudaEventRecord (input ring read)"); }

    int upload(const DenoiseImage &in, Slot *s) {
        Pin &p = pins_[pin_next_];
        pin_next_ ^= 1;
        TRY(ck(cudaEventSynchronize(p.done), "cudaEventSynchronize (input staging)"));
        cuda::copy_to_compact(L_, in, p.host);
        TRY(ck(cudaStreamWaitEvent(up_, s->released, 0), "cudaStreamWaitEvent (input ring)"));
        TRY(ck(cudaMemcpyAsync(s->nat, p.host, (size_t)L_.bytes, cudaMemcpyHostToDevice, up_), "cudaMemcpyAsync (frame upload)"));
        TRY(ck(cudaEventRecord(p.done, up_), "cudaEventRecord"));
        TRY(ck(cudaEventRecord(s->ready, up_), "cudaEventRecord"));
        return ck(cudaStreamWaitEvent(ctx_.stream, s->ready, 0), "cudaStreamWaitEvent (frame upload)");
    }

    // On the input copy stream, not the compute stream: the copy then waits only for the frame's
    // producer (the caller's stream) and the slot's last reader, and neither the caller's stream
    // nor the noise estimator (which reads the copy) waits for the network work queued before it.
    int copy_in(const DenoiseImage &in, Slot *s) {
        cudaStream_t caller = (cudaStream_t)spec_.cuda_stream;
        TRY(ck(cudaEventRecord(caller_ev_, caller), "cudaEventRecord (caller's stream)"));
        TRY(ck(cudaStreamWaitEvent(up_, caller_ev_, 0), "cudaStreamWaitEvent (caller's stream)"));
        TRY(ck(cudaStreamWaitEvent(up_, s->released, 0), "cudaStreamWaitEvent (input ring)"));
        for (int i = 0; i < 4; ++i) {
            const cuda::PlaneLayout &pl = L_.plane[i];
            if (!pl.used) continue;
            TRY(ck(cudaMemcpy2DAsync(s->nat + pl.offset, (size_t)pl.pitch, in.data[i], (size_t)in.linesize[i],
                                     (size_t)pl.row_bytes, (size_t)pl.rows, cudaMemcpyDeviceToDevice, up_),
                   "cudaMemcpy2DAsync (input frame)"));
        }
        TRY(ck(cudaEventRecord(s->ready, up_), "cudaEventRecord"));
        TRY(ck(cudaStreamWaitEvent(ctx_.stream, s->ready, 0), "cudaStreamWaitEvent (input copy)"));
        // the caller may reuse the frame once what it queues after this call runs
        return ck(cudaStreamWaitEvent(caller, s->ready, 0), "cudaStreamWaitEvent (caller's stream)");
    }

    // On the output copy stream, not the compute stream: the copy waits for the caller's stream
    // (its earlier use of `out`) and output t's own work (o->ready), and the caller's stream then
    // waits for the copy only, not for the network of output t+1 queued since.
    int copy_out(Out *o, const DenoiseImage &out) {
        cudaStream_t caller = (cudaStream_t)spec_.cuda_stream;
        TRY(ck(cudaEventRecord(caller_ev_, caller), "cudaEventRecord (caller's stream)"));
        TRY(ck(cudaStreamWaitEvent(down_, caller_ev_, 0), "cudaStreamWaitEvent (caller's stream)"));
        TRY(ck(cudaStreamWaitEvent(down_, o->ready, 0), "cudaStreamWaitEvent (output ready)"));
        for (int i = 0; i < 4; ++i) {
            const cuda::PlaneLayout &pl = L_.plane[i];
            if (!pl.used || !pl.covered) continue;
            TRY(ck(cudaMemcpy2DAsync(out.data[i], (size_t)out.linesize[i], o->dev + pl.offset, (size_t)pl.pitch,
                                     (size_t)pl.row_bytes, (size_t)pl.rows, cudaMemcpyDeviceToDevice, down_),
                   "cudaMemcpy2DAsync (output frame)"));
        }
        // partially covered planes (p010's low bits, bgr0's padding byte): each word holding a
        // colour sample whole, its other bits the input's (o->dev is frame_out's output over the
        // input's words), so a fresh pool frame gets defined words; bytes outside the samples keep
        // the caller's (denoise.h, denoise_pull)
        if (L_.partial_planes)
            TRY(cuda::frame_copy_components(ctx_, cuda::compact_frame(L_, o->dev), cuda::image_frame(out), spec_.format,
                                            spec_.width, spec_.height, L_.partial_planes, true, down_));
        TRY(ck(cudaEventRecord(o->downloaded, down_), "cudaEventRecord (output copied)"));
        return ck(cudaStreamWaitEvent(caller, o->downloaded, 0), "cudaStreamWaitEvent (caller's stream)");
    }

    // enqueue()'s launches through graph g, or on the stream: the first call of each kind
    // (*warm false), and every call once graphs are off. A capture CUDA refuses turns graphs off
    // for this engine (graph_off_ says why) and the same work is queued on the stream.
    int launch(cuda::FrameGraph &g, bool *warm, const std::function<int()> &enqueue) {
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

    int convert_whole(Slot *s) {
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

    int features_whole(int64_t s) {
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
        int rc = launch(feat_graph_, &feat_warm_, [&] {
            std::vector<const bf16 *> in = win;
            if (cfg_.align) TRY(align_window_whole(r.frames, in.data(), const_cast<int32_t *>(feat_maps(F))));
            return net_.features(ctx_, in.data(), (int)in.size(), r.sigma, h2_, w2_, F);
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

    int output_whole(int64_t t, const int64_t feats[3], Amount amount, Out *o) {
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
            if (cfg_.align) {
                const int32_t *m = feat_maps(F[1]);
                const int32_t *maps[2] = {m, m + map_ints_};
                TRY(align_features(F, maps, h2_, w2_, Fh));
            }
            TRY(net_.head(ctx_, Fh, s->x, h2_, w2_, change_, true));
            return cuda::frame_out(ctx_, change_, 0, 0, spec_.hp, spec_.wp, cuda::compact_frame(L_, s->nat),
                                   cuda::compact_frame(L_, o->dev), spec_.format, s->color, spec_.width, spec_.height,
                                   0, spec_.height, 0, spec_.width, amount, noise_);
        }));
        return read_done(s);
    }

    int output_tiled(int64_t t, const int64_t feats[3], Amount amount, Out *o) {
        const Plan &p = plan();
        // the distinct frames the three feature maps and the residual read
        std::vector<int64_t> fids;
        auto add = [&](int64_t f) {
            if (std::find(fids.begin(), fids.end(), f) == fids.end()) fids.push_back(f);
        };
        for (int k = 0; k < 3; ++k)
            for (int64_t f : recipes_.at(feats[k]).frames) add(f);
        add(t);
        if (fids.size() > tile_x_.size())
            return fail(DENOISE_EINVAL, "queue_output: output " + std::to_string(t) + " reads " +
                                            std::to_string(fids.size()) + " frames, tiles hold " +
                                            std::to_string(tile_x_.size()));
        for (int64_t f : fids)
            if (!frames_.count(f)) return fail(DENOISE_EINVAL, "queue_output: frame " + std::to_string(f) + " is not kept");
        auto xof = [&](int64_t f) { return tile_x_[std::find(fids.begin(), fids.end(), f) - fids.begin()]; };
        if (cfg_.align)
            for (int k = 0; k < 3; ++k) TRY(recipe_maps(recipes_.at(feats[k])));
        Slot *st = frames_.at(t);
        const int T = p.tile, rr = cfg_.fusion_radius;
        for (int ty = 0; ty < spec_.height; ty += T)
            for (int tx = 0; tx < spec_.width; tx += T) {
                const int oy = std::max(0, ty - halo_), ox = std::max(0, tx - halo_);
                const int hd = std::min(spec_.hp, ty + T + halo_) - oy, wd = std::min(spec_.wp, tx + T + halo_) - ox;
                // the domain's first tile in the whole frame's shift maps
                const size_t moff = cfg_.align ? ((size_t)(oy / cfg_.align_tile) * map_tw_ + ox / cfg_.align_tile) * 2 : 0;
                const int64_t dtok = (int64_t)(hd / 2) * (wd / 2);
                for (int64_t f : fids) {
                    Slot *s = frames_.at(f);
                    TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width,
                                       spec_.height, oy, ox, hd, wd, xof(f)));
                }
                for (int k = 0; k < 3; ++k) {
                    const Recipe &r = recipes_.at(feats[k]);
                    std::vector<const bf16 *> win;
                    for (int64_t f : r.frames) win.push_back(xof(f));
                    if (cfg_.align)
                        for (int j = 0, kk = 0; kk < (int)win.size(); ++kk) {
                            if (kk == rr) continue;
                            bf16 *moved = moved_ + (size_t)j * dtok * 12;
                            TRY(cuda::shift_tiles_s2d(ctx_, win[kk], hd / 2, wd / 2, r.maps + j * map_ints_ + moff,
                                                      map_tw_, cfg_.align_tile, moved));
                            win[kk] = moved;
                            ++j;
                        }
                    TRY(net_.features(ctx_, win.data(), (int)win.size(), r.sigma, hd / 2, wd / 2, tile_F_[k]));
                }
                const bf16 *F[3] = {tile_F_[0], tile_F_[1], tile_F_[2]};
                if (cfg_.align) {
                    // window t's maps of taps r-1, r+1 (recipe map order: the taps but the centre)
                    const int32_t *m = recipes_.at(feats[1]).maps + moff;
                    const int32_t *maps[2] = {m + (size_t)(rr - 1) * map_ints_, m + (size_t)rr * map_ints_};
                    TRY(align_features(F, maps, hd / 2, wd / 2, F));
                }
                TRY(net_.head(ctx_, F, xof(t), hd / 2, wd / 2, change_, true));
                TRY(cuda::frame_out(ctx_, change_, oy, ox, hd, wd, cuda::compact_frame(L_, st->nat),
                                    cuda::compact_frame(L_, o->dev), spec_.format, st->color, spec_.width, spec_.height,
                                    ty, ty + T, tx, tx + T, amount, noise_));
            }
        for (int64_t f : fids) TRY(read_done(frames_.at(f)));
        return 0;
    }

    // Model option align. Bytes of: one shift map (whole frame); a luma pyramid of the padded frame;
    // a recipe's 2r maps (tiles); the scratch of a domain of tok tokens (2r moved frames and the
    // head's two moved feature maps); a feature ring buffer (F, then with align the maps of its
    // window's taps r-1 and r+1).
    int64_t map_bytes() const { return (int64_t)map_ints_ * 4; }
    int64_t pyr_bytes() const { return (int64_t)cuda::luma_pyramid_floats(spec_.hp, spec_.wp) * 4; }
    int64_t recipe_map_bytes() const { return 2 * cfg_.fusion_radius * map_bytes(); }
    int64_t align_scratch_bytes(int64_t tok) const {
        return 2 * cfg_.fusion_radius * tok * 12 * 2 + 2 * tok * cfg_.channels[0] * 2;
    }
    int64_t feat_bytes() const {
        return (int64_t)h2_ * w2_ * cfg_.channels[0] * 2 + (cfg_.align ? 2 * map_bytes() : 0);
    }
    const int32_t *feat_maps(const bf16 *F) const {
        return reinterpret_cast<const int32_t *>(F + (size_t)h2_ * w2_ * cfg_.channels[0]);
    }

    // The luma pyramid of frame f's padded frame (frame_in with a luma plane only, luma_pyramid).
    int luma_of(int64_t f, float *pyr) {
        Slot *s = frames_.at(f);
        TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width, spec_.height, 0,
                           0, spec_.hp, spec_.wp, nullptr, pyr));
        return cuda::luma_pyramid(ctx_, pyr, spec_.hp, spec_.wp);
    }

    // Whole frames: every frame of the window but the centre matched against it and moved onto it
    // (win[k] then points at the moved frame); the maps of taps r-1 and r+1 into maps (2 maps).
    // The caller marks the window's slots read (read_done).
    int align_window_whole(const std::vector<int64_t> &frames, const bf16 **win, int32_t *maps) {
        const int rr = cfg_.fusion_radius, T = cfg_.align_tile;
        TRY(luma_of(frames[rr], match_pyr_[0]));
        bf16 *moved = moved_;
        for (int k = 0; k < (int)frames.size(); ++k) {
            if (k == rr) continue;
            int32_t *map = k == rr - 1 ? maps : k == rr + 1 ? maps + map_ints_ : tap_map_;
            TRY(luma_of(frames[k], match_pyr_[1]));
            TRY(cuda::block_match(ctx_, match_pyr_[0], match_pyr_[1], spec_.hp, spec_.wp, cfg_.align, T, map));
            TRY(cuda::shift_tiles_s2d(ctx_, win[k], h2_, w2_, map, map_tw_, T, moved));
            win[k] = moved;
            moved += (size_t)h2_ * w2_ * 12;
        }
        return 0;
    }

    // Tiles: the recipe's 2r maps (taps but the centre, in order) on the whole frame, once.
    int recipe_maps(Recipe &r) {
        if (r.maps) return 0;
        if (!free_maps_.empty()) {
            r.maps = free_maps_.back();
            free_maps_.pop_back();
        } else {
            TRY(cuda::dev_alloc(ctx_, (void **)&r.maps, (size_t)recipe_map_bytes(), "a window's shift maps"));
        }
        const int rr = cfg_.fusion_radius;
        TRY(luma_of(r.frames[rr], match_pyr_[0]));
        for (int k = 0, j = 0; k < (int)r.frames.size(); ++k) {
            if (k == rr) continue;
            TRY(luma_of(r.frames[k], match_pyr_[1]));
            TRY(cuda::block_match(ctx_, match_pyr_[0], match_pyr_[1], spec_.hp, spec_.wp, cfg_.align, cfg_.align_tile,
                                  r.maps + (size_t)j++ * map_ints_));
        }
        for (int64_t f : r.frames) TRY(read_done(frames_.at(f)));
        return 0;
    }

    void drop_recipes(std::map<int64_t, Recipe>::iterator a, std::map<int64_t, Recipe>::iterator b) {
        for (auto it = a; it != b; ++it)
            if (it->second.maps) free_maps_.push_back(it->second.maps);
        recipes_.erase(a, b);
    }

    // F_{t-1}, F_{t+1} (F[0], F[2], (h, w, c0)) moved by maps[0], maps[1] (the window's
    // full-resolution maps at the domain's first tile) halved with floor on tiles of align_tile / 2
    // into the scratch maps; Fh gets F with those two replaced.
    int align_features(const bf16 *const F[3], const int32_t *const maps[2], int h, int w, const bf16 *Fh[3]) {
        const int c0 = cfg_.channels[0];
        const bf16 *in[2] = {F[0], F[2]};
        for (int j = 0; j < 2; ++j) {
            bf16 *out = moved_F_ + (size_t)j * h * w * c0;
            TRY(cuda::shift_tiles(ctx_, in[j], h, w, c0, maps[j], map_tw_, cfg_.align_tile / 2, true, out));
            Fh[2 * j] = out;
        }
        Fh[1] = F[1];
        return 0;
    }

    const Model &m_;
    const ModelConfig cfg_;
    const StreamSpec spec_;
    const bool host_;
    FrameLayout L_;
    int h2_ = 0, w2_ = 0, R_ = 0;
    int unit_ = kTileUnit, halo_ = kHalo;  // tiles: origin / side unit and halo (px)
    // align: tiles per row of a shift map, ints per map; scratch (plan-sized): the window's moved
    // frames (2r), the head's moved F_{t-1} and F_{t+1}, one tap's map (whole frames), two
    // whole-frame luma pyramids (centre, other); free recipe map sets (tiles)
    int map_tw_ = 0;
    size_t map_ints_ = 0;
    static constexpr int kRecipeMaps = 4;
    bf16 *moved_ = nullptr, *moved_F_ = nullptr;
    int32_t *tap_map_ = nullptr;
    float *match_pyr_[2] = {nullptr, nullptr};
    std::vector<int32_t *> free_maps_;

    cuda::Ctx ctx_;
    cuda::Net net_;
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
    std::unique_ptr<cuda::CudaNoiseSource> nsrc_;

    std::vector<std::unique_ptr<Slot>> slots_;
    std::map<int64_t, Slot *> frames_;
    std::deque<Slot *> free_slots_;  // oldest release first
    std::map<int64_t, bf16 *> feats_;
    std::vector<bf16 *> free_feats_;
    std::map<int64_t, Recipe> recipes_;
    std::vector<std::unique_ptr<Out>> outs_;
    std::vector<Out *> free_outs_;
    std::map<int64_t, Out *> pending_;

    cuda::FrameGraph feat_graph_, out_graph_;  // whole frames: the U-Net pass; head + frame_out
    bool feat_warm_ = false, out_warm_ = false;  // each has run once on the stream
    std::string graph_off_;                    // why the launches go on the stream ("": graphs)

    float *change_ = nullptr;
    std::vector<bf16 *> tile_x_;
    bf16 *tile_F_[3] = {nullptr, nullptr, nullptr};
};

}  // namespace

std::unique_ptr<Backend> cuda_backend_new(const Model &m, const StreamSpec &spec, std::string *err, int *code) {
    try {
        std::unique_ptr<CudaBackend> b(new CudaBackend(m, spec));
        const std::string why = b->make_plans();
        if (!why.empty()) {
            *err = "CUDA backend: " + why;
            *code = DENOISE_ENOMEM;
            return nullptr;
        }
        return std::unique_ptr<Backend>(b.release());
    } catch (const std::bad_alloc &) {
        *err = "CUDA backend: out of host memory";
        *code = DENOISE_ENOMEM;
        return nullptr;
    }
}

bool cuda_backend_plan(const Backend &b, CudaPlanInfo *info) {
    const CudaBackend *c = dynamic_cast<const CudaBackend *>(&b);
    return c && c->plan_info(info);
}

}  // namespace denoise
