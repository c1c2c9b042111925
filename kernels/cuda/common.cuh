// Device-side helpers shared by the kernels/cuda/*.cu files (not a public header).
#ifndef DENOISE_CUDA_COMMON_CUH
#define DENOISE_CUDA_COMMON_CUH

#include "../denoise.h"
#include "ops.h"

#include <cstdint>
#include <string>

namespace denoise {
namespace cuda {

// Grid size for n items of `per_block`, refusing grids beyond the 2^31-1 x-dimension limit.
inline bool grid_1d(int64_t n, int per_block, unsigned *blocks) {
    const int64_t b = (n + per_block - 1) / per_block;
    if (b < 1 || b > 0x7fffffffLL) return false;
    *blocks = (unsigned)b;
    return true;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// model.py's reflect_index: mirror i into [0, n-1] without repeating the edge.
__device__ __forceinline__ int reflect_index_dev(int i, int n) {
    if (n == 1) return 0;
    const int p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return i >= n ? p - i : i;
}

// frame_in.cu: DENOISE_EINVAL unless fmt describes a format the frame kernels run on f's planes
// (1 or 3 components, 1/2-byte integer or 4-byte float words, at most 4x subsampling, every
// component in an existing plane, word-aligned, depth + shift within the word). `who` names the op.
int check_format(Ctx &ctx, const DevFrame &f, const DenoisePixelFormat &fmt, const char *who);

// (TRY, which passes a status on, is in ops.h: the host-only backend files use it too.)
#define DN_REQUIRE(cond, msg)                                                                   \
    do {                                                                                        \
        if (!(cond)) return fail(ctx, DENOISE_EINVAL, std::string(__func__) + ": " + (msg));   \
    } while (0)

}  // namespace cuda
}  // namespace denoise

#endif
