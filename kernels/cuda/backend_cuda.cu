// The CUDA backend (backend.h): native frames in, native frames out, the pixel work and the
// network on the GPU, every device byte counted against StreamSpec.gpu_memory.
//
// The class (backend_cuda_impl.h) is defined by job: here the Backend calls, which check their
// arguments and choose between the plans' passes; memory_plan.cpp the plans (whole frames or
// tiles, chosen at creation, allocated on the first push, the fallback to smaller ones on
// ENOMEM); staging.cpp the input ring, the output staging and the streams and events between
// them and the caller (why pipeline_depth() is 1); whole_frames.cpp and tiled_frames.cpp the two
// kinds of plan's passes (CUDA graphs for whole frames); alignment_pass.cpp model option align.
// Every CUDA or cuBLASLt error but an allocation's is DENOISE_EDEVICE with the runtime's error
// name and string; a call after one that left no usable state (start failed, no plan fits)
// returns that error again.
#include "backend_cuda_impl.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "../common/parallel.h"

namespace denoise {
namespace cuda {

CudaBackend::CudaBackend(const Model &m, const StreamSpec &spec)
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

CudaBackend::~CudaBackend() {
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

int CudaBackend::push_frame(int64_t idx, const DenoiseImage &in, const FrameColor &color) {
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

int CudaBackend::compute_features(int64_t s, const int64_t *frames, int n, float sigma) {
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

int CudaBackend::queue_output(int64_t t, const int64_t feats[3], Amount amount) {
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

int CudaBackend::write_output(int64_t t, const DenoiseImage &out) {
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
// the source is asynchronous (noise_estimate.h): the engine starts a frame's first round at its
// push and reads it at the next push or the flush, by when it is done in practice, so the host
// waits for the estimator's kernels only there, and only for a segment's first frame's later
// rounds. With memory CUDA the input copy follows the work queued on the caller's stream before
// the push, which waits for at most the copy of the output pulled last (pipeline depth 1,
// staging.cpp). The slot a source reads stays kept until its frame is evicted, after the
// estimate was read; drop_frame and reset wait for the estimator's stream first.
int CudaBackend::noise_source(int64_t idx, const DenoiseImage &in, const NoisePlan &plan, NoiseSource **src) {
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

void CudaBackend::drop_frame(int64_t idx) {
    auto it = frames_.find(idx);
    if (it == frames_.end()) return;
    if (host_) cudaSetDevice(spec_.device);
    estimator_idle();
    release_slot(it->second);
    frames_.erase(it);
}

void CudaBackend::evict(int64_t frame_lo, int64_t feat_lo) {
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

void CudaBackend::reset() {
    if (started_ && host_) cudaSetDevice(spec_.device);
    estimator_idle();
    evict(INT64_MAX, INT64_MAX);
    for (auto &kv : pending_) free_outs_.push_back(kv.second);
    pending_.clear();
}

// Every call: the device (memory HOST; memory CUDA keeps the caller's context), then the lazy
// start on the first call.
int CudaBackend::enter() {
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
int CudaBackend::die(int rc, const std::string &msg) {
    dead_rc_ = rc;
    dead_msg_ = msg;
    ctx_.err = msg;
    return rc;
}

int CudaBackend::start() {
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

}  // namespace cuda

std::unique_ptr<Backend> cuda_backend_new(const Model &m, const StreamSpec &spec, std::string *err, int *code) {
    try {
        std::unique_ptr<cuda::CudaBackend> b(new cuda::CudaBackend(m, spec));
        const std::string why = b->make_plans();
        if (!why.empty()) {
            *err = "CUDA backend: " + why;
            *code = DENOISE_ENOMEM;
            return nullptr;
        }
        // the host's only BLAS work is sigma=auto's eigenproblems: OpenBLAS on one thread
        // (common/parallel.h), unless a CPU engine of this process set its count
        blas_threads_for_gpu_engine();
        return std::unique_ptr<Backend>(b.release());
    } catch (const std::bad_alloc &) {
        *err = "CUDA backend: out of host memory";
        *code = DENOISE_ENOMEM;
        return nullptr;
    }
}

bool cuda_backend_plan(const Backend &b, CudaPlanInfo *info) {
    const cuda::CudaBackend *c = dynamic_cast<const cuda::CudaBackend *>(&b);
    return c && c->plan_info(info);
}

}  // namespace denoise
