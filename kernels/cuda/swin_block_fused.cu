// One fused kernel per Swin block: x (H, W, C) NHWC += proj(W-MSA(LN1(x))); x += fc2(GELU_tanh(
// fc1(LN2(x)))) in place, every phase of a tile of TW 8x8 windows in one CTA, in registers and
// shared memory, the matrix products on tensor cores (mma.sync.m16n8k16 bf16, fp32 accumulate).
// Math: weights/denoise_train/model.py SwinBlock (Liu et al., Swin Transformer, ICCV 2021, pre-norm; window 8,
// cyclic shift `shift` with Swin's region mask, head dim HD = C / heads, scale HD^-0.5, relative
// position bias, MLP ratio 4, GELU tanh, LayerNorm with biased variance and eps).
//
// Phases per CTA (tile = windows TW t .. TW t + TW - 1, M = 64 TW token rows; buffers and warp
// splits from swin_block_desc.h's SwinTile, the weights from the block's weight image,
// swin_weight_image.h):
//   load   x tokens -> xs (fp32). Window (wy, wx) token (i, j) is map token ((8 wy + i + shift) %
//          H, (8 wx + j + shift) % W): torch.roll(-shift) + window_partition as index math.
//   ln1    xs -> an (bf16), one warp per row, two-pass fp32 mean and variance.
//   qkv    an x Wqkv^T + b -> qkv (bf16, M x 3C), q scaled by HD^-0.5 log2(e). With qa (the
//          tile plan's option): only k | v (M x 2C) here; each attention warp projects q for its
//          (m-tile, head) items from an, holds it in registers over a barrier and stores it into
//          an at the item's rows and columns, where the item's output goes (u: 2C + 8 columns
//          instead of 3C + 8, 8 KB less at C 64, 16 KB at C 128); a warp barrier after those
//          stores and one before the output's stores over them (attention_tile).
//   attn   per (query m-tile, head), one warp: S = q k^T (16 x 64, accumulators), + bias table
//          (x log2 e, from the image), keys of another Swin region -> -inf (only windows of the
//          last window row / column of a shifted block: their local row or column >= 8 - shift
//          is the other region), softmax in fp32 with exp2 on the accumulators, P (bf16) reused
//          as the A fragments of O = P v (the C-fragment layout of two n-tiles is the A-fragment
//          layout of one k-step), O -> an (bf16).
//   proj   an x Wp^T + b added to xs (fp32).
//   ln2    xs -> an (bf16).
//   mlp    per chunk of HC hidden units: an x W1[chunk]^T + b1 -> GELU -> hid (bf16, in qkv's
//          place); hid x W2[:, chunk]^T (+ b2 in chunk 0) added to xs (fp32). C up to 256 keeps
//          the whole tile in shared memory (196 KB at C = 256).
//   store  xs -> out (x, or the separate bf16 map) at the tokens it was loaded from (the same
//          index math undoes the shift).
// Each CTA reads and writes only its own TW x 64 tokens, so the update in place is race-free.
//
// Variants (SWIN_FUSED_KERNELS in swin_block_desc.h; the engine's choice is SWIN_FUSED_PREFERENCE's
// data, denoise-cuda-bench --swin-sweep times them): the tile (TW, NW), qa, the accumulator tiles
// per warp at most (ma: fewer registers), pf (each GEMM phase's first weight fragments loaded
// before the barrier in front of it: their L1/L2 latency passes while the warp waits there, which
// no compiler does across a barrier) and the register budget (__launch_bounds__' CTAs per SM).
// None changes an operation or the order of a sum: every variant gives the same bits
// (swin_block_emu_test and fused_check compare them). Software-pipelining the k loops' ldmatrix
// and weight loads by hand (double-buffered fragments) was tried and left out: the loops are fully
// unrolled and ptxas already issues each step's loads ahead of the previous step's mma (CUDA
// 13.0, sm_90: the same instruction mix and the same median distance from an ldmatrix to its mma,
// 19-21 instructions at C 64 1/4, with and without it).
//
// Value path (where each rounding happens; the CPU engine is fp32 throughout):
//   x: fp32 (or bf16 with kResBf16: widened exactly on the load) -> LN1 in fp32 -> rounded to
//   bf16 (1) -> qkv accumulated in fp32, + bias, q scaled, rounded to bf16 (2) -> scores in fp32
//   from bf16 q, k, + fp32 bias, softmax in fp32 (ex2.approx, ~2 ulp) -> P rounded to bf16 (3) ->
//   O accumulated in fp32, rounded to bf16 (4) -> proj in fp32, + bias + residual in fp32 (no
//   rounding) -> LN2 in fp32 -> bf16 (5) -> fc1 in fp32 + bias, GELU with tanh.approx (rel. error
//   ~2^-11) -> bf16 (6) -> fc2 in fp32, + bias + residual in fp32 -> stored fp32, or rounded to
//   bf16 once (7, kResBf16; kResFp32ToBf16: the fp32 stream's output rounded once into a
//   separate bf16 map, as the U-Net's last block writes the feature map). The correct-first
//   sequence (Net::block in kernels/cuda/network.cu) rounds at the same points but (3): it keeps
//   P in fp32. The residual stream itself is rounded only by (7).
//
// Cost per token (n tokens, model v1 C = 32 / 64 / 128): FLOP = 24 C^2 (qkv 6, proj 2, fc1 8,
// fc2 8) + 256 C (scores + P v) = 32.8 K / 115 K / 426 K. DRAM bytes = the residual stream read
// and written once: 8 C (fp32: 256 / 512 / 1024 B), 4 C (bf16) or 6 C (fp32 in, bf16 out); the
// weight image (24 C^2 + 16 heads K bytes: 40 / 130 / 448 KB per block) is read by every CTA
// through L1/L2. FLOP/byte of DRAM at fp32: 128 / 224 / 416 (the H200's bf16 ridge is ~165 at
// 790 TFLOP/s and 4.8 TB/s): C = 32 is near the ridge, C >= 64 is compute-bound.
#include <cmath>

#include "swin_block_desc.h"
#include "swin_weight_image.h"
#include "warp_mma.h"

