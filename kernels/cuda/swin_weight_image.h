// The weight image of one Swin block for the fused kernel (swin_block_fused.cu): every parameter
// of the block packed once at load time into one byte buffer, in the order and grouping in which
// the kernel's loads read it. Host code (g++-compilable, no CUDA header); the layout functions are
// also compiled into the kernel (constexpr, __host__ __device__ under nvcc).
//
// Sections, in image order (byte offsets in SwinImageLayout::off, each a multiple of 16, the
// sections tile the image with no gap):
//   ln1_g, ln1_b            fp32 (C)             LayerNorm 1 gamma, beta
//   qkv_w                   bf16 fragments       qkv.weight (3C, C), rows [q | k | v], heads of HD
//   qkv_b                   fp32 (3C)            qkv.bias
//   relb                    fp32 fragments       relative position bias gathered to (heads, 64, 64),
//                                                times log2(e) (the kernel's softmax uses exp2)
//   proj_w, proj_b          bf16 fragments, fp32 proj (C, C), bias (C)
//   ln2_g, ln2_b            fp32 (C)
//   fc1_w, fc1_b            bf16 fragments, fp32 fc1 (4C, C), bias (4C)
//   fc2_w, fc2_b            bf16 fragments, fp32 fc2 (C, 4C), bias (C)
// Only the four GEMM weights are rounded to bf16 (round to nearest even); LayerNorm parameters,
// biases and the bias table stay fp32 (they are 1% of the bytes, and rounding the bias table would
// move softmax logits by up to |b| 2^-9).
//
// GEMM weight fragments. The kernel computes out = act x W^T with mma.sync.m16n8k16 (A = the
// activations from shared memory, B = W^T). W (N, K) row-major (PyTorch's layout) is cut into
// units of 8 rows (an n-tile nt) x 32 columns (a k-pair kp: two k16 steps), 512 bytes each. Inside
// a unit, lane l = 4 g + t (g = l / 4, t = l % 4) owns 16 contiguous bytes, the B fragments
// b0, b1 of both k steps for output row n = 8 nt + g, k0 = 32 kp:
//   W[n][k0+2t], W[n][k0+2t+1]      | W[n][k0+8+2t],  W[n][k0+9+2t]     (k step 2 kp:   b0 | b1)
//   W[n][k0+16+2t], W[n][k0+17+2t]  | W[n][k0+24+2t], W[n][k0+25+2t]    (k step 2 kp+1: b0 | b1)
// (the lower-index element in the low 16 bits of each 32-bit register). One 16-byte load per lane
// fetches a whole 512-byte unit per warp: four full 128-byte lines. Columns past K (K = 48: the
// second half of the last k-pair) are zero. Units are ordered n-tile-major (nt * KP + kp) for qkv,
// proj and fc1, and k-pair-major (kp * NT + nt) for fc2, so that each MLP chunk (HC hidden units:
// an n-tile range of fc1, a k-pair range of fc2) reads one contiguous byte range.
//
// Bias-table fragments: for head h and query m-tile mt (rows 16 mt .. 16 mt + 15 of the window),
// lane l holds 32 floats at ((h * 4 + mt) * 32 + l) * 32: for key n-tile j = 0..7, accumulator
// register r = 0..3 at j * 4 + r, which is the score S[16 mt + g + 8 (r / 2)][8 j + 2 t + r % 2]
// of the mma C-fragment layout. Eight 16-byte loads per lane.
#ifndef DENOISE_CUDA_SWIN_WEIGHT_IMAGE_H
#define DENOISE_CUDA_SWIN_WEIGHT_IMAGE_H

#include <cstdint>
#include <string>
#include <vector>

#include "../model.h"

#if defined(__CUDACC__)
#define DN_HOSTDEV __host__ __device__
#else
#define DN_HOSTDEV
#endif

namespace denoise {
namespace cuda {

constexpr int kSwinWindow = 8;   // window side (model v1)
constexpr int kSwinTokens = 64;  // tokens per window
constexpr int kSwinMlpRatio = 4;

enum SwinSection {
    kSecLn1G,
    kSecLn1B,
    kSecQkvW,
    kSecQkvB,
    kSecRelB,
    kSecProjW,
    kSecProjB,
    kSecLn2G,
    kSecLn2B,
    kSecFc1W,
    kSecFc1B,
    kSecFc2W,
    kSecFc2B,
    kSwinSections
};

// Bytes of a GEMM weight (N, K) in fragment order: (N / 8) n-tiles x ceil(K / 32) k-pairs x 512.
DN_HOSTDEV constexpr uint32_t swin_gemm_image_bytes(int N, int K) {
    return (uint32_t)(N / 8) * (uint32_t)((K + 31) / 32) * 512u;
}

// Unit index (512-byte units) of (n-tile nt, k-pair kp) in a GEMM section of NT n-tiles and KP
// k-pairs.
DN_HOSTDEV constexpr uint32_t swin_gemm_unit(bool kp_major, int nt, int kp, int NT, int KP) {
    return kp_major ? (uint32_t)(kp * NT + nt) : (uint32_t)(nt * KP + kp);
}

struct SwinImageLayout {
    int C = 0, heads = 0;
    uint32_t off[kSwinSections + 1] = {};  // byte offsets; off[kSwinSections] = image bytes
    DN_HOSTDEV constexpr uint32_t bytes(int s) const { return off[s + 1] - off[s]; }
    DN_HOSTDEV constexpr uint32_t total() const { return off[kSwinSections]; }
};

// Section sizes for a block of C channels and `heads` heads (C a multiple of 16).
DN_HOSTDEV constexpr SwinImageLayout swin_image_layout(int C, int heads) {
    SwinImageLayout L;
    L.C = C;
    L.heads = heads;
    const int Ch = kSwinMlpRatio * C;
    uint32_t sz[kSwinSections] = {};
    sz[kSecLn1G] = sz[kSecLn1B] = sz[kSecLn2G] = sz[kSecLn2B] = 4u * C;
    sz[kSecQkvW] = swin_gemm_image_bytes(3 * C, C);
    sz[kSecQkvB] = 4u * 3 * C;
    sz[kSecRelB] = 4u * heads * kSwinTokens * kSwinTokens;
    sz[kSecProjW] = swin_gemm_image_bytes(C, C);
    sz[kSecProjB] = 4u * C;
    sz[kSecFc1W] = swin_gemm_image_bytes(Ch, C);
    sz[kSecFc1B] = 4u * Ch;
    sz[kSecFc2W] = swin_gemm_image_bytes(C, Ch);
    sz[kSecFc2B] = 4u * C;
    uint32_t o = 0;
    for (int s = 0; s < kSwinSections; ++s) {
        L.off[s] = o;
        o += sz[s];
    }
    L.off[kSwinSections] = o;
    return L;
}

// Name of a section ("qkv_w", ...), for descriptors and messages.
const char *swin_section_name(int s);

// fp32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN).
uint16_t swin_bf16_bits(float f);

// Pack block `b` (kernels/cpu/unet.h's BlockW: PyTorch-layout fp32 weights, relative position bias
// already gathered to (heads, 64, 64)) for C channels and `heads` heads into *image
// (swin_image_layout(C, heads).total() bytes). C a multiple of 16 in 16..256, C / heads a multiple
// of 16 up to 64; the linear/norm shapes in `b` must match C. Returns 0, or DENOISE_EINVAL with
// *err naming what does not match.
int swin_weight_image_pack(const BlockW &b, int C, int heads, std::vector<uint8_t> *image, std::string *err);

}  // namespace cuda
}  // namespace denoise

#endif
