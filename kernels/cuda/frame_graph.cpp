// FrameGraph (frame_graph.h): capture, update or instantiate, launch.
// Host cost per frame: the capture records each launch instead of submitting it (about the cost
// of the launch itself), the update rewrites the kernel nodes' arguments, and one graph launch
// submits the whole frame; the GPU then runs the nodes back to back. tools/cuda_bench.cpp's
// "graph" line measures both sides against plain stream launches.
#include "frame_graph.h"

#include <string>

namespace denoise {
namespace cuda {

FrameGraph::~FrameGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
}

int FrameGraph::run(Ctx &ctx, const std::function<int()> &enqueue) {
    capture_failed_ = false;
    auto refused = [&](cudaError_t e, const char *what) {
        capture_failed_ = true;
        cudaGetLastError();  // capture errors are not sticky: clear the last-error slot for the caller
        return fail(ctx, DENOISE_EDEVICE,
                    std::string("CUDA graph: ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    };
    cudaError_t e = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return refused(e, "cudaStreamBeginCapture");
    const int rc = enqueue();
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(ctx.stream, &g);
    if (e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        // an op the capture refused invalidates it, and that op's own error is what enqueue saw
        return refused(e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated, "capture");
    }
    if (rc) {
        cudaGraphDestroy(g);
        return rc;
    }
    if (exec_) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(exec_, g, &info) != cudaSuccess) {
            cudaGetLastError();
            cudaGraphExecDestroy(exec_);
            exec_ = nullptr;
        }
    }
    if (!exec_) {
        e = cudaGraphInstantiate(&exec_, g, 0);
        if (e != cudaSuccess) {
            exec_ = nullptr;
            cudaGraphDestroy(g);
            return refused(e, "cudaGraphInstantiate");
        }
        ++instantiations_;
    }
    cudaGraphDestroy(g);
    e = cudaGraphLaunch(exec_, ctx.stream);
    if (e != cudaSuccess) return refused(e, "cudaGraphLaunch");
    ++launches_;
    return 0;
}

}  // namespace cuda
}  // namespace denoise
