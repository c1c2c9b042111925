// The interface between the engine's frame window / segment logic (engine.cpp) and a GPU backend.
// engine.cpp decides which time indices to compute and which to drop (mirroring at segment ends
// included); the backend keeps converted input frames and feature maps in device memory keyed by
// those indices. All calls return 0 or a DENOISE_E* code with the message in error().
#ifndef DENOISE_GPU_BACKEND_H
#define DENOISE_GPU_BACKEND_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cpu/unet.h"

namespace denoise {

class GpuBackend {
public:
    virtual ~GpuBackend() = default;
    // Convert input frame `idx` of the segment (R, G, B planes in [0,1], width x height floats,
    // row pitch linesize) and keep it until evict()/reset().
    virtual int push_frame(int64_t idx, const float *const planes[3], ptrdiff_t linesize) = 0;
    // F_s from the kept frames frames[0..n-1] (indices already mirrored), sigma of frame s.
    virtual int compute_features(int64_t s, const int64_t *frames, int n, float sigma) = 0;
    // Output for frame `centre` from F_{feats[0..2]}: the change (R, G, B planes, [0,1] units).
    virtual int head(int64_t centre, const int64_t feats[3], float *const delta[3], ptrdiff_t linesize) = 0;
    // Drop frames with index < frame_lo and features with index < feat_lo (buffers are reused).
    virtual void evict(int64_t frame_lo, int64_t feat_lo) = 0;
    virtual void reset() = 0;  // drop everything kept (new segment)
    virtual const std::string &error() const = 0;
};

#ifdef DENOISE_HAVE_CUDA
// 0 when CUDA device `device` exists and has compute capability >= 8.0; else DENOISE_ENOSYS with
// the reason (no driver, no device, index out of range, too old) in *why. Creates no context.
int cuda_probe(int device, std::string *why);
// A CUDA backend for width x height frames padded to hp x wp. Nothing touches the GPU until the
// first push_frame (then: context, stream, weight upload, buffers). W must outlive the backend.
std::unique_ptr<GpuBackend> cuda_backend_new(const cpu::UNetWeights &W, int device, int width, int height, int hp,
                                             int wp);
#endif

}  // namespace denoise

#endif
