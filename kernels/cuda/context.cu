// The per-engine CUDA context: one compute stream, one cuBLASLt handle with its workspace, the
// account of every device allocation against the engine's cap, and the error helpers every op
// uses (a CUDA/cuBLAS failure becomes DENOISE_EDEVICE, or DENOISE_ENOMEM for allocations, with the
// runtime's own error name and string in ctx.err).
#include "common.cuh"

#include <cstdio>

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

int smem_kernel(Ctx &ctx, const void *fn, const char *name, int threads, size_t smem, int *per_sm, int *sms) {
    Ctx::SmemKernel &k = ctx.smem_kernels[fn];
    auto it = k.per_sm.find(smem);
    if (it == k.per_sm.end()) {
        int optin = 0, n = 0;
        TRY(cuda_check(ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device),
                       "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)"));
        if (smem > (size_t)optin)
            return fail(ctx, DENOISE_EINVAL, std::string(name) + " needs " + std::to_string(smem) +
                                                 " B of shared memory per block, the device allows " + std::to_string(optin));
        if (smem > k.attr) {  // only raised: every size cached before stays launchable
            TRY(cuda_check(ctx, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                           (std::string("cudaFuncSetAttribute(") + name + ")").c_str()));
            k.attr = smem;
        }
        TRY(cuda_check(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem),
                       (std::string("cudaOccupancyMaxActiveBlocksPerMultiprocessor(") + name + ")").c_str()));
        if (n < 1)
            return fail(ctx, DENOISE_EINVAL, std::string("no CTA of ") + name + " (" + std::to_string(threads) + " threads, " +
                                                 std::to_string(smem) + " B of shared memory) fits on an SM");
        if (!ctx.sms)
            TRY(cuda_check(ctx, cudaDeviceGetAttribute(&ctx.sms, cudaDevAttrMultiProcessorCount, ctx.device),
                           "cudaDeviceGetAttribute(MultiProcessorCount)"));
        it = k.per_sm.emplace(smem, n).first;
    }
    if (per_sm) *per_sm = it->second;
    if (sms) *sms = ctx.sms;
    return 0;
}

namespace {

std::string mib(int64_t b) {
    char t[48];
    std::snprintf(t, sizeof t, "%.1f MiB", b / 1048576.0);
    return t;
}

}  // namespace

int dev_alloc(Ctx &ctx, void **p, size_t bytes, const char *what) {
    *p = nullptr;
    const size_t b = bytes ? bytes : 16;
    if ((int64_t)b > ctx.cap - ctx.used)
        return fail(ctx, DENOISE_ENOMEM,
                    std::string(what) + ": " + std::to_string(b) + " bytes (" + mib(b) + ") would exceed the GPU memory cap of " +
                        mib(ctx.cap) + " (" + mib(ctx.used) + " already held by this engine)");
    cudaError_t e = cudaMalloc(p, b);
    if (e != cudaSuccess) {
        cudaGetLastError();  // an allocation failure is not sticky: clear it
        *p = nullptr;
        return fail(ctx, e == cudaErrorMemoryAllocation ? DENOISE_ENOMEM : DENOISE_EDEVICE,
                    std::string("cudaMalloc(") + std::to_string(b) + " bytes = " + mib(b) + ") for " + what + ": " +
                        cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + " (this engine holds " + mib(ctx.used) +
                        ", cap " + mib(ctx.cap) + ")");
    }
    ctx.live[*p] = b;
    ctx.used += (int64_t)b;
    if (ctx.used > ctx.peak) ctx.peak = ctx.used;
    return 0;
}

void dev_free(Ctx &ctx, void *p) {
    if (!p) return;
    auto it = ctx.live.find(p);
    if (it != ctx.live.end()) {
        ctx.used -= (int64_t)it->second;
        ctx.live.erase(it);
    }
    cudaFree(p);
}

int ctx_create(Ctx &ctx, int device, bool set_device, size_t lt_ws_bytes) {
    int rc;
    if (set_device) {
        ctx.device = device;
        if ((rc = cuda_check(ctx, cudaSetDevice(device), "cudaSetDevice"))) return rc;
    } else if ((rc = cuda_check(ctx, cudaGetDevice(&ctx.device), "cudaGetDevice (current context)"))) {
        return rc;
    }
    if ((rc = cuda_check(ctx, cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate")))
        return rc;
    if ((rc = cublas_check(ctx, cublasLtCreate(&ctx.lt), "cublasLtCreate"))) return rc;
    ctx.lt_ws_bytes = lt_ws_bytes;
    return dev_alloc(ctx, &ctx.lt_ws, ctx.lt_ws_bytes, "the cuBLASLt workspace");
}

void ctx_destroy(Ctx &ctx) {
    if (ctx.stream) cudaStreamSynchronize(ctx.stream);
    for (auto &kv : ctx.live) cudaFree(kv.first);
    ctx.live.clear();
    ctx.used = 0;
    ctx.lt_ws = nullptr;
    if (ctx.lt) cublasLtDestroy(ctx.lt);
    if (ctx.stream) cudaStreamDestroy(ctx.stream);
    ctx.lt = nullptr;
    ctx.stream = nullptr;
    ctx.algos.clear();
    ctx.smem_kernels.clear();
    ctx.sms = 0;
}

int poison(Ctx &ctx, void *p, size_t bytes) {
    return cuda_check(ctx, cudaMemsetAsync(p, 0xFF, bytes, ctx.stream), "cudaMemsetAsync (poison)");
}

}  // namespace cuda
}  // namespace denoise