namespace denoise {
namespace cuda {
namespace swin_fused {

using namespace warp;

// The residual stream's formats of one launch: where the tile is loaded from and stored to.
enum ResMode {
    kResFp32 = 0,        // x fp32, updated in place
    kResBf16 = 1,        // x bf16, updated in place
    kResFp32ToBf16 = 2,  // x fp32 read, the output rounded to bf16 into `out` (x unchanged)
    kResModes
};

struct KernelArgs {
    void *x;               // (H, W, C) fp32 or bf16: the block's input
    void *out;             // (H, W, C): the output, x itself or (kResFp32ToBf16) a bf16 map
    const uint8_t *img;    // the block's weight image (device)
    int H, W, nwx, nwy, nwin, shift;
    float qscale;          // HD^-0.5 log2(e)
    float eps;             // LayerNorm eps
    unsigned long long *mma_count;  // kCount: each warp adds the mma it issued, per phase
};

// Map token of row `tok` (0..63) of window `gw`.
DN_DEVI size_t map_token(const KernelArgs &a, int gw, int tok) {
    const int wy = gw / a.nwx, wx = gw - wy * a.nwx;
    int y = wy * kSwinWindow + (tok >> 3) + a.shift;
    int x = wx * kSwinWindow + (tok & 7) + a.shift;
    if (y >= a.H) y -= a.H;
    if (x >= a.W) x -= a.W;
    return (size_t)y * a.W + x;
}

// load (kStore false) or store the tile's residual rows between the map g (fp32, or kBf16: bf16
// bits) and xs, 16 bytes per access.
template <int C, int M, int NTHR, bool kBf16, bool kStore>
DN_DEVI void move_tile(const KernelArgs &a, void *gmap, int tile, int TW, float *xs, int sx, int tid) {
    constexpr int VEC = kBf16 ? 8 : 4, CV = C / VEC;
    for (int e = tid; e < M * CV; e += NTHR) {
        const int r = e / CV, cv = e - r * CV;
        const int gw = tile * TW + (r >> 6);
        float *s = xs + r * sx + cv * VEC;
        if (gw >= a.nwin) {
            if (!kStore)
                for (int i = 0; i < VEC; ++i) DN_STS(s + i, 0.f);
            continue;
        }
        const size_t el = map_token(a, gw, r & 63) * C + (size_t)cv * VEC;
        if (kBf16) {
            uint8_t *g = static_cast<uint8_t *>(gmap) + 2 * el;
            if (!kStore) {
                const u32x4 q = ld4(g);
                const uint32_t w[4] = {q.x, q.y, q.z, q.w};
DN_UNROLL
                for (int i = 0; i < 4; ++i) {
                    DN_STS(s + 2 * i, bf16_lo(w[i]));
                    DN_STS(s + 2 * i + 1, bf16_hi(w[i]));
                }
            } else {
                u32x4 q;
                q.x = pack_bf16x2(DN_LDS(s), DN_LDS(s + 1));
                q.y = pack_bf16x2(DN_LDS(s + 2), DN_LDS(s + 3));
                q.z = pack_bf16x2(DN_LDS(s + 4), DN_LDS(s + 5));
                q.w = pack_bf16x2(DN_LDS(s + 6), DN_LDS(s + 7));
                st4(g, q);
            }
        } else {
            float *g = static_cast<float *>(gmap) + el;
            if (!kStore) {
                const f32x4 q = ld4f(g);
                DN_STS(s, q.x);
                DN_STS(s + 1, q.y);
                DN_STS(s + 2, q.z);
                DN_STS(s + 3, q.w);
            } else {
                st4f(g, f32x4{DN_LDS(s), DN_LDS(s + 1), DN_LDS(s + 2), DN_LDS(s + 3)});
            }
        }
    }
}

// LayerNorm of the M rows of xs (fp32, stride sx) into an (bf16, stride sa); one warp per row,
// lane l holds channels l, l + 32, ...; mean first, then the centred sum of squares.
template <int C, int M, int NW>
DN_DEVI void layernorm_tile(const float *xs, int sx, uint16_t *an, int sa, const float *g, const float *b, float eps,
                            int warp, int lane) {
    constexpr int CPL = (C + 31) / 32;
    for (int r = warp; r < M; r += NW) {
        float v[CPL];
        float s = 0.f;
DN_UNROLL
        for (int i = 0; i < CPL; ++i) {
            const int c = lane + 32 * i;
            v[i] = c < C ? DN_LDS(xs + r * sx + c) : 0.f;
            s += v[i];
        }
        const float mean = warp_sum(s) / C;
        float q = 0.f;
DN_UNROLL
        for (int i = 0; i < CPL; ++i) {
            const int c = lane + 32 * i;
            const float d = c < C ? v[i] - mean : 0.f;
            q += d * d;
        }
        const float rstd = rsqrt(warp_sum(q) / C + eps);
DN_UNROLL
        for (int i = 0; i < CPL; ++i) {
            const int c = lane + 32 * i;
            if (c < C) DN_STS(an + r * sa + c, (uint16_t)(pack_bf16x2((v[i] - mean) * rstd * g[c] + b[c], 0.f) & 0xffffu));
        }
    }
}

// The B fragments of a warp's first chunk and k-pair in a GEMM phase (gemm_warp's first load,
// same arguments): for issuing them before the barrier that precedes the phase, so that their
// latency (L1 or L2: the weight image does not fit L1 beside the tiles from C 64 on) passes
// while the warp waits there; a barrier is a fence no load is moved across by the compilers.
template <int NT, bool KPM, int NTT, int KP>
DN_DEVI void gemm_first_b(u32x4 (&b)[NT], int n0, int nsec, const uint8_t *sec, int kp0, int lane) {
DN_UNROLL
    for (int j = 0; j < NT; ++j) b[j] = ldg4(sec + 512u * swin_gemm_unit(KPM, nsec + n0 + j, kp0, NTT, KP) + 16u * lane);
}

// One warp's share of a GEMM phase: rows m0 .. m0 + 16 MT - 1 of A (bf16, smem, stride lda) times
// the n-tiles n0 .. n0 + NTW - 1 of the weight section `sec` (NTT n-tiles x KP k-pairs in fragment
// order, kp-major if KPM; the phase reads n-tiles from nsec on and k-pairs from kp0 on), K = 16 KS,
// in chunks of NT n-tiles; epi(row, col, v, v') gets each pair of adjacent accumulators. first:
// null, or the B fragments of chunk 0 and k-pair 0 already loaded (gemm_first_b). kCount: lane 0
// adds the warp's mma count to *count at the end.
template <int MT, int NT, int NTW, int KS, bool KPM, int NTT, int KP, bool kCount, class Epi>
DN_DEVI void gemm_warp(const uint16_t *A, int lda, int m0, int n0, int nsec, const uint8_t *sec, int kp0,
                       const u32x4 *first, unsigned long long *count, int lane, Epi &&epi) {
    const int g = lane >> 2, t = lane & 3;
    unsigned cnt = 0;
DN_UNROLL
    for (int c = 0; c < NTW / NT; ++c) {
        float acc[MT][NT][4];
DN_UNROLL
        for (int i = 0; i < MT; ++i)
DN_UNROLL
            for (int j = 0; j < NT; ++j)
DN_UNROLL
                for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
        u32x4 bq[NT];
DN_UNROLL
        for (int ks = 0; ks < KS; ++ks) {
            if ((ks & 1) == 0) {
DN_UNROLL
                for (int j = 0; j < NT; ++j)
                    bq[j] = first && c == 0 && ks == 0
                                ? first[j]
                                : ldg4(sec + 512u * swin_gemm_unit(KPM, nsec + n0 + c * NT + j, kp0 + ks / 2, NTT, KP) +
                                       16u * lane);
            }
            uint32_t af[MT][4];
DN_UNROLL
            for (int i = 0; i < MT; ++i)
                ldsm_x4(af[i], A + (m0 + 16 * i + (lane & 15)) * lda + 16 * ks + 8 * (lane >> 4));
DN_UNROLL
            for (int i = 0; i < MT; ++i)
DN_UNROLL
                for (int j = 0; j < NT; ++j) {
                    mma_bf16(acc[i][j], af[i], (ks & 1) ? bq[j].z : bq[j].x, (ks & 1) ? bq[j].w : bq[j].y);
                    if (kCount) ++cnt;
                }
        }
DN_UNROLL
        for (int i = 0; i < MT; ++i)
DN_UNROLL
            for (int j = 0; j < NT; ++j) {
                const int row = m0 + 16 * i + g, col = 8 * (n0 + c * NT + j) + 2 * t;
                epi(row, col, acc[i][j][0], acc[i][j][1]);
                epi(row + 8, col, acc[i][j][2], acc[i][j][3]);
            }
    }
    if (kCount && lane == 0) atomic_add(count, cnt);
}

// The q A fragments of query m-tile rows r0 .. r0 + 15, head h, projected from the LN1 output
// an (bf16, stride sa) by head h's q rows of qkv_w (n-tiles h HD / 8 .. (h + 1) HD / 8 - 1 of the
// section's 3C / 8), + bias, x qs, rounded to bf16: the k steps in order, the epilogue of the
// q | k | v GEMM's q columns, so the bits are those the shared-memory path loads with ldmatrix.
// The C fragments of n-tiles 2 kk and 2 kk + 1 are the A fragment of k step kk (rows g and g + 8,
// columns 2t.. and 2t + 8..). Returns the mma issued.
template <int C, int HD, bool kCount>
DN_DEVI unsigned q_fragments(const uint16_t *an, int sa, int r0, int h, const uint8_t *wq, const float *bias, float qs,
                             uint32_t (&qf)[HD / 16][4], int lane) {
    constexpr int KS = C / 16, NO = HD / 8, NTT = 3 * C / 8, KP = (C + 31) / 32;
    const int t = lane & 3;
    float acc[NO][4];
DN_UNROLL
    for (int j = 0; j < NO; ++j)
DN_UNROLL
        for (int r = 0; r < 4; ++r) acc[j][r] = 0.f;
    u32x4 bq[NO];
DN_UNROLL
    for (int ks = 0; ks < KS; ++ks) {
        if ((ks & 1) == 0) {
DN_UNROLL
            for (int j = 0; j < NO; ++j)
                bq[j] = ldg4(wq + 512u * swin_gemm_unit(false, h * NO + j, ks / 2, NTT, KP) + 16u * lane);
        }
        uint32_t af[4];
        ldsm_x4(af, an + (r0 + (lane & 15)) * sa + 16 * ks + 8 * (lane >> 4));
DN_UNROLL
        for (int j = 0; j < NO; ++j) mma_bf16(acc[j], af, (ks & 1) ? bq[j].z : bq[j].x, (ks & 1) ? bq[j].w : bq[j].y);
    }
DN_UNROLL
    for (int j = 0; j < NO; ++j) {
        const f32x2 b = ldg2f(bias + h * HD + 8 * j + 2 * t);
DN_UNROLL
        for (int r = 0; r < 4; r += 2) {
            acc[j][r] += b.x;
            acc[j][r + 1] += b.y;
            acc[j][r] *= qs;
            acc[j][r + 1] *= qs;
        }
    }
DN_UNROLL
    for (int kk = 0; kk < HD / 16; ++kk) {
        qf[kk][0] = pack_bf16x2(acc[2 * kk][0], acc[2 * kk][1]);
        qf[kk][1] = pack_bf16x2(acc[2 * kk][2], acc[2 * kk][3]);
        qf[kk][2] = pack_bf16x2(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
        qf[kk][3] = pack_bf16x2(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
    }
    return kCount ? (unsigned)(KS * NO) : 0u;
}

// Attention work item `it` (query m-tile mt = it % (4 TW), head h = it / (4 TW)) of the tile, one
// warp, from q's A fragments qa: S = q k^T + bias, region mask, softmax, O = P v -> out (bf16,
// stride sa) rows of the m-tile, head h's columns. k and v: u (bf16, stride sq) columns kcol +
// h HD.., vcol + h HD... kOverQ: the item's q was read by ldmatrix from where O goes (qa), so a
// warp barrier precedes the stores. Returns the mma issued.
template <int C, int HD, int TW, bool kOverQ, bool kCount>
DN_DEVI unsigned attend(const KernelArgs &a, int tile, int it, const uint32_t (&qa)[HD / 16][4], const uint16_t *u, int sq,
                        int kcol, int vcol, uint16_t *out, int sa, const float *relb, int lane) {
    constexpr int MTT = 4 * TW, KQ = HD / 16, NO = HD / 8;
    const int g = lane >> 2, t = lane & 3;
    unsigned cnt = 0;
    const int mt = it % MTT, h = it / MTT;
    const int wl = mt >> 2, ml = mt & 3;
    const int r0 = 16 * mt, kr0 = kSwinTokens * wl;
    const int gw = tile * TW + wl;
    bool mrow = false, mcol = false;
    if (a.shift > 0 && gw < a.nwin) {
        const int wy = gw / a.nwx, wx = gw - wy * a.nwx;
        mrow = wy == a.nwy - 1;
        mcol = wx == a.nwx - 1;
    }
    float s[8][4];
DN_UNROLL
    for (int j = 0; j < 8; ++j) {
DN_UNROLL
        for (int r = 0; r < 4; ++r) s[j][r] = 0.f;
        const uint16_t *kp = u + (kr0 + 8 * j + (lane & 7)) * sq + kcol + h * HD;
DN_UNROLL
        for (int kk = 0; kk < KQ; kk += 2) {
            if (kk + 1 < KQ) {
                uint32_t kb[4];
                ldsm_x4(kb, kp + 16 * kk + 8 * (lane >> 3));
                mma_bf16(s[j], qa[kk], kb[0], kb[1]);
                mma_bf16(s[j], qa[kk + 1], kb[2], kb[3]);
                if (kCount) cnt += 2;
            } else {
                uint32_t kb[2];
                ldsm_x2(kb, kp + 16 * kk + 8 * ((lane >> 3) & 1));
                mma_bf16(s[j], qa[kk], kb[0], kb[1]);
                if (kCount) ++cnt;
            }
        }
    }
    const float *bp = relb + ((size_t)(h * 4 + ml) * 32 + lane) * 32;
DN_UNROLL
    for (int j = 0; j < 8; ++j) {
        const f32x4 b = ldg4f(bp + 4 * j);
        s[j][0] += b.x;
        s[j][1] += b.y;
        s[j][2] += b.z;
        s[j][3] += b.w;
    }
    if (mrow || mcol) {
        const int th = kSwinWindow - a.shift;
DN_UNROLL
        for (int j = 0; j < 8; ++j)
DN_UNROLL
            for (int r = 0; r < 4; ++r) {
                const int q = 16 * ml + g + 8 * (r >> 1), k = 8 * j + 2 * t + (r & 1);
                const bool cut = (mrow && (((q >> 3) >= th) != ((k >> 3) >= th))) ||
                                 (mcol && (((q & 7) >= th) != ((k & 7) >= th)));
                if (cut) s[j][r] = -INFINITY;
            }
    }
    float mA = s[0][0], mB = s[0][2];
DN_UNROLL
    for (int j = 0; j < 8; ++j) {
        mA = fmaxf(mA, fmaxf(s[j][0], s[j][1]));
        mB = fmaxf(mB, fmaxf(s[j][2], s[j][3]));
    }
    mA = fmaxf(mA, shfl_xor(mA, 1));
    mA = fmaxf(mA, shfl_xor(mA, 2));
    mB = fmaxf(mB, shfl_xor(mB, 1));
    mB = fmaxf(mB, shfl_xor(mB, 2));
    float sA = 0.f, sB = 0.f;
DN_UNROLL
    for (int j = 0; j < 8; ++j) {
        s[j][0] = exp2_approx(s[j][0] - mA);
        s[j][1] = exp2_approx(s[j][1] - mA);
        s[j][2] = exp2_approx(s[j][2] - mB);
        s[j][3] = exp2_approx(s[j][3] - mB);
        sA += s[j][0] + s[j][1];
        sB += s[j][2] + s[j][3];
    }
    sA += shfl_xor(sA, 1);
    sA += shfl_xor(sA, 2);
    sB += shfl_xor(sB, 1);
    sB += shfl_xor(sB, 2);
    const float iA = rcp(sA), iB = rcp(sB);
    uint32_t pa[4][4];
DN_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
        pa[kk][0] = pack_bf16x2(s[2 * kk][0] * iA, s[2 * kk][1] * iA);
        pa[kk][1] = pack_bf16x2(s[2 * kk][2] * iB, s[2 * kk][3] * iB);
        pa[kk][2] = pack_bf16x2(s[2 * kk + 1][0] * iA, s[2 * kk + 1][1] * iA);
        pa[kk][3] = pack_bf16x2(s[2 * kk + 1][2] * iB, s[2 * kk + 1][3] * iB);
    }
    float o[NO][4];
DN_UNROLL
    for (int n = 0; n < NO; ++n)
DN_UNROLL
        for (int r = 0; r < 4; ++r) o[n][r] = 0.f;
DN_UNROLL
    for (int kk = 0; kk < 4; ++kk)
DN_UNROLL
        for (int np = 0; np < HD / 16; ++np) {
            uint32_t vb[4];
            ldsm_x4_t(vb, u + (kr0 + 16 * kk + (lane & 15)) * sq + vcol + h * HD + 16 * np + 8 * (lane >> 4));
            mma_bf16(o[2 * np], pa[kk], vb[0], vb[1]);
            mma_bf16(o[2 * np + 1], pa[kk], vb[2], vb[3]);
            if (kCount) cnt += 2;
        }
    // kOverQ: out holds this item's q, whose rows the other lanes' ldmatrix read (lane 8i + r gives
    // row r of 8x8 matrix i, lane 4g + t stores into row g): their reads before any lane's store
    if (kOverQ) sync_warp();
DN_UNROLL
    for (int n = 0; n < NO; ++n) {
        const int col = h * HD + 8 * n + 2 * t;
        DN_STS(reinterpret_cast<uint32_t *>(out + (r0 + g) * sa + col), pack_bf16x2(o[n][0], o[n][1]));
        DN_STS(reinterpret_cast<uint32_t *>(out + (r0 + g + 8) * sa + col), pack_bf16x2(o[n][2], o[n][3]));
    }
    return cnt;
}

// Window attention of the tile: work item (query m-tile mt, head h) -> one warp, items warp,
// warp + NW, ...; q's A fragments are read with ldmatrix from q (bf16, stride sq) at columns
// h HD..: without qa, q is u's first C columns (the q | k | v GEMM's output); with qa, each warp
// first projects q for all of its items (q_fragments, from the LN1 output in an), then, after a
// barrier (every warp's reads of the LN1 output are done), stores them into an at the item's own
// rows and columns, the place where the item's attention output goes: only that item's warp reads
// or writes it from then on, and an needs no second buffer. Within the warp the lanes share those
// bytes (lane 4g + t stores rows g and g + 8 of q and of O, ldmatrix reads row r through lane r
// and 16 + r), so two warp barriers order them: after the q stores (before ldmatrix reads q) and
// in attend before the O stores (after every lane's ldmatrix read q). Without the second,
// racecheck reported the O stores against the q reads (docs/fused.md, "The qa race"): each O value
// is computed from the q row it overwrites, so the outputs were right, but only a warp barrier
// orders one lane's shared-memory access before another lane's. tests/emu's hazard check finds
// either one missing.
template <int C, int HD, int TW, int NW, bool QA, bool kCount>
DN_DEVI void attention_tile(const KernelArgs &a, int tile, uint16_t *an, int sa, const uint16_t *u, int sq, int kcol,
                            int vcol, const float *relb, const uint8_t *wq, const float *bq, unsigned long long *count,
                            int warp, int lane) {
    constexpr int MTT = 4 * TW, NIT = MTT * (C / HD), KQ = HD / 16;
    const int g = lane >> 2, t = lane & 3;
    unsigned cnt = 0;
    if constexpr (QA) {
        constexpr int IPW = (NIT + NW - 1) / NW;  // items per warp
        uint32_t qf[IPW][KQ][4];
DN_UNROLL
        for (int i = 0; i < IPW; ++i) {
            const int it = warp + i * NW;
            if (NIT % NW == 0 || it < NIT)
                cnt += q_fragments<C, HD, kCount>(an, sa, 16 * (it % MTT), it / MTT, wq, bq, a.qscale, qf[i], lane);
        }
        sync_cta();
DN_UNROLL
        for (int i = 0; i < IPW; ++i) {
            const int it = warp + i * NW;
            if (NIT % NW == 0 || it < NIT) {
                uint16_t *q = an + (16 * (it % MTT) + g) * sa + (it / MTT) * HD + 2 * t;
DN_UNROLL
                for (int kk = 0; kk < KQ; ++kk) {
                    DN_STS(reinterpret_cast<uint32_t *>(q + 16 * kk), qf[i][kk][0]);
                    DN_STS(reinterpret_cast<uint32_t *>(q + 8 * sa + 16 * kk), qf[i][kk][1]);
                    DN_STS(reinterpret_cast<uint32_t *>(q + 16 * kk + 8), qf[i][kk][2]);
                    DN_STS(reinterpret_cast<uint32_t *>(q + 8 * sa + 16 * kk + 8), qf[i][kk][3]);
                }
            }
        }
        // lane 4g + t stored rows g, g + 8; ldmatrix below reads row r through lane r (and 16 + r)
        sync_warp();
    }
    const uint16_t *q = QA ? an : u;
    const int sqq = QA ? sa : sq;
    for (int it = warp; it < NIT; it += NW) {
        const int r0 = 16 * (it % MTT), h = it / MTT;
        uint32_t qa[KQ][4];
DN_UNROLL
        for (int ks = 0; ks < KQ; ++ks) ldsm_x4(qa[ks], q + (r0 + (lane & 15)) * sqq + h * HD + 16 * ks + 8 * (lane >> 4));
        cnt += attend<C, HD, TW, QA, kCount>(a, tile, it, qa, u, sq, kcol, vcol, an, sa, relb, lane);
    }
    if (kCount && lane == 0 && cnt) atomic_add(count, cnt);
}

DN_DEVI float gelu_tanh(float v) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f * 0.7978845608028654f;
    const float u = v * (k0 + k1 * v * v);
    const float hv = 0.5f * v;
    return hv + hv * tanh_approx(u);
}

// The whole block for tile `tile` (windows TW tile .. TW tile + TW - 1), thread tid of NW x 32,
// with the tile plan swin_tile(C, HD, TW, NW, QA, MA). PF: each GEMM phase's first B fragments
// are loaded before the barrier in front of it (gemm_first_b); the same loads, the same bits.
template <int C, int HD, int TW, int NW, bool QA, int MA, bool PF, int kRes, bool kCount>
DN_DEVI void swin_block_tile(const KernelArgs &a, int tile, int tid, uint8_t *smem) {
    constexpr SwinTile T = swin_tile(C, HD, TW, NW, QA, MA);
    static_assert(T.ok, "no tile plan for this (C, HD, TW, NW, QA, MA)");
    constexpr SwinImageLayout L = swin_image_layout(C, C / HD);
    constexpr int M = T.M, SX = T.sx, SA = T.sa, SQ = T.sq, SH = T.sh, HC = T.HC, NCH = T.NCH;
    constexpr int KPC = (C + 31) / 32;         // k-pairs of a K = C weight
    constexpr int NQKV = 3 * C / 8, NFC1 = kSwinMlpRatio * C / 8, KPH = kSwinMlpRatio * C / 32;
    constexpr int Q0 = QA ? C : 0;             // the first qkv column the q | k | v (QA: k | v) GEMM computes
    constexpr SwinWarpGrid GQ = T.qkv, GP = T.proj, G1 = T.fc1, G2 = T.fc2;
    float *xs = reinterpret_cast<float *>(smem + T.off_xs);
    uint16_t *an = reinterpret_cast<uint16_t *>(smem + T.off_an);
    uint16_t *u = reinterpret_cast<uint16_t *>(smem + T.off_u);
    const uint8_t *img = a.img;
    const int warp = tid >> 5, lane = tid & 31;
    unsigned long long *cnt = a.mma_count;
    // a phase's warp grid position: first row 16 MT (warp / WN), first n-tile NTW (warp % WN),
    // computed where used (kept live across the phases they would cost registers)
    u32x4 fq[GQ.NT], fp[GP.NT], f1[G1.NT], f2[G2.NT];  // PF: the phases' first B fragments

    move_tile<C, M, NW * 32, kRes == kResBf16, false>(a, a.x, tile, TW, xs, SX, tid);
    sync_cta();
    layernorm_tile<C, M, NW>(xs, SX, an, SA, reinterpret_cast<const float *>(img + L.off[kSecLn1G]),
                             reinterpret_cast<const float *>(img + L.off[kSecLn1B]), a.eps, warp, lane);
    if (PF) gemm_first_b<GQ.NT, false, NQKV, KPC>(fq, GQ.NTW * (warp % GQ.WN), Q0 / 8, img + L.off[kSecQkvW], 0, lane);
    sync_cta();
    {
        // q | k | v, or with QA k | v only (the n-tiles after q's C / 8; q: attention_tile)
        const float *bias = reinterpret_cast<const float *>(img + L.off[kSecQkvB]) + Q0;
        const float qs = a.qscale;
        gemm_warp<GQ.MT, GQ.NT, GQ.NTW, C / 16, false, NQKV, KPC, kCount>(
            an, SA, 16 * GQ.MT * (warp / GQ.WN), GQ.NTW * (warp % GQ.WN), Q0 / 8, img + L.off[kSecQkvW], 0,
            PF ? fq : nullptr, cnt, lane,
            [&](int row, int col, float v0, float v1) {
                const f32x2 b = ldg2f(bias + col);
                v0 += b.x;
                v1 += b.y;
                if (!QA && col < C) {
                    v0 *= qs;
                    v1 *= qs;
                }
                DN_STS(reinterpret_cast<uint32_t *>(u + row * SQ + col), pack_bf16x2(v0, v1));
            });
    }
    if (!QA) sync_cta();  // with QA the barrier is inside attention_tile, after the q projections
    attention_tile<C, HD, TW, NW, QA, kCount>(a, tile, an, SA, u, SQ, T.kcol, T.vcol,
                                              reinterpret_cast<const float *>(img + L.off[kSecRelB]),
                                              img + L.off[kSecQkvW], reinterpret_cast<const float *>(img + L.off[kSecQkvB]),
                                              cnt, warp, lane);
    if (PF) gemm_first_b<GP.NT, false, C / 8, KPC>(fp, GP.NTW * (warp % GP.WN), 0, img + L.off[kSecProjW], 0, lane);
    sync_cta();
    {
        const float *bias = reinterpret_cast<const float *>(img + L.off[kSecProjB]);
        gemm_warp<GP.MT, GP.NT, GP.NTW, C / 16, false, C / 8, KPC, kCount>(
            an, SA, 16 * GP.MT * (warp / GP.WN), GP.NTW * (warp % GP.WN), 0, img + L.off[kSecProjW], 0,
            PF ? fp : nullptr, cnt, lane,
            [&](int row, int col, float v0, float v1) {
                const f32x2 b = ldg2f(bias + col);
                float *p = xs + row * SX + col;
                DN_STS_ADD(p, v0 + b.x);
                DN_STS_ADD(p + 1, v1 + b.y);
            });
    }
    sync_cta();
    layernorm_tile<C, M, NW>(xs, SX, an, SA, reinterpret_cast<const float *>(img + L.off[kSecLn2G]),
                             reinterpret_cast<const float *>(img + L.off[kSecLn2B]), a.eps, warp, lane);
    if (PF) gemm_first_b<G1.NT, false, NFC1, KPC>(f1, G1.NTW * (warp % G1.WN), 0, img + L.off[kSecFc1W], 0, lane);
    sync_cta();
    DN_UNROLL_1
    for (int ch = 0; ch < NCH; ++ch) {
        {
            const float *bias = reinterpret_cast<const float *>(img + L.off[kSecFc1B]) + ch * HC;
            gemm_warp<G1.MT, G1.NT, G1.NTW, C / 16, false, NFC1, KPC, kCount>(
                an, SA, 16 * G1.MT * (warp / G1.WN), G1.NTW * (warp % G1.WN), ch * (HC / 8), img + L.off[kSecFc1W], 0,
                PF ? f1 : nullptr, cnt, lane,
                [&](int row, int col, float v0, float v1) {
                    const f32x2 b = ldg2f(bias + col);
                    DN_STS(reinterpret_cast<uint32_t *>(u + row * SH + col),
                        pack_bf16x2(gelu_tanh(v0 + b.x), gelu_tanh(v1 + b.y)));
                });
        }
        if (PF)
            gemm_first_b<G2.NT, true, C / 8, KPH>(f2, G2.NTW * (warp % G2.WN), 0, img + L.off[kSecFc2W], ch * (HC / 32),
                                                  lane);
        sync_cta();
        {
            const float *bias = reinterpret_cast<const float *>(img + L.off[kSecFc2B]);
            const bool first = ch == 0;
            gemm_warp<G2.MT, G2.NT, G2.NTW, HC / 16, true, C / 8, KPH, kCount>(
                u, SH, 16 * G2.MT * (warp / G2.WN), G2.NTW * (warp % G2.WN), 0, img + L.off[kSecFc2W], ch * (HC / 32),
                PF ? f2 : nullptr, cnt, lane,
                [&](int row, int col, float v0, float v1) {
                    float *p = xs + row * SX + col;
                    if (first) {
                        const f32x2 b = ldg2f(bias + col);
                        v0 += b.x;
                        v1 += b.y;
                    }
                    DN_STS_ADD(p, v0);
                    DN_STS_ADD(p + 1, v1);
                });
        }
        if (PF && ch + 1 < NCH)
            gemm_first_b<G1.NT, false, NFC1, KPC>(f1, G1.NTW * (warp % G1.WN), (ch + 1) * (HC / 8), img + L.off[kSecFc1W], 0,
                                                  lane);
        sync_cta();
    }
    move_tile<C, M, NW * 32, kRes != kResFp32, true>(a, a.out, tile, TW, xs, SX, tid);
}

}  // namespace swin_fused
}  // namespace cuda
}  // namespace denoise

