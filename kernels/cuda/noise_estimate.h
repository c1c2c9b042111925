// sigma=auto on the GPU: a NoiseSource (common/noise_estimate.h) whose patch statistics are computed
// by kernels/cuda/noise_estimate.cu on a native frame in device memory. The estimator's rounds,
// segment sum and 49x49 eigenvalue problem stay on the host (common/noise_estimate.cpp), shared with
// the CPU backend. Host-only header (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_NOISE_ESTIMATE_H
#define DENOISE_CUDA_NOISE_ESTIMATE_H

#include "../common/noise_estimate.h"
#include "../sigma_auto.h"
#include "backend_cuda.h"
#include "ops.h"

namespace denoise {
namespace cuda {

// scatter_kernel's selection, per plane: tau (-1: plane off), lo, hi (NoiseSelect's, 8-bit code
// values; 0 for a plane off).
struct PlaneSelect {
    double tau[3], lo[3], hi[3];
};

class CudaNoiseSource final : public NoiseSource {
public:
    // Allocations go through ctx (counted against its cap), errors into ctx.err; ctx.stream is
    // the compute stream whose state after each wait NoiseReads::started_drained records.
    explicit CudaNoiseSource(Ctx &ctx) : ctx_(ctx) {}
    ~CudaNoiseSource() override;
    CudaNoiseSource(const CudaNoiseSource &) = delete;
    CudaNoiseSource &operator=(const CudaNoiseSource &) = delete;

    // Use frame f (device memory, layout fmt, colour col, W x H, chroma cw x ch) on the planes of
    // `plan` (sigma_auto.h); every kernel and copy runs on `stream`, which must already be
    // ordered after the writes of f (an event). An asynchronous source (NoiseSource): start_*()
    // queue the kernels and the copy of their sums into pinned memory and record an event;
    // immerkaer() / scatter() wait on the host for that event (queueing the work first unless
    // it was started with the same selection), so for this stream's work only. f must stay
    // unchanged until the last call's work is done (the host has waited for it, or `stream` is
    // synchronised). 0, DENOISE_EINVAL (a plan the kernels do not run: patch side other than 7),
    // DENOISE_ENOMEM, DENOISE_EDEVICE.
    int bind(const DevFrame &f, const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H, int cw, int ch,
             const NoisePlan &plan, cudaStream_t stream);

    int planes() const override { return plan_.planes; }
    int immerkaer(double *sigma) override;
    int scatter(const NoiseSelect *sel, double *scatter, double *count) override;
    bool asynchronous() const override { return true; }
    int start_immerkaer() override;
    int start_scatter(const NoiseSelect *sel) override;

    // The host's waits so far (backend_cuda.h NoiseReads).
    const NoiseReads &reads() const { return reads_; }

    // Device bytes held (patch statistics and accumulators).
    int64_t device_bytes() const { return (int64_t)stats_bytes_ + (int64_t)acc_bytes_; }

private:
    // What start_*() queued and the next read may take: nothing, Immerkaer's sums, or the
    // scatter sums of selection `sel_`.
    enum class Started { none, immerkaer, scatter };
    PlaneSelect selection(const NoiseSelect *sel) const;
    int queue_immerkaer();
    int queue_scatter(const PlaneSelect &s);
    // Wait for the sums queued last (done_); `started`: by a start_*() call (counted in reads_).
    int wait(bool started);

    Ctx &ctx_;
    DevFrame f_;
    DenoisePixelFormat fmt_{};
    FrameColor col_;
    NoisePlan plan_;
    cudaStream_t stream_ = nullptr;
    int stride_[3] = {}, nx_[3] = {}, ny_[3] = {};
    int64_t base_[3] = {};       // first patch of plane j in stats_
    bool stats_valid_ = false;   // stats_ hold the bound frame's patch statistics
    float2 *stats_ = nullptr;    // per grid patch: (texture strength, mean), 8-bit code values
    size_t stats_bytes_ = 0;
    double *acc_ = nullptr;      // per plane: 1225 upper-triangle scatter sums, then the count; then 3 Immerkaer sums
    size_t acc_bytes_ = 0;
    double *host_acc_ = nullptr; // pinned mirror of acc_
    cudaEvent_t done_ = nullptr; // recorded after the copy into host_acc_
    Started started_ = Started::none;
    PlaneSelect sel_{};
    NoiseReads reads_;
};

}  // namespace cuda
}  // namespace denoise

#endif
