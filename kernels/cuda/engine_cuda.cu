// The CUDA backend of the engine (gpu_backend.h): device rings of converted input frames and of
// feature maps keyed by the segment's time indices that engine.cpp hands in, so every input
// frame is converted once and the U-Net runs once per output frame (F_{t+1} is computed for
// output t and reused by outputs t+1 and t+2).
//
// Lazy start: denoise_open only probes the device; the first push creates the context (one
// non-blocking stream, cuBLASLt), uploads the weights (bf16) and sizes every buffer.
// Per push: caller's planes -> pinned staging (memcpy per row) -> one async H2D copy ->
// convert_in into a free frame slot. The staging buffer is reused once the previous copy's event
// has completed. Per pull: head -> convert_out -> one async D2H copy into pinned memory -> stream
// synchronise -> copy per row into the caller's planes. Slots are recycled by evict()/reset().
#include "../denoise.h"
#include "../gpu_backend.h"
#include "common.cuh"
#include "network.h"

#include <cstring>
#include <map>
#include <vector>

namespace denoise {

int cuda_probe(int device, std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
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
    int major = 0, minor = 0;
    cudaError_t e1 = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaError_t e2 = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
        cudaGetLastError();
        *why = std::string("cudaDeviceGetAttribute: ") + cudaGetErrorString(e1 != cudaSuccess ? e1 : e2);
        return DENOISE_ENOSYS;
    }
    if (major < 8) {
        *why = "device " + std::to_string(device) + " has compute capability " + std::to_string(major) + "." +
               std::to_string(minor) + "; the CUDA engine needs 8.0 or newer (bf16 tensor cores)";
        return DENOISE_ENOSYS;
    }
    why->clear();
    return 0;
}

namespace {

using cuda::bf16;

#define TRY(x)                  \
    do {                        \
        int rc_ = (x);          \
        if (rc_) return rc_;    \
    } while (0)

class CudaBackend final : public GpuBackend {
public:
    CudaBackend(const cpu::UNetWeights &W, int device, int width, int height, int hp, int wp)
        : W_(W), device_(device), width_(width), height_(height), hp_(hp), wp_(wp), h2_(hp / 2), w2_(wp / 2) {}

    ~CudaBackend() override {
        if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
        for (auto &kv : frames_) cudaFree(kv.second);
        for (auto &kv : feats_) cudaFree(kv.second);
        for (bf16 *p : free_frames_) cudaFree(p);
        for (bf16 *p : free_feats_) cudaFree(p);
        if (d_in_) cudaFree(d_in_);
        if (d_delta_) cudaFree(d_delta_);
        if (d_out_) cudaFree(d_out_);
        if (h_in_) cudaFreeHost(h_in_);
        if (h_out_) cudaFreeHost(h_out_);
        if (in_copied_) cudaEventDestroy(in_copied_);
        net_.reset();
        cuda::ctx_destroy(ctx_);
    }

    const std::string &error() const override { return ctx_.err; }

    int push_frame(int64_t idx, const float *const planes[3], ptrdiff_t linesize) override {
        TRY(start());
        const size_t plane = (size_t)width_ * height_;
        TRY(cuda::cuda_check(ctx_, cudaEventSynchronize(in_copied_), "cudaEventSynchronize (input staging)"));
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < height_; ++y)
                std::memcpy(h_in_ + c * plane + (size_t)y * width_, planes[c] + (ptrdiff_t)y * linesize,
                            sizeof(float) * width_);
        TRY(cuda::cuda_check(ctx_, cudaMemcpyAsync(d_in_, h_in_, 3 * plane * sizeof(float), cudaMemcpyHostToDevice,
                                                   ctx_.stream),
                             "cudaMemcpyAsync (frame upload)"));
        TRY(cuda::cuda_check(ctx_, cudaEventRecord(in_copied_, ctx_.stream), "cudaEventRecord"));
        bf16 *slot = nullptr;
        TRY(take(free_frames_, (size_t)h2_ * w2_ * 12, &slot, "input frame ring"));
        int rc = cuda::convert_in(ctx_, d_in_, height_, width_, hp_, wp_, slot);
        if (rc) {
            free_frames_.push_back(slot);
            return rc;
        }
        auto old = frames_.find(idx);
        if (old != frames_.end()) free_frames_.push_back(old->second);
        frames_[idx] = slot;
        return 0;
    }

    int compute_features(int64_t s, const int64_t *frames, int n, float sigma) override {
        TRY(start());
        std::vector<const bf16 *> win(n);
        for (int k = 0; k < n; ++k) {
            auto it = frames_.find(frames[k]);
            if (it == frames_.end())
                return cuda::fail(ctx_, DENOISE_EINVAL, "internal: frame " + std::to_string(frames[k]) + " not on the GPU");
            win[k] = it->second;
        }
        bf16 *slot = nullptr;
        TRY(take(free_feats_, (size_t)h2_ * w2_ * W_.cfg.channels[0], &slot, "feature ring"));
        int rc = net_->features(ctx_, win.data(), n, sigma, slot);
        if (rc) {
            free_feats_.push_back(slot);
            return rc;
        }
        auto old = feats_.find(s);
        if (old != feats_.end()) free_feats_.push_back(old->second);
        feats_[s] = slot;
        return 0;
    }

