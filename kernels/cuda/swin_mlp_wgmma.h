// The Hopper MLP probe (swin_mlp_wgmma.cu): the MLP half of a Swin block, x += fc2(GELU(fc1(LN2(x))))
// on n tokens in place, on wgmma (sm_90a only). A measurement of what warp-specialised wgmma buys
// before the whole fused block is rewritten (issue 37, item 1); the engine does not call it.
// Host-only header (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_SWIN_MLP_WGMMA_H
#define DENOISE_CUDA_SWIN_MLP_WGMMA_H

#include <cstdint>
#include <string>
#include <vector>

#include "ops.h"
#include "swin_mlp_wgmma_image.h"

namespace denoise {
namespace cuda {

// One kernel built (SWIN_MLP_WGMMA_KERNELS): C, hidden chunk HC, consumer warpgroups NCW, tanh
// form (0 tanh.approx.f32, 1 tanh.approx.bf16x2); smem: its dynamic shared memory in bytes.
struct SwinMlpKernel {
    int C, HC, NCW, tanh;
    uint32_t smem;
};

// The kernels built for C (all of them for C 0), in SWIN_MLP_WGMMA_KERNELS's order.
std::vector<SwinMlpKernel> swin_mlp_kernels(int C = 0);
// "hc128 x2 f32": hidden chunk, consumer warpgroups, tanh form (f32 / bf16x2)
std::string swin_mlp_kernel_name(const SwinMlpKernel &k);

// 0 when the probe runs on `device`: this build has the sm_90a code (nvcc with sm_90a, CUDA 12.0
// or newer) and the device is of compute capability 9.0 (sm_90a code runs there only). Otherwise
// DENOISE_EINVAL (DENOISE_EDEVICE when the device cannot be queried) and *why says which.
int swin_mlp_wgmma_supported(int device, std::string *why);

// Pack (swin_mlp_image_pack) and upload the MLP image of block `b` for C and HC on ctx.stream,
// waited for; *image (dev_alloc'd, dev_free by the caller), *bytes may be null.
int swin_mlp_image_upload(Ctx &ctx, const BlockW &b, int C, int HC, uint8_t **image, size_t *bytes);

// x (n, C) fp32, 16-byte aligned, in place: x += fc2(GELU_tanh(fc1(LN2(x)))) with kernel k and its
// image (uploaded for k.C and k.HC); eps: LayerNorm eps. max_ctas > 0 caps the persistent grid
// (else one CTA per SM). Queued on ctx.stream. 0; DENOISE_EINVAL (not supported here, bad
// arguments, no such kernel) or DENOISE_EDEVICE (the launch), with ctx.err.
int swin_mlp_wgmma(Ctx &ctx, const SwinMlpKernel &k, const uint8_t *image, float eps, float *x, int64_t n,
                   int max_ctas = 0);

struct SwinMlpKernelInfo {
    int registers = 0;    // per thread at launch (the warpgroups then setmaxnreg: the plan's figures)
    int local_bytes = 0;  // local memory per thread (> 0: ptxas spilled)
    int ctas_per_sm = 0;  // resident CTAs per SM (occupancy API)
    int sms = 0;
};
int swin_mlp_kernel_info(Ctx &ctx, const SwinMlpKernel &k, SwinMlpKernelInfo *info);

// FLOP of the MLP over n tokens (2 per multiply-add, the two GEMMs: 16 C^2 per token).
inline int64_t swin_mlp_flop(int C, int64_t n) { return 16 * n * (int64_t)C * C; }

}  // namespace cuda
}  // namespace denoise

#endif
