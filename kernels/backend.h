// The interface between the engine's API and frame-window logic (engine.cpp) and a backend
// (CPU: kernels/cpu/backend_cpu.cpp, CUDA: kernels/cuda/backend_cuda.cu).
//
// engine.cpp decides which time indices of the segment to compute and which to drop (mirroring
// at segment ends included) and calls, per output t in order:
//   push_frame(k) for every input frame as it arrives;
//   compute_features(s, ...) for s = t-1, t, t+1 not yet computed (F_s of frames s-r..s+r);
//   queue_output(t, {t-1, t, t+1}, amount) once those exist;
//   write_output(t, out) when the caller pulls t;
//   evict(frame_lo, feat_lo) as the window moves on;
//   noise_source(k, ...) right after push_frame(k) when sigma is estimated (sigma_auto.h); an
//   asynchronous source's frame is read at the next push or the flush (engine.cpp).
// A backend may run push_frame / compute_features / queue_output asynchronously (CUDA queues
// them on its stream and returns); write_output is where it waits. compute_features may also
// only record what F_s is made of and compute it inside queue_output (tiled frames).
//
// Every call returns 0 or a DENOISE_E* code with the message in error().
#ifndef DENOISE_BACKEND_H
#define DENOISE_BACKEND_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/blue_noise.h"
#include "common/frame_color.h"
#include "denoise.h"
#include "model.h"

namespace denoise {

class NoiseSource;
struct NoisePlan;

// What a backend is opened for; fixed for the life of an engine.
struct StreamSpec {
    int width = 0, height = 0;  // frame size in pixels
    int hp = 0, wp = 0;         // padded to cfg.pad_multiple (the network runs on hp/2 x wp/2 tokens)
    int cw = 0, ch = 0;         // chroma plane size: -((-width) >> log2_chroma_w), ... (= width, height without subsampling)
    DenoisePixelFormat format;
    DenoiseMemory memory = DENOISE_MEMORY_HOST;
    void *cuda_stream = nullptr;
    int device = 0;
    int threads = 0;
    int64_t gpu_memory = 0;     // bytes, resolved (never 0)
    int tile = 0;               // largest tile side in pixels, 0 = automatic
    const float *blue_noise = nullptr;  // kBlueNoiseSize^2 values in [0, 1) (common/blue_noise.h), row-major
};

class Backend {
public:
    virtual ~Backend() = default;

    // Take input frame `idx` of the segment: keep a copy of its native samples (the output adds the
    // change to them) and its network input (x = 2 R'G'B' - 1, reflect-padded to hp x wp,
    // space-to-depth to (hp/2, wp/2, 12)), converted once. `in` is free for reuse on return (host)
    // or, CUDA memory, for work queued on the caller's stream after this call (which the backend
    // makes wait for its copy).
    virtual int push_frame(int64_t idx, const DenoiseImage &in, const FrameColor &color) = 0;

    // F_s from kept frames frames[0..n-1] (already mirrored: frames s-r..s+r), with the sigma map
    // sigma/255 (8-bit code values).
    virtual int compute_features(int64_t s, const int64_t *frames, int n, float sigma) = 0;

    // Output t = clamp(head(F_{feats[0]}, F_{feats[1]}, F_{feats[2]}) + s2d(x_t), -1, 1), turned into
    // the change, taken to frame t's own representation, scaled by `amount`, added to frame t's
    // native samples with dither. Kept until write_output(t).
    virtual int queue_output(int64_t t, const int64_t feats[3], Amount amount) = 0;

    // Write output t (queued) into `out`; waits for it. For CUDA memory, the consumer's stream is made
    // to wait for the writes instead of the host.
    virtual int write_output(int64_t t, const DenoiseImage &out) = 0;

    // Outputs the backend wants queued ahead of the one being written, to overlap copies and
    // compute: 0 for a synchronous backend.
    virtual int pipeline_depth() const = 0;

    // sigma=auto: a NoiseSource (common/noise_estimate.h) over the estimation planes `plan` of frame
    // `idx`, which the push_frame call just before took from `in` (`in` is still valid: both calls
    // are inside one denoise_push). *src is owned by the backend; a synchronous source is valid
    // until the backend's next call, an asynchronous one (async_noise_source()) until the next
    // noise_source(), reset() or drop_frame(idx), whatever other calls come in between (it reads
    // the backend's own copy of the frame). The CPU backend evaluates the planes on the host; the
    // CUDA backend on the GPU (cuda/noise_estimate.cu), on a stream of its own, and the host
    // waits only for those small kernels, when it reads their sums.
    virtual int noise_source(int64_t idx, const DenoiseImage &in, const NoisePlan &plan, NoiseSource **src) = 0;
    // Whether noise_source() gives asynchronous sources (NoiseSource::asynchronous()): the engine
    // then reads frame k's estimate at push k + 1 or the flush by default, so that the host finds
    // the source's work done (denoise.h, sigma=auto). False for a backend whose source computes
    // on the host.
    virtual bool async_noise_source() const { return false; }

    // Drop frames with index < frame_lo (both their network input and native copy) and features with
    // index < feat_lo; their buffers are reused.
    virtual void evict(int64_t frame_lo, int64_t feat_lo) = 0;
    // Drop frame `idx` alone (the last one pushed, when the engine cannot take it after all).
    virtual void drop_frame(int64_t idx) = 0;
    // Drop everything kept (new segment).
    virtual void reset() = 0;

    virtual int64_t gpu_memory_peak() const { return 0; }
    virtual const std::string &error() const = 0;
};

// The backend of an open engine (nullptr before denoise_open() succeeds), for tests and tools
// that read a backend's own state (cuda_backend_plan).
const Backend *engine_backend(const DenoiseEngine *e);

// Both return nullptr with *err set (and *code the DENOISE_E* code) on failure. `m` must outlive
// the backend.
std::unique_ptr<Backend> cpu_backend_new(const Model &m, const StreamSpec &spec, std::string *err, int *code);

#ifdef DENOISE_HAVE_CUDA
// 0 when CUDA device `device` exists and has compute capability >= 8.0, with a description of the
// device in *why ("CUDA device 0: NVIDIA H200, compute capability 9.0"); else DENOISE_ENOSYS with
// the reason (no driver, no device, index out of range, too old) in *why. Creates no context.
int cuda_probe(int device, std::string *why);
std::unique_ptr<Backend> cuda_backend_new(const Model &m, const StreamSpec &spec, std::string *err, int *code);
#endif

}  // namespace denoise

#endif
