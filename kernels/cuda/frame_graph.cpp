// FrameGraph (frame_graph.h): capture, update or instantiate, launch.
// Host cost per frame: the capture records each launch instead of submitting it (about the cost
// of the launch itself), the update rewrites the kernel nodes' arguments, and one graph launch
// submits the whole frame; the GPU then runs the nodes back to back. tools/cuda_bench/kernels.cpp's
// "graph" line measures both sides against plain stream launches.
#include "frame_graph.h"

#include <string>

namespace denoise {
namespace cuda {

namespace {

// Errors that say the capture itself was refused or broken (the same work can run on the
// stream), as opposed to a fault of the device or of the work.
bool capture_error(cudaError_t e) {
    switch (e) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
    case cudaErrorNotSupported:
    case cudaErrorGraphExecUpdateFailure:
        return true;
    default:
        return false;
    }
}

}  // namespace

FrameGraph::~FrameGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
}

int FrameGraph::run(Ctx &ctx, const std::function<int()> &enqueue) {
    capture_failed_ = false;
    // A CUDA error of the capture machinery: capture_failed() when it is one the stream can do
    // without (capture_error), else a plain device error. Either way the last-error slot is
    // cleared (capture errors are not sticky), so that the next launch_check sees its own.
    auto cuda_error = [&](cudaError_t e, const char *what) {
        capture_failed_ = capture_error(e);
        cudaGetLastError();
        return fail(ctx, DENOISE_EDEVICE,
                    std::string("CUDA graph: ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    };
    cudaError_t e = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return cuda_error(e, "cudaStreamBeginCapture");
    int rc;
    try {
        rc = enqueue();
    } catch (...) {  // end the capture before the exception leaves (the stream must not stay in it)
        cudaGraph_t g = nullptr;
        cudaStreamEndCapture(ctx.stream, &g);
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        throw;
    }
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(ctx.stream, &g);
    if (e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        // an op the capture refused invalidates it; that op's own error is what enqueue returned
        return cuda_error(e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated, "capture");
    }
    if (rc) {
        cudaGraphDestroy(g);
        return rc;
    }
    if (exec_) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(exec_, g, &info) != cudaSuccess) {  // another topology: build anew
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
            return cuda_error(e, "cudaGraphInstantiate");
        }
        ++instantiations_;
    }
    cudaGraphDestroy(g);
    e = cudaGraphLaunch(exec_, ctx.stream);
    if (e != cudaSuccess) return cuda_error(e, "cudaGraphLaunch");
    ++launches_;
    return 0;
}

}  // namespace cuda
}  // namespace denoise
