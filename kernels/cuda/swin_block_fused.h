// The fused Swin block (swin_block_fused.cu): one kernel launch per block on the residual
// stream, the same contract as Net::block() (kernels/cuda/network.cu): x (H, W, C) NHWC updated in
// place by x += proj(W-MSA(LN1(x))); x += fc2(GELU(fc1(LN2(x)))). Host-only header
// (g++-includable with -I$CUDA_HOME/include).
#ifndef DENOISE_CUDA_SWIN_BLOCK_FUSED_H
#define DENOISE_CUDA_SWIN_BLOCK_FUSED_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops.h"
#include "swin_weight_image.h"

namespace denoise {
namespace cuda {

// One of the kernels built (SWIN_FUSED_KERNELS in swin_block_desc.h): the tile plan
// swin_tile(C, HD, tw, nw, qa, ma), pf (the GEMM phases' first weight fragments loaded before
// their barriers) and the build (ctas: 0 ptxas's register heuristic, n for n resident CTAs per SM,
// swin_min_ctas); smem: its dynamic shared memory per CTA in bytes.
struct SwinFusedKernel {
    int C, HD, tw, nw, qa, ma, pf, ctas;
    uint32_t smem;
};

// Options of one call. Defaults: the engine's kernel for (C, heads) on this device
// (swin_block_fused_choice). Each kernel field set narrows the choice to the first kernel in the
// engine's order of preference that matches all fields set (the checks and the sweep force one so).
struct SwinFusedParams {
    int tw = 0;     // windows per CTA (0: any)
    int nw = 0;     // warps per CTA (0: any)
    int qa = -1;    // q through shared memory (0) or projected in the attention phase (1); -1: any
    int ma = 0;     // accumulator tiles per warp at most (0: any)
    int pf = -1;    // first weight fragments of each GEMM phase before its barrier (1) or not (0); -1: any
    int ctas = -1;  // the build: 0 ptxas's register heuristic, n: for n CTAs per SM (-1: any)
    // non-null: run the instrumented kernel of the tile plan (fp32 stream in place only), which
    // adds the number of mma.sync it issued to this device counter (swin_block_desc.h: it must
    // equal mma_per_cta x CTAs)
    unsigned long long *mma_count = nullptr;
    // non-null (x fp32, not bf16_residual): the block's output rounded to bf16, (H, W, C), 16-byte
    // aligned, is written here and x is left unchanged (the U-Net's last block writes the bf16
    // feature map this way: no separate cast of the fp32 map)
    uint16_t *bf16_out = nullptr;
};

// The kernels built for (C, heads), in SWIN_FUSED_KERNELS's order; empty when none is.
std::vector<SwinFusedKernel> swin_fused_kernels(int C, int heads);

// A short name of a kernel for tables: "1/4 qa ma8 pf x5" (tile TW / NW, qa, ma if not 16, pf,
// then "x" CTAS, or "heur" for ptxas's register heuristic).
std::string swin_fused_kernel_name(const SwinFusedKernel &k);

// x (H, W, C), fp32 or (bf16_residual) bf16 bits, 16-byte aligned, in place (or into
// params->bf16_out); image: the block's weight image on the device (swin_weight_image_upload);
// eps: LayerNorm eps (model v1 1e-5); shift: the cyclic shift (0 or 4 in model v1). H and W
// multiples of 8. Built for C in {32, 48, 64, 96, 128, 192, 256} with head dim 32 (48 for C = 48). Queued on ctx.stream. Returns 0,
// DENOISE_EINVAL (shapes, pointers, no kernel built for (C, heads), or more shared memory than the
// device allows, with ctx.err naming it) or DENOISE_EDEVICE (launch failure, the CUDA message).
int swin_block_fused(Ctx &ctx, const uint8_t *image, int C, int heads, float eps, void *x, bool bf16_residual, int H,
                     int W, int shift, const SwinFusedParams *params = nullptr);

// The engine's kernel for (C, heads) on CUDA device `device`: the first in SWIN_FUSED_PREFERENCE's
// order for the device's compute capability (then any device's rows, then SWIN_FUSED_KERNELS's
// order) whose shared memory the device allows per block, into *k (may be null). 0, or
// DENOISE_EINVAL with *why naming what is missing (no kernel built for the width and head dim, or
// none within the device's shared memory per block), DENOISE_EDEVICE with the runtime's message
// when the device cannot be queried.
int swin_block_fused_choice(int device, int C, int heads, SwinFusedKernel *k, std::string *why);

// Whether swin_block_fused() runs (C, heads) on CUDA device `device`: swin_block_fused_choice
// without the kernel.
int swin_block_fused_supported(int device, int C, int heads, std::string *why);

struct SwinFusedKernelInfo {
    SwinFusedKernel kernel{};
    int registers = 0;    // per thread (cudaFuncGetAttributes)
    int local_bytes = 0;  // local memory per thread: > 0 when ptxas spilled
    int ctas_per_sm = 0;  // resident CTAs per SM with its shared memory (registers and shared memory both count)
};

// The kernel `params` selects for (C, heads) and the residual form on the current device, with its
// registers, local memory and resident CTAs per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
// 0, DENOISE_EINVAL or DENOISE_EDEVICE.
int swin_block_fused_kernel_info(Ctx &ctx, int C, int heads, bool bf16_residual, const SwinFusedParams *params,
                                 SwinFusedKernelInfo *info);

// Pack block b (swin_weight_image_pack) and copy it to a new device allocation *image of ctx's
// (free it with dev_free(ctx, *image)), *bytes its size (may be null); the copy is queued on
// ctx.stream and waited for. 0, DENOISE_EINVAL, DENOISE_ENOMEM or DENOISE_EDEVICE.
int swin_weight_image_upload(Ctx &ctx, const BlockW &b, int C, int heads, uint8_t **image, size_t *bytes);

}  // namespace cuda
}  // namespace denoise

#endif
