// The plan and the weight image of the Hopper MLP probe (kernels/cuda/swin_mlp_wgmma.cu): the
// tile, warpgroups, pipeline stages and shared memory of each kernel built, the shared-memory
// operand layout of its wgmma B operands (the PTX canonical K-major layout without swizzle), the
// permutation of fc1's K axis that makes the LayerNorm's reads conflict-free, and the packer that
// lays one block's MLP weights out in exactly the bytes the kernel copies into shared memory.
// Host code (g++-compilable, no CUDA header); the layout functions are constexpr and, under nvcc,
// __host__ __device__, so the kernel and its CPU test (tests/unit/swin_mlp_wgmma_test.cpp) use the
// same ones.
//
// Weight image (one block, one hidden-chunk width HC; byte offsets from the image start):
//   params   fp32: ln2 gamma (C) | ln2 beta (C) | fc1 bias (4C) | fc2 bias (C), padded to 128 B
//   chunk ch (NCH = 4C / HC chunks, each chunk_bytes = 4 C HC, 128-byte multiples), for hidden
//            units ch HC .. ch HC + HC - 1:
//     W1c    the fc1 B operand, K = C (fc1's input channels, permuted: swin_mlp_fc1_channel) x
//            N = HC (hidden units): B[k][n] = fc1.weight[ch HC + n][swin_mlp_fc1_channel(k)]
//     W2c    the fc2 B operand, K = HC (hidden units ch HC + k) x N = C (output channels):
//            B[k][n] = fc2.weight[n][ch HC + k]
//   both bf16 (round to nearest even), at swin_mlp_b_offset(k, n, N): the K-major canonical
//   layout without swizzle of PTX ISA "Asynchronous Warpgroup Level Matrix Shared Memory Layout"
//   (core matrices of 8 rows (n) x 16 bytes (8 k), each 128 contiguous bytes; the two core
//   matrices of a k16 step that are adjacent in K are LBO = 128 B apart, those adjacent in N (8
//   rows further) SBO = 256 B apart; k-step s of a K x N operand starts 32 N s bytes in).
// The kernel copies params once and the chunks once (C 64: all of them stay resident) or once per
// round of tiles through a ring of WST stages (C 128: 256 KB of weights do not fit), each with one
// cp.async.bulk: the image is the shared-memory image, no reformatting on the device.
#ifndef DENOISE_CUDA_SWIN_MLP_WGMMA_IMAGE_H
#define DENOISE_CUDA_SWIN_MLP_WGMMA_IMAGE_H

#include <cstdint>
#include <string>
#include <vector>

#include "../model.h"

#if defined(__CUDACC__)
#define DN_MLP_HD __host__ __device__
#else
#define DN_MLP_HD
#endif