#if !defined(DENOISE_WARP_EMULATION)

#include "common.cuh"
#include "swin_block_fused.h"

namespace denoise {
namespace cuda {

namespace {

using swin_fused::KernelArgs;
using swin_fused::kResBf16;
using swin_fused::kResFp32;
using swin_fused::kResFp32ToBf16;
using swin_fused::kResModes;

// The body compiled for CTAS resident CTAs per SM (swin_min_ctas: __launch_bounds__'s minimum,
// clamped to what the target's shared memory admits; 0: ptxas's own register heuristic), or
// instrumented (kCount: built with CTAS 1, so the count never costs the body registers).
#if defined(__CUDA_ARCH__)
#define DN_SWIN_SM (__CUDA_ARCH__ / 10)
#else
#define DN_SWIN_SM 0
#endif
template <int C, int HD, int TW, int NW, int QA, int MA, int PF, int CTAS, int kRes, bool kCount>
__global__ void __launch_bounds__(NW * 32, swin_min_ctas(CTAS, swin_tile(C, HD, TW, NW, QA, MA).smem, DN_SWIN_SM))
    swin_block_kernel(const KernelArgs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    swin_fused::swin_block_tile<C, HD, TW, NW, QA != 0, MA, PF != 0, kRes, kCount>(a, (int)blockIdx.x, (int)threadIdx.x, smem);
}
#undef DN_SWIN_SM

using KernelFn = void (*)(const KernelArgs);

struct Instance {
    SwinFusedKernel k;
    KernelFn fn[kResModes];  // by residual stream form
    KernelFn counting;       // the instrumented kernel of the tile plan (fp32 stream)
};

#define SWIN_INSTANCE(C, HD, TW, NW, QA, MA, PF, CTAS)                                                              \
    {{C, HD, TW, NW, QA, MA, PF, CTAS, swin_tile(C, HD, TW, NW, QA, MA).smem},                                       \
     {swin_block_kernel<C, HD, TW, NW, QA, MA, PF, CTAS, kResFp32, false>,                                           \
      swin_block_kernel<C, HD, TW, NW, QA, MA, PF, CTAS, kResBf16, false>,                                           \
      swin_block_kernel<C, HD, TW, NW, QA, MA, PF, CTAS, kResFp32ToBf16, false>},                                    \
     swin_block_kernel<C, HD, TW, NW, QA, MA, PF, 1, kResFp32, true>},

const Instance g_instances[] = {SWIN_FUSED_KERNELS(SWIN_INSTANCE)};

std::string supported_list() {
    std::string s;
    for (const Instance &in : g_instances) {
        const std::string one = "C " + std::to_string(in.k.C) + " (head dim " + std::to_string(in.k.HD) + ")";
        if (s.find(one) == std::string::npos) s += (s.empty() ? "" : ", ") + one;
    }
    return s;
}

bool same_kernel(const SwinFusedKernel &a, const SwinFusedKernel &b) {
    return a.C == b.C && a.HD == b.HD && a.tw == b.tw && a.nw == b.nw && a.qa == b.qa && a.ma == b.ma && a.pf == b.pf &&
           a.ctas == b.ctas;
}

bool matches(const SwinFusedKernel &k, const SwinFusedParams &p) {
    return (p.tw == 0 || k.tw == p.tw) && (p.nw == 0 || k.nw == p.nw) && (p.qa < 0 || k.qa == p.qa) &&
           (p.ma == 0 || k.ma == p.ma) && (p.pf < 0 || k.pf == p.pf) && (p.ctas < 0 || k.ctas == p.ctas);
}

bool unconstrained(const SwinFusedParams &p) { return !p.tw && !p.nw && p.qa < 0 && !p.ma && p.pf < 0 && p.ctas < 0; }

// The kernels for (C, HD) in the engine's order of preference on a device of compute capability
// sm: SWIN_FUSED_PREFERENCE's rows for sm, then for any device, then SWIN_FUSED_KERNELS's order;
// each once, only those built.
std::vector<const Instance *> preference(int sm, int C, int HD) {
    std::vector<const Instance *> v;
    auto add = [&](const SwinFusedKernel &k) {
        for (const Instance &i : g_instances)
            if (same_kernel(i.k, k)) {
                for (const Instance *j : v)
                    if (j == &i) return;
                v.push_back(&i);
                return;
            }
    };
    for (int pass = 0; pass < 2; ++pass) {
#define SWIN_PREF(SM, C_, HD_, TW, NW, QA, MA, PF, CTAS) \
    if ((pass == 0 ? SM == sm && sm != 0 : SM == 0) && C_ == C && HD_ == HD) add({C_, HD_, TW, NW, QA, MA, PF, CTAS, 0});
        SWIN_FUSED_PREFERENCE(SWIN_PREF)
#undef SWIN_PREF
    }
    for (const Instance &i : g_instances)
        if (i.k.C == C && i.k.HD == HD) add(i.k);
    return v;
}

struct DeviceLimits {
    int sm = 0, smem_optin = 0;
};

int device_limits(Ctx &ctx, int device, DeviceLimits *d) {
    int major = 0, minor = 0;
    TRY(cuda_check(ctx, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute"));
    TRY(cuda_check(ctx, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute"));
    TRY(cuda_check(ctx, cudaDeviceGetAttribute(&d->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                   "cudaDeviceGetAttribute"));
    d->sm = 10 * major + minor;
    return 0;
}

// The kernel for (C, HD) that p selects on a device with limits d: with p unconstrained the
// engine's choice (the first in preference order whose shared memory the device allows), else the
// first in that order that matches every field p sets. Null if none.
const Instance *find_instance(int C, int HD, const SwinFusedParams &p, const DeviceLimits &d) {
    const bool any = unconstrained(p);
    for (const Instance *i : preference(d.sm, C, HD))
        if (any ? (int)i->k.smem <= d.smem_optin : matches(i->k, p)) return i;
    return nullptr;
}

std::string params_text(const SwinFusedParams &p) {
    if (unconstrained(p)) return "";
    std::string s = " and tile";
    if (p.tw) s += " tw " + std::to_string(p.tw);
    if (p.nw) s += " nw " + std::to_string(p.nw);
    if (p.qa >= 0) s += " qa " + std::to_string(p.qa);
    if (p.ma) s += " ma " + std::to_string(p.ma);
    if (p.pf >= 0) s += " pf " + std::to_string(p.pf);
    if (p.ctas >= 0) s += " ctas " + std::to_string(p.ctas);
    return s;
}

}  // namespace

std::string swin_fused_kernel_name(const SwinFusedKernel &k) {
    std::string s = std::to_string(k.tw) + "/" + std::to_string(k.nw);
    if (k.qa) s += " qa";
    if (k.ma != 16) s += " ma" + std::to_string(k.ma);
    if (k.pf) s += " pf";
    s += k.ctas ? " x" + std::to_string(k.ctas) : " heur";
    return s;
}

std::vector<SwinFusedKernel> swin_fused_kernels(int C, int heads) {
    std::vector<SwinFusedKernel> v;
    for (const Instance &in : g_instances)
        if (in.k.C == C && heads > 0 && C % heads == 0 && in.k.HD == C / heads) v.push_back(in.k);
    return v;
}

int swin_block_fused(Ctx &ctx, const uint8_t *image, int C, int heads, float eps, void *x, bool bf16_residual, int H,
                     int W, int shift, const SwinFusedParams *params) {
    const SwinFusedParams p = params ? *params : SwinFusedParams{};
    DN_REQUIRE(image && x, "null pointer");
    DN_REQUIRE(heads >= 1 && C % heads == 0, "C " + std::to_string(C) + " is not a multiple of heads " + std::to_string(heads));
    DN_REQUIRE(H >= kSwinWindow && W >= kSwinWindow && H % kSwinWindow == 0 && W % kSwinWindow == 0,
               "map " + std::to_string(W) + "x" + std::to_string(H) + " does not tile into 8x8 windows");
    DN_REQUIRE(shift >= 0 && shift < kSwinWindow, "shift " + std::to_string(shift) + " outside [0, 8)");
    DN_REQUIRE(eps > 0.f, "LayerNorm eps must be > 0");
    DN_REQUIRE(((uintptr_t)x & 15) == 0 && ((uintptr_t)image & 15) == 0 && ((uintptr_t)p.bf16_out & 15) == 0,
               "x, the weight image and bf16_out must be 16-byte aligned");
    DN_REQUIRE(!p.bf16_out || !bf16_residual, "bf16_out needs an fp32 residual stream x");
    DN_REQUIRE(!p.mma_count || (!bf16_residual && !p.bf16_out), "the instrumented kernel is built for the fp32 stream in place");
    const int HD = C / heads;
    DeviceLimits d;
    TRY(device_limits(ctx, ctx.device, &d));
    const Instance *in = find_instance(C, HD, p, d);
    DN_REQUIRE(in, "no fused kernel for C " + std::to_string(C) + " with " + std::to_string(heads) + " heads" + params_text(p) +
                       (unconstrained(p) ? " within the device's " + std::to_string(d.smem_optin) +
                                               " bytes of shared memory per block"
                                         : "") +
                       " (built: " + supported_list() + ")");
    const int64_t nwx = W / kSwinWindow, nwy = H / kSwinWindow, nwin = nwx * nwy;
    const int64_t ctas = (nwin + in->k.tw - 1) / in->k.tw;
    DN_REQUIRE(nwin <= 0x7fffffffLL && ctas <= 0x7fffffffLL && (int64_t)H * W <= (int64_t)1 << 40, "map too large");
    const int rb = p.bf16_out ? kResFp32ToBf16 : bf16_residual ? kResBf16 : kResFp32;
    KernelFn fn = p.mma_count ? in->counting : in->fn[rb];
    TRY(smem_kernel(ctx, (const void *)fn, "swin_block_kernel", in->k.nw * 32, in->k.smem));
    KernelArgs a;
    a.x = x;
    a.out = p.bf16_out ? static_cast<void *>(p.bf16_out) : x;
    a.img = image;
    a.H = H;
    a.W = W;
    a.nwx = (int)nwx;
    a.nwy = (int)nwy;
    a.nwin = (int)nwin;
    a.shift = shift;
    a.qscale = (float)(1.4426950408889634 / std::sqrt((double)HD));
    a.eps = eps;
    a.mma_count = p.mma_count;
    fn<<<(unsigned)ctas, in->k.nw * 32, in->k.smem, ctx.stream>>>(a);
    return launch_check(ctx, "swin_block_kernel");
}

int swin_block_fused_choice(int device, int C, int heads, SwinFusedKernel *k, std::string *why) {
    if (heads < 1 || C % heads) {
        *why = "C " + std::to_string(C) + " is not a multiple of heads " + std::to_string(heads);
        return DENOISE_EINVAL;
    }
    Ctx probe;  // only for the error text of the attribute queries
    DeviceLimits d;
    if (device_limits(probe, device, &d)) {
        cudaGetLastError();
        *why = probe.err;
        return DENOISE_EDEVICE;
    }
    const std::vector<const Instance *> pref = preference(d.sm, C, C / heads);
    if (pref.empty()) {
        *why = "no fused kernel for C " + std::to_string(C) + " with head dim " + std::to_string(C / heads) +
               " (built: " + supported_list() + ")";
        return DENOISE_EINVAL;
    }
    const Instance *in = find_instance(C, C / heads, SwinFusedParams{}, d);
    if (!in) {
        uint32_t least = pref[0]->k.smem;
        for (const Instance *i : pref) least = std::min(least, i->k.smem);
        *why = "the fused kernels for C " + std::to_string(C) + " need at least " + std::to_string(least) +
               " bytes of shared memory per block, device " + std::to_string(device) + " allows " + std::to_string(d.smem_optin);
        return DENOISE_EINVAL;
    }
    if (k) *k = in->k;
    why->clear();
    return 0;
}

int swin_block_fused_supported(int device, int C, int heads, std::string *why) {
    return swin_block_fused_choice(device, C, heads, nullptr, why);
}

int swin_block_fused_kernel_info(Ctx &ctx, int C, int heads, bool bf16_residual, const SwinFusedParams *params,
                                 SwinFusedKernelInfo *info) {
    const SwinFusedParams p = params ? *params : SwinFusedParams{};
    *info = SwinFusedKernelInfo{};
    DN_REQUIRE(heads >= 1 && C % heads == 0, "C " + std::to_string(C) + " is not a multiple of heads " + std::to_string(heads));
    DeviceLimits d;
    TRY(device_limits(ctx, ctx.device, &d));
    const Instance *in = find_instance(C, C / heads, p, d);
    DN_REQUIRE(in, "no fused kernel for C " + std::to_string(C) + " with " + std::to_string(heads) + " heads" + params_text(p));
    const void *fn = (const void *)(p.mma_count ? in->counting : in->fn[bf16_residual ? kResBf16 : kResFp32]);
    cudaFuncAttributes fa;
    TRY(cuda_check(ctx, cudaFuncGetAttributes(&fa, fn), "cudaFuncGetAttributes (swin_block_kernel)"));
    info->kernel = in->k;
    info->registers = fa.numRegs;
    info->local_bytes = (int)fa.localSizeBytes;
    return smem_kernel(ctx, fn, "swin_block_kernel", in->k.nw * 32, in->k.smem, &info->ctas_per_sm);
}

int swin_weight_image_upload(Ctx &ctx, const BlockW &b, int C, int heads, uint8_t **image, size_t *bytes) {
    *image = nullptr;
    std::vector<uint8_t> host;
    std::string err;
    int rc = swin_weight_image_pack(b, C, heads, &host, &err);
    if (rc) return fail(ctx, rc, err);
    void *d = nullptr;
    if ((rc = dev_alloc(ctx, &d, host.size(), "the fused Swin block weight image"))) return rc;
    // on the compute stream (non-blocking: a plain cudaMemcpy on the legacy stream would not be
    // ordered before the kernels queued there), then waited for: `host` goes away on return
    rc = cuda_check(ctx, cudaMemcpyAsync(d, host.data(), host.size(), cudaMemcpyHostToDevice, ctx.stream),
                    "cudaMemcpyAsync (weight image)");
    if (!rc) rc = cuda_check(ctx, cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize (weight image)");
    if (rc) {
        dev_free(ctx, d);
        return rc;
    }
    *image = static_cast<uint8_t *>(d);
    if (bytes) *bytes = host.size();
    return 0;
}

}  // namespace cuda
}  // namespace denoise

#endif
