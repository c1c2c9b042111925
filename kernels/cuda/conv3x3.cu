// fusion_conv3x3: the input fusion conv of models v1 / v2 (3x3, zero padding 1, 12 n + 1 -> Cout
// channels: 61 -> c0 for n = 5), direct form on CUDA cores, reading the s2d frames of the fusion
// window and the constant sigma channel where they are (no 61-channel concat map, no im2col: at
// 1080p an im2col operand would be 522k x 549 bf16 = 573 MB).
//
// Math: out[y, x, o] = bias[o] + sum_{ky,kx in-bounds} sum_ci in[y+ky-1, x+kx-1, ci] wk[ky*3+kx, ci, o]
// with in = [frames[0] | ... | frames[n-1] | sigma/255]; taps outside the map contribute 0, the
// sigma channel included (PyTorch's zero padding applies to it too).
// Layout: frames (h, w, 12) bf16; wk (9, Cin, Cout) bf16; out (h, w, Cout) fp32 (the enc0 residual
// stream), Cout a multiple of 32 up to 256. A block computes one group of 32 output channels
// (blockIdx.y) for 128 tokens: the group's weights (9, Cin, 32) are converted once per block to
// fp32 in shared memory (9 x 61 x 32 x 4 = 70 KB for n = 5, whatever Cout: it fits sm_89's 99 KB
// too), the frames are read once per group (L1/L2).
// One thread per output token and group: 32 fp32 accumulators, every weight read is a
// shared-memory broadcast (all lanes of a warp read the same address).
// Cost at 1080p (960 x 544 tokens), Cout 32: 18.3 GFLOP (9 x 61 x 32 MAC per token); traffic per
// token and group 9 x 5 x 24 B read (served mostly by L1/L2: each frame token is read by 9
// neighbours), 128 B written. CUDA cores: the fallback of conv3x3_tc.cu's implicit GEMM on tensor
// cores, which fusion_conv3x3 runs whenever it takes the shape (nframes, Cout) on the device.
// Model v2's alignment: a frame with a shift map is read moved onto the centre (tile_shift.h's
// gather, the values shift_tiles_s2d would have written), so no moved copy of it exists.
#include "common.cuh"
#include "tile_shift.h"