    int head(int64_t centre, const int64_t feats[3], float *const delta[3], ptrdiff_t linesize) override {
        TRY(start());
        const bf16 *F[3];
        for (int k = 0; k < 3; ++k) {
            auto it = feats_.find(feats[k]);
            if (it == feats_.end())
                return cuda::fail(ctx_, DENOISE_EINVAL, "internal: features " + std::to_string(feats[k]) + " not on the GPU");
            F[k] = it->second;
        }
        auto c = frames_.find(centre);
        if (c == frames_.end())
            return cuda::fail(ctx_, DENOISE_EINVAL, "internal: frame " + std::to_string(centre) + " not on the GPU");
        TRY(net_->head(ctx_, F, c->second, d_out_));
        TRY(cuda::convert_out(ctx_, d_out_, c->second, h2_, w2_, height_, width_, d_delta_));
        const size_t plane = (size_t)width_ * height_;
        TRY(cuda::cuda_check(ctx_, cudaMemcpyAsync(h_out_, d_delta_, 3 * plane * sizeof(float), cudaMemcpyDeviceToHost,
                                                   ctx_.stream),
                             "cudaMemcpyAsync (delta download)"));
        TRY(cuda::cuda_check(ctx_, cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize (output frame)"));
        for (int k = 0; k < 3; ++k)
            for (int y = 0; y < height_; ++y)
                std::memcpy(delta[k] + (ptrdiff_t)y * linesize, h_out_ + k * plane + (size_t)y * width_,
                            sizeof(float) * width_);
        return 0;
    }

    void evict(int64_t frame_lo, int64_t feat_lo) override {
        drop_below(frames_, free_frames_, frame_lo);
        drop_below(feats_, free_feats_, feat_lo);
    }

    void reset() override {
        drop_below(frames_, free_frames_, INT64_MAX);
        drop_below(feats_, free_feats_, INT64_MAX);
    }

private:
    static void drop_below(std::map<int64_t, bf16 *> &m, std::vector<bf16 *> &pool, int64_t lo) {
        for (auto it = m.begin(); it != m.end() && it->first < lo;) {
            pool.push_back(it->second);
            it = m.erase(it);
        }
    }

    int take(std::vector<bf16 *> &pool, size_t elems, bf16 **out, const char *what) {
        if (!pool.empty()) {
            *out = pool.back();
            pool.pop_back();
            return 0;
        }
        void *p = nullptr;
        TRY(cuda::dev_alloc(ctx_, &p, elems * sizeof(bf16), what));
        *out = (bf16 *)p;
        return 0;
    }

    int start() {
        // cudaSetDevice is per host thread; the caller may change threads between calls.
        if (started_) return cuda::cuda_check(ctx_, cudaSetDevice(device_), "cudaSetDevice");
        if (start_failed_) return start_rc_;
        start_rc_ = start_once();
        if (start_rc_) {
            start_failed_ = true;
            if (!ctx_.err.empty()) ctx_.err = "CUDA engine start: " + ctx_.err;
            return start_rc_;
        }
        started_ = true;
        return 0;
    }

    int start_once() {
        TRY(cuda::ctx_create(ctx_, device_));
        net_.reset(new cuda::Net());
        TRY(net_->upload(ctx_, W_));
        TRY(net_->resize(ctx_, h2_, w2_));
        const size_t plane = (size_t)width_ * height_;
        TRY(cuda::cuda_check(ctx_, cudaHostAlloc((void **)&h_in_, 3 * plane * sizeof(float), cudaHostAllocDefault),
                             "cudaHostAlloc (input staging)"));
        TRY(cuda::cuda_check(ctx_, cudaHostAlloc((void **)&h_out_, 3 * plane * sizeof(float), cudaHostAllocDefault),
                             "cudaHostAlloc (output staging)"));
        TRY(cuda::dev_alloc(ctx_, (void **)&d_in_, 3 * plane * sizeof(float), "input planes"));
        TRY(cuda::dev_alloc(ctx_, (void **)&d_delta_, 3 * plane * sizeof(float), "delta planes"));
        TRY(cuda::dev_alloc(ctx_, (void **)&d_out_, (size_t)h2_ * w2_ * W_.cfg.head_out_channels() * sizeof(float),
                            "head output"));
        TRY(cuda::cuda_check(ctx_, cudaEventCreateWithFlags(&in_copied_, cudaEventDisableTiming), "cudaEventCreate"));
        return cuda::cuda_check(ctx_, cudaEventRecord(in_copied_, ctx_.stream), "cudaEventRecord");
    }

    const cpu::UNetWeights &W_;
    const int device_, width_, height_, hp_, wp_, h2_, w2_;
    cuda::Ctx ctx_;
    std::unique_ptr<cuda::Net> net_;
    bool started_ = false, start_failed_ = false;
    int start_rc_ = 0;
    float *h_in_ = nullptr, *h_out_ = nullptr, *d_in_ = nullptr, *d_delta_ = nullptr, *d_out_ = nullptr;
    cudaEvent_t in_copied_ = nullptr;
    std::map<int64_t, bf16 *> frames_, feats_;
    std::vector<bf16 *> free_frames_, free_feats_;
};

}  // namespace

std::unique_ptr<GpuBackend> cuda_backend_new(const cpu::UNetWeights &W, int device, int width, int height, int hp,
                                             int wp) {
    return std::unique_ptr<GpuBackend>(new CudaBackend(W, device, width, height, hp, wp));
}

}  // namespace denoise
