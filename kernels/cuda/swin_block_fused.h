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

// Options of one call. Defaults: the default tile for C, the plain kernel.
struct SwinFusedParams {
    int tw = 0;  // windows per CTA (0: the default for C)
    int nw = 0;  // warps per CTA (0: the default for C)
    // the build compiled with __launch_bounds__(threads, 1) (ptxas may use up to 255 registers)
    // instead of ptxas's default register heuristic; same math
    bool one_cta_regs = false;
    // non-null: run the instrumented kernel, which adds the number of mma.sync it issued to this
    // device counter (swin_block_desc.h: it must equal mma_per_cta x CTAs)
    unsigned long long *mma_count = nullptr;
    // non-null (x fp32, not bf16_residual): the block's output rounded to bf16, (H, W, C), 16-byte
    // aligned, is written here and x is left unchanged (the U-Net's last block writes the bf16
    // feature map this way: no separate cast of the fp32 map)
    uint16_t *bf16_out = nullptr;
};

struct SwinFusedTile {
    int tw, nw, smem_bytes;
};

// The tiles built for (C, heads), the default first; empty when none is.
std::vector<SwinFusedTile> swin_fused_tiles(int C, int heads);

// x (H, W, C), fp32 or (bf16_residual) bf16 bits, 16-byte aligned, in place (or into
// params->bf16_out); image: the block's weight image on the device (swin_weight_image_upload);
// eps: LayerNorm eps (model v1 1e-5); shift: the cyclic shift (0 or 4 in model v1). H and W
// multiples of 8. Built for C in {32, 48, 64, 96, 128, 192, 256} with head dim 32 (48 for C = 48). Queued on ctx.stream. Returns 0,
// DENOISE_EINVAL (shapes, pointers, no kernel built for (C, heads), or more shared memory than the
// device allows, with ctx.err naming it) or DENOISE_EDEVICE (launch failure, the CUDA message).
int swin_block_fused(Ctx &ctx, const uint8_t *image, int C, int heads, float eps, void *x, bool bf16_residual, int H,
                     int W, int shift, const SwinFusedParams *params = nullptr);

// Whether swin_block_fused() runs (C, heads) with its default tile on CUDA device `device`: 0, or
// DENOISE_EINVAL with *why naming what is missing (no kernel built for the width and head dim, or
// more shared memory per block than the device allows: sm_89's 99 KB refuses C >= 128),
// DENOISE_EDEVICE with the runtime's message when the device cannot be queried.
int swin_block_fused_supported(int device, int C, int heads, std::string *why);

// CTAs per SM of the kernel that `params` selects for (C, heads) on the current device, from
// cudaOccupancyMaxActiveBlocksPerMultiprocessor with its dynamic shared memory (registers and
// shared memory both count): *ctas_per_sm. 0, DENOISE_EINVAL or DENOISE_EDEVICE.
int swin_block_fused_occupancy(Ctx &ctx, int C, int heads, bool bf16_residual, const SwinFusedParams *params,
                               int *ctas_per_sm);

// Pack block b (swin_weight_image_pack) and copy it to a new device allocation *image of ctx's
// (free it with dev_free(ctx, *image)), *bytes its size (may be null); the copy is queued on
// ctx.stream and waited for. 0, DENOISE_EINVAL, DENOISE_ENOMEM or DENOISE_EDEVICE.
int swin_weight_image_upload(Ctx &ctx, const BlockW &b, int C, int heads, uint8_t **image, size_t *bytes);

}  // namespace cuda
}  // namespace denoise

#endif
