// Fused patch merge and patch expand (+ skip concat + skip linear) of the U-Net on tensor cores
// (mma.sync.m16n8k16 bf16, fp32 accumulate; kernels/cuda/warp_mma.h), each one launch that reads
// the fp32 maps once and writes the fp32 result once: no intermediate in DRAM. Same math as
// patch.cu's ops + linear.cu's GEMMs (weights/denoise_train/model.py PatchMerge, PatchExpand, skip linears),
// which stay the correct-first path they are checked against.
//
// patch_merge_tc: out (H/2, W/2, Co) fp32 = LN(s2d(x)) W^T, x (H, W, C) fp32, s2d 2x2 to 4C
// channels, LayerNorm over the 4C (fp32 statistics, two-pass, biased variance, eps; gamma/beta
// fp32), the result rounded once to bf16 (the GEMM operand, as merge_s2d_layernorm stores it),
// W (Co, 4C) bf16, no bias. CTA: 64 consecutive output tokens (row-major over the output map,
// so a tile may wrap a row), 8 warps. Phase 1: a warp takes 8 / (C / 32) tokens at a time (8
// float4 loads per lane in flight), lane l holds float4 l + 32 i of each token's 4C vector in k' order (sub-pixel-major: 16 consecutive k' = 16 channels of one
// source token, a 64-byte run; patch_tc.h folds the permutation into W and gamma/beta), LN,
// bf16 into shared memory A (64, 4C + 8). Phase 2: warp w computes rows 32 (w % 2) .. + 31 (two
// m16 tiles) for the column groups w / 2, w / 2 + 4, ... of 16 columns; A by ldmatrix, B from the
// packed weights (patch_tc.h) in global memory, one 16-byte load per lane per k step (L1/L2
// hits: every CTA reads the same Co x 4C matrix); fp32 stores straight from the accumulators.
// Cost per output token: 8 C Co FLOP (model v1: C 32, Co 64: 16.4 K; C 64, Co 128: 65.5 K) for
// DRAM 16 C B read + 4 Co B written (768 B: 21 FLOP/B; 1.5 KB: 43 FLOP/B): bandwidth-bound on an
// H200 (4.8 TB/s; mma.sync's ridge is above 100 FLOP/B); a C 128 merge is 85 FLOP/B, near it. At
// 4K (1920 x 1088 tokens) merge0 is 8.6 GFLOP and 401 MB (~0.08 ms at the bandwidth), merge1 8.6
// GFLOP and 200 MB. Weights: Co 4C 2 B read from L2 per CTA (C 32: 256 B per output token).
// Shared memory 512 C + 1 KB (C 32: 17 KB; C 256: 132 KB). The v3 study's wide64 merge0 (C 64, Co
// 64: 32.8 K FLOP for 1 KB + 256 B per output token) takes 33,792 B like v1's merge1.
//
// patch_expand_tc: out (2h, 2w, Co) fp32 = [d2s(lo We^T + be) | skip] Ws^T + bs, lo (h, w, C)
// fp32 (rounded to bf16 for the GEMM, as cast_to_bf16), We (C2, C) bf16, be fp32, d2s as
// d2s_nhwc (Cu = C2 / 4 channels per sub-pixel), the expand's result rounded to bf16 (the skip
// GEMM's operand), skip (2h, 2w, Cs) fp32, Ws (Co, Cu + Cs) bf16, bs fp32. The skip map enters
// the skip GEMM as two bf16 parts, hi = bf16(s) and lo = bf16(s - hi) (s to about 2^-17 of its
// size), against the same bf16 weights: the operand is [d2s(up) | hi | lo] against [Wu | Ws | Ws]
// (patch_tc.h). The skip map is the encoder's fp32 stream passed straight to the decoder:
// rounding it once to bf16 was the one rounding of the fused path that measurably cost PSNR
// (weights/experiments/bf16_rounding.py: about 0.01 dB on the bedroom sample,
// docs/journal/2026-12-07-cuda-engine-gpu-runs.md).
// CTA: 32 consecutive low-res tokens (row-major, may wrap) = 128 output tokens (row 4 r + j of
// the tile: low-res token r, sub-pixel j = 2 dy + dx), 8 warps. Phase 1: the 32 lo tokens (one
// contiguous run) -> bf16 A1 (32, C + 8); the 128 skip tokens -> hi and lo into bf16
// Z[:, Cu ..] (128, Kz + 8), Kz = Cu + 2 Cs. Phase 2: the expand GEMM (32 x C2, K C), warp w:
// both m16 tiles, column groups w, w + 8, ...; its epilogue adds be and writes bf16 pairs into
// Z[4 r + j, c] (the packed column order u' = j Cu + c makes an n8 tile one sub-pixel's
// channels): the d2s and the concat happen in shared memory. Phase 3: the skip GEMM (128 x Co,
// K Kz), warp w: rows 32 (w % 4) .., column groups w / 4, + 2, ...; + bs, fp32 stores to the
// output tokens. out may be skip when Co = Cs (the engine writes y in the encoder map's buffer):
// a CTA reads exactly the skip tokens it writes, all before its first barrier.
// Cost per low-res token: 2 C C2 + 8 (Cu + 2 Cs) Co FLOP (v1 expand1 C 128: 164 K; expand0 C 64:
// 41 K) for 4 C + 16 Cs B read and 16 Co B written (C 128: 2.5 KB, 64 FLOP/B; C 64: 1.25 KB,
// 33 FLOP/B): bandwidth-bound. At 4K expand0 reads 400 MB and writes 267 MB (~0.14 ms), expand1
// 200 + 134 MB. Shared memory 64 (C + 8) + 256 (Cu + 2 Cs + 8) B (C 128: 59 KB). wide64's expand0
// (C 64 -> C2 256, Cs = Co 64: 2 x 64 x 256 + 8 x 192 x 64 = 131 K FLOP per low-res token for 256
// + 1024 B read and 1 KB written) takes 55,808 B; its expand1 is v1's (C 128 -> 256, Cs 64).
//
// Limits (refused with DENOISE_EINVAL and a message otherwise; patch_*_tc_refusal says why):
// merge C 32..256 in steps of 32, Co a multiple of 16 up to 1024; expand C 16..512 and Cs, Co
// multiples of 16, C2 a multiple of 64 (Cu a multiple of 16); 16-byte aligned maps; shared memory
// within the device's opt-in limit. The CTA bodies (patch_tc::merge_cta, expand_cta) are written
// against warp_mma.h so that tests/emu/patch_tc_emu_test.cpp runs this source on the CPU emulator.
#include "patch_tc.h"
#include "warp_mma.h"