namespace denoise {
namespace cuda {

namespace {

constexpr int kGroup = 32;  // output channels per thread (and per block)
constexpr int kMaxCout = 256;
constexpr int kMaxFrames = 8;
struct FramePtrs {
    const bf16 *p[kMaxFrames];
    const int32_t *shift[kMaxFrames];  // model v2's alignment: frame k read moved (tile_shift.h); null: as it is
    int stride, tile;                  // the shift maps' tiles per row and tokens per tile side
};

__global__ void __launch_bounds__(128) fusion_conv3x3_kernel(FramePtrs fr, int nframes, float sigma_map, int h, int w,
                                                             const bf16 *__restrict__ wk, const float *__restrict__ bias,
                                                             int Cout, float *__restrict__ out) {
    extern __shared__ float sw[];  // (9, Cin, 32) fp32: the block's group of output channels
    const int Cin = nframes * 12 + 1, o0 = blockIdx.y * kGroup;
    const int nw = 9 * Cin * kGroup;
    for (int i = threadIdx.x; i < nw; i += blockDim.x) sw[i] = __bfloat162float(wk[(size_t)(i / kGroup) * Cout + o0 + i % kGroup]);
    __syncthreads();
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (int64_t)h * w) return;
    const int y = (int)(p / w), x = (int)(p % w);
    float acc[kGroup];
#pragma unroll
    for (int o = 0; o < kGroup; ++o) acc[o] = bias[o0 + o];
    for (int ky = 0; ky < 3; ++ky) {
        const int yy = y + ky - 1;
        if (yy < 0 || yy >= h) continue;
        for (int kx = 0; kx < 3; ++kx) {
            const int xx = x + kx - 1;
            if (xx < 0 || xx >= w) continue;
            const float *wt = sw + (size_t)(ky * 3 + kx) * Cin * kGroup;
            const size_t q = ((size_t)yy * w + xx) * 12;
#pragma unroll
            for (int k = 0; k < kMaxFrames; ++k) {  // unrolled: fr.p[k] stays in the param space
                if (k >= nframes) break;
                // 12 bf16 = 24 B, 8-byte aligned (token stride 24 B); with a shift map, the token of
                // the frame moved onto the centre, gathered per colour quad
                __align__(8) bf16 v[12];
                uint2 *dst = reinterpret_cast<uint2 *>(v);
                if (fr.shift[k]) {
                    int dy, dx;
                    tile_shift::shift_at(TileShift{fr.shift[k], fr.stride, fr.tile}, yy, xx, dy, dx);
                    uint64_t *d64 = reinterpret_cast<uint64_t *>(v);
#pragma unroll
                    for (int c = 0; c < 3; ++c)
                        d64[c] = tile_shift::s2d_quad(reinterpret_cast<const uint16_t *>(fr.p[k]), h, w, yy, xx, c, dy, dx);
                } else {
                    const uint2 *src = reinterpret_cast<const uint2 *>(fr.p[k] + q);
                    dst[0] = src[0];
                    dst[1] = src[1];
                    dst[2] = src[2];
                }
#pragma unroll
                for (int ci = 0; ci < 12; ++ci) {
                    const float a = __bfloat162float(v[ci]);
                    const float4 *wr = reinterpret_cast<const float4 *>(wt + (size_t)(k * 12 + ci) * kGroup);
#pragma unroll
                    for (int o4 = 0; o4 < kGroup / 4; ++o4) {
                        const float4 b = wr[o4];
                        acc[o4 * 4 + 0] = fmaf(a, b.x, acc[o4 * 4 + 0]);
                        acc[o4 * 4 + 1] = fmaf(a, b.y, acc[o4 * 4 + 1]);
                        acc[o4 * 4 + 2] = fmaf(a, b.z, acc[o4 * 4 + 2]);
                        acc[o4 * 4 + 3] = fmaf(a, b.w, acc[o4 * 4 + 3]);
                    }
                }
            }
            const float4 *wr = reinterpret_cast<const float4 *>(wt + (size_t)(Cin - 1) * kGroup);
#pragma unroll
            for (int o4 = 0; o4 < kGroup / 4; ++o4) {
                const float4 b = wr[o4];
                acc[o4 * 4 + 0] = fmaf(sigma_map, b.x, acc[o4 * 4 + 0]);
                acc[o4 * 4 + 1] = fmaf(sigma_map, b.y, acc[o4 * 4 + 1]);
                acc[o4 * 4 + 2] = fmaf(sigma_map, b.z, acc[o4 * 4 + 2]);
                acc[o4 * 4 + 3] = fmaf(sigma_map, b.w, acc[o4 * 4 + 3]);
            }
        }
    }
    float4 *o = reinterpret_cast<float4 *>(out + (size_t)p * Cout + o0);
#pragma unroll
    for (int o4 = 0; o4 < kGroup / 4; ++o4)
        o[o4] = make_float4(acc[o4 * 4], acc[o4 * 4 + 1], acc[o4 * 4 + 2], acc[o4 * 4 + 3]);
}

}  // namespace

int fusion_conv3x3_direct(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w,
                          const bf16 *wk, const float *bias, int Cout, float *out, const TileShift *shifts) {
    DN_REQUIRE(frames && wk && bias && out, "null pointer");
    DN_REQUIRE(nframes >= 1 && nframes <= kMaxFrames, "nframes " + std::to_string(nframes) + " outside 1..8");
    DN_REQUIRE(Cout >= kGroup && Cout <= kMaxCout && Cout % kGroup == 0,
               "Cout " + std::to_string(Cout) + " (this kernel is built for multiples of 32 up to 256)");
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    FramePtrs fp{};
    for (int k = 0; k < nframes; ++k) {
        DN_REQUIRE(frames[k], "frame " + std::to_string(k) + " is null");
        DN_REQUIRE(((uintptr_t)frames[k] & 7) == 0, "frame pointer not 8-byte aligned");
        fp.p[k] = frames[k];
    }
    TRY(tile_shifts_check(ctx, shifts, nframes, w, fp.shift, &fp.stride, &fp.tile));
    DN_REQUIRE(((uintptr_t)out & 15) == 0, "out not 16-byte aligned");
    const size_t smem = (size_t)9 * (nframes * 12 + 1) * kGroup * sizeof(float);
    TRY(smem_kernel(ctx, (const void *)fusion_conv3x3_kernel, "fusion_conv3x3_kernel", 128, smem));
    unsigned blocks;
    DN_REQUIRE(grid_1d((int64_t)h * w, 128, &blocks), "grid too large");
    fusion_conv3x3_kernel<<<dim3(blocks, Cout / kGroup), 128, smem, ctx.stream>>>(fp, nframes, sigma_map, h, w, wk, bias,
                                                                                  Cout, out);
    return launch_check(ctx, "fusion_conv3x3_kernel");
}

int fusion_conv3x3(Ctx &ctx, const bf16 *const *frames, int nframes, float sigma_map, int h, int w, const bf16 *wk,
                   const float *bias, int Cout, float *out, const TileShift *shifts) {
    const size_t smem = fusion_conv3x3_tc_smem(nframes, Cout);
    int optin = 0;
    if (smem && cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device) == cudaSuccess &&
        smem <= (size_t)optin)
        return fusion_conv3x3_tc(ctx, frames, nframes, sigma_map, h, w, wk, bias, Cout, out, shifts);
    return fusion_conv3x3_direct(ctx, frames, nframes, sigma_map, h, w, wk, bias, Cout, out, shifts);
}

}  // namespace cuda
}  // namespace denoise
