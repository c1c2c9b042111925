// A frame's launches as one CUDA graph: the work one call puts on the compute stream (the U-Net
// pass of a frame, or its head and frame_out) is captured, turned into this object's executable
// graph and launched as one unit, so the GPU runs the kernels without the stream's per-launch
// gaps. The pointers and sizes change from frame to frame (ring slots, feature maps, sigma): the
// executable graph of the previous frame is updated in place (cudaGraphExecUpdate: the same
// kernels in the same order, new arguments) and instantiated anew only when the update is refused
// (another topology, e.g. after a fall back to tiles). Capture mode cudaStreamCaptureModeThreadLocal:
// only CUDA calls of the capturing thread that are unsafe during a capture are refused.
// Host-only header (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_FRAME_GRAPH_H
#define DENOISE_CUDA_FRAME_GRAPH_H

#include <functional>

#include "ops.h"

namespace denoise {
namespace cuda {

class FrameGraph {
public:
    FrameGraph() = default;
    ~FrameGraph();
    FrameGraph(const FrameGraph &) = delete;
    FrameGraph &operator=(const FrameGraph &) = delete;

    // Capture what enqueue() queues on ctx.stream (enqueue: 0 or a DENOISE_E* code with ctx.err
    // set, as the ops return), make it the executable graph, launch it on ctx.stream. Returns 0;
    // enqueue's own error as it is (the capture ended and dropped, nothing launched); or
    // DENOISE_EDEVICE with the runtime's message in ctx.err when CUDA could not capture,
    // instantiate or launch it. Then capture_failed() says whether the error was the capture's
    // own (a refused or invalidated capture, an update or instantiation CUDA does not support):
    // nothing was launched, the stream is out of capture mode and the last-error slot cleared,
    // so the caller can queue the same work on the stream. An exception from enqueue() ends the
    // capture before it propagates.
    int run(Ctx &ctx, const std::function<int()> &enqueue);
    bool capture_failed() const { return capture_failed_; }
    int instantiations() const { return instantiations_; }  // graphs built (the rest: updates)
    int launches() const { return launches_; }

private:
    cudaGraphExec_t exec_ = nullptr;
    bool capture_failed_ = false;
    int instantiations_ = 0, launches_ = 0;
};

}  // namespace cuda
}  // namespace denoise

#endif