#if defined(DENOISE_WARP_EMULATION)
#include <cstddef>
#include <cstring>
#define PT_UNROLL_4
#else
#define PT_UNROLL_4 _Pragma("unroll 4")
#endif

namespace denoise {
namespace cuda {
namespace patch_tc {

using namespace warp;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kMergeM = 64;   // output tokens per merge CTA
constexpr int kExpandL = 32;  // low-res tokens per expand CTA (4 x as many output tokens)
constexpr int kMaxQ = 8;      // float4 per lane in flight in the merge's phase 1 (4C <= 1024)

struct MergeArgs {
    const float *x;     // (H, W, C) fp32, 16-byte aligned
    int H, W, C;
    const void *wp;     // packed (Co, 4C) bf16 (patch_tc.h pack_merge)
    const float *g, *b; // LayerNorm gamma / beta (4C) in k' order
    float eps;
    int Co;
    float *out;         // (H/2, W/2, Co) fp32
    int64_t ntok;       // H/2 W/2
};

struct ExpandArgs {
    const float *lo;    // (h, w, C) fp32
    int h, w, C;
    const void *we;     // packed (C2, C) bf16 (pack_expand), columns in u' order
    const float *be;    // (C2) fp32 in u' order
    int C2;
    const float *skip;  // (2h, 2w, Cs) fp32; may be out
    int Cs;
    const void *ws;     // packed (Co, C2/4 + 2 Cs) bf16 (pack_expand: [Wu | Ws | Ws])
    const float *bs;    // (Co) fp32
    int Co;
    float *out;         // (2h, 2w, Co) fp32
};

DN_HD size_t merge_smem(int C) { return (size_t)kMergeM * (4 * C + 8) * 2; }
// Cu = C2 / 4 channels of d2s(up), Cs of the skip map (two bf16 parts each)
DN_HD size_t expand_smem(int C, int Cu, int Cs) {
    return ((size_t)kExpandL * (C + 8) + (size_t)4 * kExpandL * (Cu + 2 * Cs + 8)) * 2;
}

#if defined(DENOISE_WARP_EMULATION)
inline void store8(uint16_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline void store4(uint16_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void store2f(float *p, float a, float b) {
    p[0] = a;
    p[1] = b;
}
#else
DN_DEVI void store8(uint16_t *p, uint64_t v) { *reinterpret_cast<uint64_t *>(p) = v; }
DN_DEVI void store4(uint16_t *p, uint32_t v) { *reinterpret_cast<uint32_t *>(p) = v; }
DN_DEVI void store2f(float *p, float a, float b) { *reinterpret_cast<float2 *>(p) = make_float2(a, b); }
#endif

DN_DEVI uint64_t pack4(float a, float b, float c, float d) {
    return (uint64_t)pack_bf16x2(a, b) | ((uint64_t)pack_bf16x2(c, d) << 32);
}

// One warp: rows row0 .. row0 + 31 (two m16 tiles) of A (bf16, row stride sa elements, shared
// memory) times the packed B (patch_tc.h; K a multiple of 16) for the 16-column groups ng_first,
// ng_first + ng_step, ... < ng_end; epi(row, column, v0, v1) receives each pair of adjacent
// columns (column even) of the fp32 result.
template <class Epi>
DN_DEVI void warp_gemm(const uint16_t *As, int sa, int row0, int K, const void *Bp, int ng_first, int ng_step, int ng_end,
                       int lane, Epi &&epi) {
    const int ksn = K / 16, g = lane >> 2, t = lane & 3;
    // ldmatrix row of this lane: matrix lane / 8 = (row half (lane / 8) & 1, column half lane / 16)
    const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lcol = (lane >> 4) * 8;
    const uint16_t *a0 = As + (size_t)(row0 + lrow) * sa + lcol, *a1 = a0 + (size_t)16 * sa;
    const u32x4 *B = static_cast<const u32x4 *>(Bp);
    DN_UNROLL_1
    for (int ng = ng_first; ng < ng_end; ng += ng_step) {
        float acc[2][2][4];
        DN_UNROLL
        for (int mi = 0; mi < 2; ++mi)
            DN_UNROLL
            for (int h = 0; h < 2; ++h)
                DN_UNROLL
                for (int e = 0; e < 4; ++e) acc[mi][h][e] = 0.f;
        const u32x4 *bp = B + (size_t)ng * ksn * 32 + lane;
        u32x4 bn = ldg4(bp);
        for (int ks = 0; ks < ksn; ++ks) {
            const u32x4 b = bn;
            if (ks + 1 < ksn) bn = ldg4(bp + (size_t)(ks + 1) * 32);
            uint32_t fa0[4], fa1[4];
            ldsm_x4(fa0, a0 + 16 * ks);
            ldsm_x4(fa1, a1 + 16 * ks);
            mma_bf16(acc[0][0], fa0, b.x, b.y);
            mma_bf16(acc[0][1], fa0, b.z, b.w);
            mma_bf16(acc[1][0], fa1, b.x, b.y);
            mma_bf16(acc[1][1], fa1, b.z, b.w);
        }
        // C fragment: rows g / g + 8 of each m16 tile, columns 2 t, 2 t + 1 of each n8 tile
        DN_UNROLL
        for (int mi = 0; mi < 2; ++mi)
            DN_UNROLL
            for (int h = 0; h < 2; ++h)
                DN_UNROLL
                for (int hh = 0; hh < 2; ++hh)
                    epi(row0 + 16 * mi + g + 8 * hh, 16 * ng + 8 * h + 2 * t, acc[mi][h][2 * hh], acc[mi][h][2 * hh + 1]);
    }
}

// Merge CTA `cta` (output tokens 64 cta ..), thread tid of kThreads, smem merge_smem(C) bytes,
// C = 32 NQ. Phase 1 loads 8 / NQ tokens per warp at once (8 float4 per lane in flight).
template <int NQ>
DN_DEVI void merge_cta(const MergeArgs &a, int cta, int tid, uint8_t *smem) {
    constexpr int TPI = kMaxQ / NQ;  // tokens per warp iteration
    constexpr int C = 32 * NQ, K = 4 * C, sa = K + 8;
    const int wo = a.W / 2;
    uint16_t *As = reinterpret_cast<uint16_t *>(smem);
    const int64_t t0 = (int64_t)cta * kMergeM;
    const int warp_id = tid >> 5, lane = tid & 31;
    constexpr float inv_k = 1.0f / (float)K;
    for (int r0 = warp_id * TPI; r0 < kMergeM; r0 += kWarps * TPI) {
        f32x4 v[TPI][NQ];
        DN_UNROLL
        for (int tk = 0; tk < TPI; ++tk) {
            const int64_t tok = t0 + r0 + tk;
            const bool valid = r0 + tk < kMergeM && tok < a.ntok;
            const int yo = valid ? (int)(tok / wo) : 0, xo = valid ? (int)(tok - (int64_t)yo * wo) : 0;
            DN_UNROLL
            for (int i = 0; i < NQ; ++i) {
                v[tk][i] = f32x4{0.f, 0.f, 0.f, 0.f};
                if (valid) {
                    // k' = 4 (lane + 32 i): sub-pixel j = k' / C, channel k' % C of source token (2 yo + dy, 2 xo + dx)
                    const int k = 4 * (lane + 32 * i), j = k / C, c = k - j * C;
                    const int y = 2 * yo + (j >> 1), x = 2 * xo + (j & 1);
                    v[tk][i] = ldg4f(a.x + ((size_t)y * a.W + x) * C + c);
                }
            }
        }
        float mean[TPI], rstd[TPI];
        DN_UNROLL
        for (int tk = 0; tk < TPI; ++tk) {
            float s = 0.f;
            DN_UNROLL
            for (int i = 0; i < NQ; ++i) s += (v[tk][i].x + v[tk][i].y) + (v[tk][i].z + v[tk][i].w);
            mean[tk] = warp_sum(s) * inv_k;
        }
        DN_UNROLL
        for (int tk = 0; tk < TPI; ++tk) {
            float q = 0.f;
            DN_UNROLL
            for (int i = 0; i < NQ; ++i) {
                const float d0 = v[tk][i].x - mean[tk], d1 = v[tk][i].y - mean[tk], d2 = v[tk][i].z - mean[tk],
                            d3 = v[tk][i].w - mean[tk];
                q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
            }
            rstd[tk] = rsqrt(warp_sum(q) * inv_k + a.eps);
        }
        DN_UNROLL
        for (int tk = 0; tk < TPI; ++tk) {
            const int r = r0 + tk;
            if (r >= kMergeM) continue;
            DN_UNROLL
            for (int i = 0; i < NQ; ++i) {
                const int k = 4 * (lane + 32 * i);
                const f32x4 gm = ldg4f(a.g + k), bt = ldg4f(a.b + k);
                const float m = mean[tk], rs = rstd[tk];
                store8(As + (size_t)r * sa + k, pack4((v[tk][i].x - m) * rs * gm.x + bt.x, (v[tk][i].y - m) * rs * gm.y + bt.y,
                                                      (v[tk][i].z - m) * rs * gm.z + bt.z, (v[tk][i].w - m) * rs * gm.w + bt.w));
            }
        }
    }
    sync_cta();
    warp_gemm(As, sa, (warp_id & 1) * 32, K, a.wp, warp_id >> 1, kWarps / 2, a.Co / 16, lane,
              [&](int row, int col, float v0, float v1) {
                  const int64_t tok = t0 + row;
                  if (tok < a.ntok) store2f(a.out + tok * a.Co + col, v0, v1);
              });
}

// merge_cta for a.C (32..256 in steps of 32; anything else does nothing: refused before).
DN_DEVI void merge_cta_any(const MergeArgs &a, int cta, int tid, uint8_t *smem) {
    switch (a.C) {
    case 32: merge_cta<1>(a, cta, tid, smem); break;
    case 64: merge_cta<2>(a, cta, tid, smem); break;
    case 96: merge_cta<3>(a, cta, tid, smem); break;
    case 128: merge_cta<4>(a, cta, tid, smem); break;
    case 160: merge_cta<5>(a, cta, tid, smem); break;
    case 192: merge_cta<6>(a, cta, tid, smem); break;
    case 224: merge_cta<7>(a, cta, tid, smem); break;
    case 256: merge_cta<8>(a, cta, tid, smem); break;
    default: break;
    }
}

// Expand CTA `cta` (low-res tokens 32 cta ..), thread tid of kThreads, smem expand_smem(C, C2 / 4,
// Cs) bytes.
DN_DEVI void expand_cta(const ExpandArgs &a, int cta, int tid, uint8_t *smem) {
    const int C = a.C, Cu = a.C2 / 4, Cs = a.Cs, Kz = Cu + 2 * Cs, s1 = C + 8, sz = Kz + 8, w = a.w, W2 = 2 * a.w;
    uint16_t *A1 = reinterpret_cast<uint16_t *>(smem);
    uint16_t *Z = A1 + (size_t)kExpandL * s1;
    const int64_t nlo = (int64_t)a.h * w, t0 = (int64_t)cta * kExpandL;
    const int warp_id = tid >> 5, lane = tid & 31;
    // output token of tile row R = 4 r + j (low-res token t0 + r, sub-pixel j); -1 past the map
    auto out_token = [&](int R) -> int64_t {
        const int64_t tok = t0 + (R >> 2);
        if (tok >= nlo) return -1;
        const int y = (int)(tok / w), x = (int)(tok - (int64_t)y * w), j = R & 3;
        return (int64_t)(2 * y + (j >> 1)) * W2 + 2 * x + (j & 1);
    };
    const int cq = C / 4, sq = Cs / 4;
    PT_UNROLL_4
    for (int i = tid; i < kExpandL * cq; i += kThreads) {
        const int r = i / cq, q = i - r * cq;
        const int64_t tok = t0 + r;
        f32x4 v = f32x4{0.f, 0.f, 0.f, 0.f};
        if (tok < nlo) v = ldg4f(a.lo + tok * C + 4 * q);
        store8(A1 + (size_t)r * s1 + 4 * q, pack4(v.x, v.y, v.z, v.w));
    }
    PT_UNROLL_4
    for (int i = tid; i < 4 * kExpandL * sq; i += kThreads) {
        const int R = i / sq, q = i - R * sq;
        const int64_t o = out_token(R);
        f32x4 v = f32x4{0.f, 0.f, 0.f, 0.f};
        if (o >= 0) v = ld4f(a.skip + o * Cs + 4 * q);  // coherent load: out may be skip
        const uint64_t hi = pack4(v.x, v.y, v.z, v.w);
        store8(Z + (size_t)R * sz + Cu + 4 * q, hi);
        store8(Z + (size_t)R * sz + Cu + Cs + 4 * q,
               pack4(v.x - bf16_lo((uint32_t)hi), v.y - bf16_hi((uint32_t)hi), v.z - bf16_lo((uint32_t)(hi >> 32)),
                     v.w - bf16_hi((uint32_t)(hi >> 32))));
    }
    sync_cta();
    warp_gemm(A1, s1, 0, C, a.we, warp_id, kWarps, a.C2 / 16, lane, [&](int row, int col, float v0, float v1) {
        const int j = col / Cu, c = col - j * Cu;
        store4(Z + (size_t)(4 * row + j) * sz + c, pack_bf16x2(v0 + a.be[col], v1 + a.be[col + 1]));
    });
    sync_cta();
    warp_gemm(Z, sz, (warp_id & 3) * 32, Kz, a.ws, warp_id >> 2, kWarps / 4, a.Co / 16, lane,
              [&](int row, int col, float v0, float v1) {
                  const int64_t o = out_token(row);
                  if (o >= 0) store2f(a.out + o * a.Co + col, v0 + a.bs[col], v1 + a.bs[col + 1]);
              });
}

}  // namespace patch_tc
}  // namespace cuda
}  // namespace denoise

#if !defined(DENOISE_WARP_EMULATION)

#include "common.cuh"

namespace denoise {
namespace cuda {

namespace {

template <int NQ>
__global__ void __launch_bounds__(patch_tc::kThreads, 4) patch_merge_tc_kernel(const patch_tc::MergeArgs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    patch_tc::merge_cta<NQ>(a, blockIdx.x, threadIdx.x, smem);
}

template <int NQ>
int launch_merge(Ctx &ctx, const patch_tc::MergeArgs &a, unsigned ctas, size_t smem) {
    TRY(smem_kernel(ctx, (const void *)patch_merge_tc_kernel<NQ>, "patch_merge_tc_kernel", patch_tc::kThreads, smem));
    patch_merge_tc_kernel<NQ><<<ctas, patch_tc::kThreads, smem, ctx.stream>>>(a);
    return launch_check(ctx, "patch_merge_tc_kernel");
}

__global__ void __launch_bounds__(patch_tc::kThreads) patch_expand_tc_kernel(const patch_tc::ExpandArgs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    patch_tc::expand_cta(a, blockIdx.x, threadIdx.x, smem);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

}  // namespace

std::string patch_merge_tc_refusal(int C, int Co) {
    if (C < 32 || C > 256 || C % 32) return "merge C " + std::to_string(C) + " (built for 32..256 in steps of 32)";
    if (Co < 16 || Co > 1024 || Co % 16) return "merge output channels " + std::to_string(Co) + " (multiples of 16 up to 1024)";
    return "";
}

std::string patch_expand_tc_refusal(int C, int C2, int Cs, int Co) {
    if (C < 16 || C > 512 || C % 16) return "expand C " + std::to_string(C) + " (multiples of 16 up to 512)";
    if (C2 < 64 || C2 % 64) return "expand output channels " + std::to_string(C2) + " (multiples of 64)";
    if (Cs < 16 || Cs % 16) return "skip channels " + std::to_string(Cs) + " (multiples of 16)";
    if (Co < 16 || Co > 1024 || Co % 16) return "skip linear output channels " + std::to_string(Co) + " (multiples of 16 up to 1024)";
    if (C2 / 4 + 2 * Cs > 1024)
        return "skip GEMM operand of " + std::to_string(C2 / 4 + 2 * Cs) + " channels (d2s + the skip map's two bf16 parts; up to 1024)";
    return "";
}

size_t patch_merge_tc_smem(int C) { return patch_tc::merge_smem(C); }
size_t patch_expand_tc_smem(int C, int C2, int Cs) { return patch_tc::expand_smem(C, C2 / 4, Cs); }

int patch_merge_tc(Ctx &ctx, const float *x, int H, int W, int C, const bf16 *wp, const float *g, const float *b, int Co,
                   float eps, float *out) {
    DN_REQUIRE(x && wp && g && b && out, "null pointer");
    const std::string why = patch_merge_tc_refusal(C, Co);
    DN_REQUIRE(why.empty(), why);
    DN_REQUIRE(H >= 2 && W >= 2 && H % 2 == 0 && W % 2 == 0, "map " + std::to_string(W) + "x" + std::to_string(H) + " not even");
    DN_REQUIRE(aligned16(x) && aligned16(out) && aligned16(wp) && aligned16(g) && aligned16(b),
               "x, out, the packed weight or gamma/beta not 16-byte aligned");
    const int64_t ntok = (int64_t)(H / 2) * (W / 2), ctas = (ntok + patch_tc::kMergeM - 1) / patch_tc::kMergeM;
    DN_REQUIRE(ctas <= 0x7fffffffLL, "map too large");
    const size_t smem = patch_tc::merge_smem(C);
    const patch_tc::MergeArgs a{x, H, W, C, wp, g, b, eps, Co, out, ntok};
    switch (C / 32) {
    case 1: return launch_merge<1>(ctx, a, (unsigned)ctas, smem);
    case 2: return launch_merge<2>(ctx, a, (unsigned)ctas, smem);
    case 3: return launch_merge<3>(ctx, a, (unsigned)ctas, smem);
    case 4: return launch_merge<4>(ctx, a, (unsigned)ctas, smem);
    case 5: return launch_merge<5>(ctx, a, (unsigned)ctas, smem);
    case 6: return launch_merge<6>(ctx, a, (unsigned)ctas, smem);
    case 7: return launch_merge<7>(ctx, a, (unsigned)ctas, smem);
    default: return launch_merge<8>(ctx, a, (unsigned)ctas, smem);
    }
}

int patch_expand_tc(Ctx &ctx, const float *lo, int h, int w, int C, const bf16 *we, const float *be, int C2,
                    const float *skip, int Cs, const bf16 *ws, const float *bs, int Co, float *out) {
    DN_REQUIRE(lo && we && be && skip && ws && bs && out, "null pointer");
    const std::string why = patch_expand_tc_refusal(C, C2, Cs, Co);
    DN_REQUIRE(why.empty(), why);
    DN_REQUIRE(h >= 1 && w >= 1, "empty map");
    DN_REQUIRE(out != skip || Co == Cs, "in place (out = skip) needs as many output as skip channels");
    DN_REQUIRE(aligned16(lo) && aligned16(skip) && aligned16(out) && aligned16(we) && aligned16(ws),
               "lo, skip, out or a packed weight not 16-byte aligned");
    const int64_t nlo = (int64_t)h * w, ctas = (nlo + patch_tc::kExpandL - 1) / patch_tc::kExpandL;
    DN_REQUIRE(ctas <= 0x7fffffffLL, "map too large");
    const size_t smem = patch_tc::expand_smem(C, C2 / 4, Cs);
    TRY(smem_kernel(ctx, (const void *)patch_expand_tc_kernel, "patch_expand_tc_kernel", patch_tc::kThreads, smem));
    patch_tc::ExpandArgs a{lo, h, w, C, we, be, C2, skip, Cs, ws, bs, Co, out};
    patch_expand_tc_kernel<<<(unsigned)ctas, patch_tc::kThreads, smem, ctx.stream>>>(a);
    return launch_check(ctx, "patch_expand_tc_kernel");
}

}  // namespace cuda
}  // namespace denoise

#endif
