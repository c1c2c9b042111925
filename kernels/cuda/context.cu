// The per-engine CUDA context: one stream, one cuBLASLt handle with a 32 MiB workspace, and the
// error helpers every op uses (a CUDA/cuBLAS failure becomes DENOISE_EDEVICE, or DENOISE_ENOMEM
// for allocations, with the runtime's own error string in ctx.err).
#include "common.cuh"

namespace denoise {
namespace cuda {

int fail(Ctx &ctx, int code, const std::string &msg) {
    ctx.err = msg;
    return code;
}

int cuda_check(Ctx &ctx, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    const int code = e == cudaErrorMemoryAllocation ? DENOISE_ENOMEM : DENOISE_EDEVICE;
    return fail(ctx, code, std::string(what) + ": CUDA error " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

int cublas_check(Ctx &ctx, cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    const int code = s == CUBLAS_STATUS_ALLOC_FAILED ? DENOISE_ENOMEM : DENOISE_EDEVICE;
    return fail(ctx, code, std::string(what) + ": cuBLASLt error " + std::to_string((int)s) + " (" +
                               cublasLtGetStatusName(s) + ": " + cublasLtGetStatusString(s) + ")");
}

int launch_check(Ctx &ctx, const char *kernel) {
    return cuda_check(ctx, cudaGetLastError(), (std::string("launch of ") + kernel).c_str());
}

int dev_alloc(Ctx &ctx, void **p, size_t bytes, const char *what) {
    *p = nullptr;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-less allocation error
        *p = nullptr;
        return fail(ctx, e == cudaErrorMemoryAllocation ? DENOISE_ENOMEM : DENOISE_EDEVICE,
                    std::string("cudaMalloc(") + std::to_string(bytes) + " bytes) for " + what + ": " +
                        cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    }
    return 0;
}

int ctx_create(Ctx &ctx, int device) {
    ctx.device = device;
    int rc;
    if ((rc = cuda_check(ctx, cudaSetDevice(device), "cudaSetDevice"))) return rc;
    if ((rc = cuda_check(ctx, cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate")))
        return rc;
    if ((rc = cublas_check(ctx, cublasLtCreate(&ctx.lt), "cublasLtCreate"))) return rc;
    ctx.lt_ws_bytes = (size_t)32 << 20;
    return dev_alloc(ctx, &ctx.lt_ws, ctx.lt_ws_bytes, "the cuBLASLt workspace");
}

void ctx_destroy(Ctx &ctx) {
    if (ctx.stream) cudaStreamSynchronize(ctx.stream);
    if (ctx.lt_ws) cudaFree(ctx.lt_ws);
    if (ctx.lt) cublasLtDestroy(ctx.lt);
    if (ctx.stream) cudaStreamDestroy(ctx.stream);
    ctx.lt_ws = nullptr;
    ctx.lt = nullptr;
    ctx.stream = nullptr;
    ctx.algos.clear();
}

int poison(Ctx &ctx, void *p, size_t bytes) {
    return cuda_check(ctx, cudaMemsetAsync(p, 0xFF, bytes, ctx.stream), "cudaMemsetAsync (poison)");
}

}  // namespace cuda
}  // namespace denoise