namespace denoise {
namespace cuda {

constexpr int kMlpRows = 64;              // tokens per tile: one wgmma M (m64nNk16), one consumer warpgroup
constexpr int kMlpXPad = 8;               // fp32 beyond C per x-tile row (bank-conflict-free reads, below)
constexpr uint32_t kMlpSmemMax = 232448;  // dynamic shared memory per block on sm_90 (227 KB opt-in)
constexpr uint32_t kMlpLbo = 128;         // B operand: bytes between the core matrices adjacent in K
constexpr uint32_t kMlpSbo = 256;         // B operand: bytes between the core matrices adjacent in N
constexpr int kMlpProducerRegs = 40;      // setmaxnreg of the producer warpgroup

// The kernels built, X(C, HC, NCW, TANH): C channels (hidden 4C), hidden chunks of HC units, NCW
// consumer warpgroups, TANH 0: GELU's tanh with tanh.approx.f32 (the fused kernel's), 1: with
// tanh.approx.bf16x2 (half the MUFU operations; tanh rounded to bf16 before the last multiply-add,
// the GELU output is rounded to bf16 after it in both forms). Shared memory and registers:
// swin_mlp_plan; docs/fused.md "Hopper path: first probe".
#define SWIN_MLP_WGMMA_KERNELS(X) \
    X(64, 128, 2, 0)              \
    X(64, 128, 2, 1)              \
    X(64, 64, 2, 0)               \
    X(64, 64, 3, 0)               \
    X(128, 64, 2, 0)              \
    X(128, 64, 2, 1)

struct SwinMlpPlan {
    int C = 0, HC = 0, NCW = 0, tanh = 0;
    int NCH = 0;            // hidden chunks (4C / HC)
    int WST = 0;            // weight stages in shared memory (== NCH: resident, loaded once per CTA)
    int XST = 0;            // x-tile stages per consumer warpgroup
    bool resident = false;  // every chunk in shared memory for the whole kernel
    uint32_t params_bytes = 0, chunk_bytes = 0, w1_bytes = 0, image_bytes = 0;
    uint32_t x_stride = 0;       // bytes per x-tile row: 4 (C + kMlpXPad)
    uint32_t x_stage_bytes = 0;  // kMlpRows x_stride
    int nbar = 0;                // mbarriers: params, w_full[WST], w_empty[WST], x_full[NCW XST], x_empty[NCW XST]
    uint32_t off_bar = 0, off_params = 0, off_w = 0, off_x = 0, smem = 0;
    int threads = 0;        // 128 (NCW + 1): the producer warpgroup, then the consumers
    int regs_consumer = 0;  // setmaxnreg of the consumer warpgroups
    bool ok = false;
};

DN_MLP_HD constexpr uint32_t swin_mlp_align128(uint32_t b) { return (b + 127u) & ~127u; }

// The plan of kernel (C, HC, NCW, TANH); ok false for what the kernel does not implement: C 64 or
// 128 (the wgmma shapes written out are N 64 and 128, and the K permutation needs C / 16 even),
// HC 64 or 128 dividing 4C, NCW 2 or 3, and a shared-memory total within kMlpSmemMax.
DN_MLP_HD constexpr SwinMlpPlan swin_mlp_plan(int C, int HC, int NCW, int tanh) {
    SwinMlpPlan P;
    P.C = C;
    P.HC = HC;
    P.NCW = NCW;
    P.tanh = tanh;
    if (!(C == 64 || C == 128) || !(HC == 64 || HC == 128) || (4 * C) % HC || !(NCW == 2 || NCW == 3) ||
        !(tanh == 0 || tanh == 1))
        return P;
    P.NCH = 4 * C / HC;
    P.params_bytes = swin_mlp_align128(4u * 7u * (uint32_t)C);
    P.w1_bytes = 2u * (uint32_t)C * (uint32_t)HC;
    P.chunk_bytes = 2u * P.w1_bytes;
    P.image_bytes = P.params_bytes + (uint32_t)P.NCH * P.chunk_bytes;
    P.x_stride = 4u * (uint32_t)(C + kMlpXPad);
    P.x_stage_bytes = (uint32_t)kMlpRows * P.x_stride;
    P.XST = 2;
    P.threads = 128 * (NCW + 1);
    // consumers get what the producer gives back: 64 K registers per SM at one CTA per SM
    const int regs = (65536 - 128 * kMlpProducerRegs) / (128 * NCW) / 8 * 8;
    P.regs_consumer = regs > 240 ? 240 : regs;
    for (int pass = 0; pass < 2; ++pass) {
        P.resident = pass == 0;
        P.WST = P.resident ? P.NCH : 2;
        P.nbar = 1 + 2 * P.WST + 2 * NCW * P.XST;
        P.off_bar = 0;
        P.off_params = swin_mlp_align128(8u * (uint32_t)P.nbar);
        P.off_w = P.off_params + P.params_bytes;
        P.off_x = P.off_w + (uint32_t)P.WST * P.chunk_bytes;
        P.smem = P.off_x + (uint32_t)(NCW * P.XST) * P.x_stage_bytes;
        if (P.smem <= kMlpSmemMax) {
            P.ok = true;
            return P;
        }
    }
    return P;
}

// The 16-byte chunk (4 channels) of an x-tile row that lane t (0..3) of a quad reads for fc1's
// k step s: 8 (s / 2) + 2 (s % 2) + (t % 2) + 4 (t / 2). Over s and t every chunk once (C / 16
// even); at an x-tile row stride of C + 8 fp32 the 8 lanes of a quarter warp (rows g, g + 1,
// t 0..3) fall in 8 different 16-byte bank groups, so the float4 reads of the LayerNorm are
// conflict-free.
DN_MLP_HD constexpr int swin_mlp_chunk_of(int t, int s) { return 8 * (s >> 1) + 2 * (s & 1) + (t & 1) + 4 * (t >> 1); }

// fc1's input channel at logical k (0..C-1) of the A operand: the wgmma A fragment gives lane t of
// a quad k = 16 s + 2t, 2t + 1 (registers 0, 1) and 16 s + 2t + 8, 2t + 9 (registers 2, 3); the
// lane fills them with channels 4 q .. 4 q + 3 of its chunk q = swin_mlp_chunk_of(t, s), in that
// order. The packer puts fc1's weights in the same order, so the product is the same sum.
DN_MLP_HD constexpr int swin_mlp_fc1_channel(int k) {
    return 4 * swin_mlp_chunk_of(((k & 15) & 7) >> 1, k >> 4) + ((k & 1) + 2 * ((k & 15) >> 3));
}

// Byte offset of element (k, n) of a K x N bf16 B operand in the canonical K-major layout without
// swizzle (see the top): k step k / 16 (32 N bytes each), core-matrix row group n / 8 (SBO),
// k half (k / 8) % 2 (LBO), row n % 8 (16 B), element k % 8 (2 B).
DN_MLP_HD constexpr uint32_t swin_mlp_b_offset(int k, int n, int N) {
    return (uint32_t)(k >> 4) * 32u * (uint32_t)N + (uint32_t)(n >> 3) * kMlpSbo + (uint32_t)((k >> 3) & 1) * kMlpLbo +
           (uint32_t)(n & 7) * 16u + (uint32_t)(k & 7) * 2u;
}

// Bytes of one k16 step of a B operand with N columns.
DN_MLP_HD constexpr uint32_t swin_mlp_kstep_bytes(int N) { return 32u * (uint32_t)N; }

// The wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format") of a B operand
// starting at shared-memory byte address `addr`: bits 0-13 addr >> 4, 16-29 LBO >> 4, 32-45 SBO
// >> 4, 49-51 base offset 0, 62-63 swizzle mode 0 (none).
DN_MLP_HD constexpr uint64_t swin_mlp_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(kMlpLbo >> 4) << 16) | ((uint64_t)(kMlpSbo >> 4) << 32);
}

// Byte offset of chunk ch in the image (and, resident, of weight stage ch in shared memory
// relative to off_w: the chunks are copied as they lie).
DN_MLP_HD constexpr uint32_t swin_mlp_chunk_offset(const SwinMlpPlan &P, int ch) {
    return P.params_bytes + (uint32_t)ch * P.chunk_bytes;
}

// Pack the MLP half of block `b` (norm2, fc1, fc2: PyTorch layout fp32) for C channels and hidden
// chunks of HC into *image (swin_mlp_plan(C, HC, 2, 0).image_bytes bytes: the image depends on C
// and HC only). Returns 0, or DENOISE_EINVAL with *err naming what does not match.
int swin_mlp_image_pack(const BlockW &b, int C, int HC, std::vector<uint8_t> *image, std::string *err);

}  // namespace cuda
}  // namespace denoise

#endif
