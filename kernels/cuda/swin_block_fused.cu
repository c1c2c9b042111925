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
//   qkv    an x Wqkv^T + b -> qkv (bf16, M x 3C), q scaled by HD^-0.5 log2(e).
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
                for (int i = 0; i < VEC; ++i) s[i] = 0.f;
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
                    s[2 * i] = bf16_lo(w[i]);
                    s[2 * i + 1] = bf16_hi(w[i]);
                }
            } else {
                u32x4 q;
                q.x = pack_bf16x2(s[0], s[1]);
                q.y = pack_bf16x2(s[2], s[3]);
                q.z = pack_bf16x2(s[4], s[5]);
                q.w = pack_bf16x2(s[6], s[7]);
                st4(g, q);
            }
        } else {
            float *g = static_cast<float *>(gmap) + el;
            if (!kStore) {
                const f32x4 q = ld4f(g);
                s[0] = q.x;
                s[1] = q.y;
                s[2] = q.z;
                s[3] = q.w;
            } else {
                st4f(g, f32x4{s[0], s[1], s[2], s[3]});
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
            v[i] = c < C ? xs[r * sx + c] : 0.f;
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
            if (c < C) an[r * sa + c] = (uint16_t)(pack_bf16x2((v[i] - mean) * rstd * g[c] + b[c], 0.f) & 0xffffu);
        }
    }
}

// One warp's share of a GEMM phase: rows m0 .. m0 + 16 MT - 1 of A (bf16, smem, stride lda) times
// the n-tiles n0 .. n0 + NTW - 1 of the weight section `sec` (NTT n-tiles x KP k-pairs in fragment
// order, kp-major if KPM; the phase reads n-tiles from nsec on and k-pairs from kp0 on), K = 16 KS,
// in chunks of NT n-tiles; epi(row, col, v, v') gets each pair of adjacent accumulators. kCount:
// lane 0 adds the warp's mma count to *count at the end.
template <int MT, int NT, int NTW, int KS, bool KPM, int NTT, int KP, bool kCount, class Epi>
DN_DEVI void gemm_warp(const uint16_t *A, int lda, int m0, int n0, int nsec, const uint8_t *sec, int kp0,
                       unsigned long long *count, int lane, Epi &&epi) {
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
                    bq[j] = ldg4(sec + 512u * swin_gemm_unit(KPM, nsec + n0 + c * NT + j, kp0 + ks / 2, NTT, KP) +
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

// Window attention of the tile: work item (query m-tile mt, head h) -> one warp.
template <int C, int HD, int TW, int NW, bool kCount>
DN_DEVI void attention_tile(const KernelArgs &a, int tile, const uint16_t *qkv, int sq, uint16_t *out, int sa,
                            const float *relb, unsigned long long *count, int warp, int lane) {
    constexpr int NH = C / HD, MTT = 4 * TW, KQ = HD / 16, NO = HD / 8;
    const int g = lane >> 2, t = lane & 3;
    unsigned cnt = 0;
    for (int it = warp; it < MTT * NH; it += NW) {
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
        uint32_t qa[KQ][4];
DN_UNROLL
        for (int ks = 0; ks < KQ; ++ks)
            ldsm_x4(qa[ks], qkv + (r0 + (lane & 15)) * sq + h * HD + 16 * ks + 8 * (lane >> 4));
        float s[8][4];
DN_UNROLL
        for (int j = 0; j < 8; ++j) {
DN_UNROLL
            for (int r = 0; r < 4; ++r) s[j][r] = 0.f;
            const uint16_t *kp = qkv + (kr0 + 8 * j + (lane & 7)) * sq + C + h * HD;
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
                ldsm_x4_t(vb, qkv + (kr0 + 16 * kk + (lane & 15)) * sq + 2 * C + h * HD + 16 * np + 8 * (lane >> 4));
                mma_bf16(o[2 * np], pa[kk], vb[0], vb[1]);
                mma_bf16(o[2 * np + 1], pa[kk], vb[2], vb[3]);
                if (kCount) cnt += 2;
            }
DN_UNROLL
        for (int n = 0; n < NO; ++n) {
            const int col = h * HD + 8 * n + 2 * t;
            *reinterpret_cast<uint32_t *>(out + (r0 + g) * sa + col) = pack_bf16x2(o[n][0], o[n][1]);
            *reinterpret_cast<uint32_t *>(out + (r0 + g + 8) * sa + col) = pack_bf16x2(o[n][2], o[n][3]);
        }
    }
    if (kCount && lane == 0 && cnt) atomic_add(count, cnt);
}

DN_DEVI float gelu_tanh(float v) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f * 0.7978845608028654f;
    const float u = v * (k0 + k1 * v * v);
    const float hv = 0.5f * v;
    return hv + hv * tanh_approx(u);
}

// The whole block for tile `tile` (windows TW tile .. TW tile + TW - 1), thread tid of NW x 32.
template <int C, int HD, int TW, int NW, int kRes, bool kCount>
DN_DEVI void swin_block_tile(const KernelArgs &a, int tile, int tid, uint8_t *smem) {
    constexpr SwinTile T = swin_tile(C, HD, TW, NW);
    static_assert(T.ok, "no tile plan for this (C, HD, TW, NW)");
    constexpr SwinImageLayout L = swin_image_layout(C, C / HD);
    constexpr int M = T.M, SX = T.sx, SA = T.sa, SQ = T.sq, SH = T.sh, HC = T.HC, NCH = T.NCH;
    constexpr int KPC = (C + 31) / 32;  // k-pairs of a K = C weight
    float *xs = reinterpret_cast<float *>(smem + T.off_xs);
    uint16_t *an = reinterpret_cast<uint16_t *>(smem + T.off_an);
    uint16_t *u = reinterpret_cast<uint16_t *>(smem + T.off_u);
    const uint8_t *img = a.img;
    const int warp = tid >> 5, lane = tid & 31;
    unsigned long long *cnt = a.mma_count;

    move_tile<C, M, NW * 32, kRes == kResBf16, false>(a, a.x, tile, TW, xs, SX, tid);
    sync_cta();
    layernorm_tile<C, M, NW>(xs, SX, an, SA, reinterpret_cast<const float *>(img + L.off[kSecLn1G]),
                             reinterpret_cast<const float *>(img + L.off[kSecLn1B]), a.eps, warp, lane);
    sync_cta();
    {
        constexpr SwinWarpGrid G = T.qkv;
        const float *bias = reinterpret_cast<const float *>(img + L.off[kSecQkvB]);
        const float qs = a.qscale;
        gemm_warp<G.MT, G.NT, G.NTW, C / 16, false, 3 * C / 8, KPC, kCount>(
            an, SA, 16 * G.MT * (warp / G.WN), G.NTW * (warp % G.WN), 0, img + L.off[kSecQkvW], 0, cnt, lane,
            [&](int row, int col, float v0, float v1) {
                const f32x2 b = ldg2f(bias + col);
                v0 += b.x;
                v1 += b.y;
                if (col < C) {
                    v0 *= qs;
                    v1 *= qs;
                }
                *reinterpret_cast<uint32_t *>(u + row * SQ + col) = pack_bf16x2(v0, v1);
            });
    }
    sync_cta();
    attention_tile<C, HD, TW, NW, kCount>(a, tile, u, SQ, an, SA, reinterpret_cast<const float *>(img + L.off[kSecRelB]),
                                          cnt, warp, lane);
    sync_cta();
    {
        constexpr SwinWarpGrid G = T.proj;
        const float *bias = reinterpret_cast<const float *>(img + L.off[kSecProjB]);
        gemm_warp<G.MT, G.NT, G.NTW, C / 16, false, C / 8, KPC, kCount>(
            an, SA, 16 * G.MT * (warp / G.WN), G.NTW * (warp % G.WN), 0, img + L.off[kSecProjW], 0, cnt, lane,
            [&](int row, int col, float v0, float v1) {
                const f32x2 b = ldg2f(bias + col);
                float *p = xs + row * SX + col;
                p[0] += v0 + b.x;
                p[1] += v1 + b.y;
            });
    }
    sync_cta();
    layernorm_tile<C, M, NW>(xs, SX, an, SA, reinterpret_cast<const float *>(img + L.off[kSecLn2G]),
                             reinterpret_cast<const float *>(img + L.off[kSecLn2B]), a.eps, warp, lane);
    sync_cta();
    DN_UNROLL_1
    for (int ch = 0; ch < NCH; ++ch) {
        {
            constexpr SwinWarpGrid G = T.fc1;
            const float *bias = reinterpret_cast<const float *>(img + L.off[kSecFc1B]) + ch * HC;
            gemm_warp<G.MT, G.NT, G.NTW, C / 16, false, kSwinMlpRatio * C / 8, KPC, kCount>(
                an, SA, 16 * G.MT * (warp / G.WN), G.NTW * (warp % G.WN), ch * (HC / 8), img + L.off[kSecFc1W], 0, cnt,
                lane, [&](int row, int col, float v0, float v1) {
                    const f32x2 b = ldg2f(bias + col);
                    *reinterpret_cast<uint32_t *>(u + row * SH + col) =
                        pack_bf16x2(gelu_tanh(v0 + b.x), gelu_tanh(v1 + b.y));
                });
        }
        sync_cta();
        {
            constexpr SwinWarpGrid G = T.fc2;
            const float *bias = reinterpret_cast<const float *>(img + L.off[kSecFc2B]);
            const bool first = ch == 0;
            gemm_warp<G.MT, G.NT, G.NTW, HC / 16, true, C / 8, kSwinMlpRatio * C / 32, kCount>(
                u, SH, 16 * G.MT * (warp / G.WN), G.NTW * (warp % G.WN), 0, img + L.off[kSecFc2W], ch * (HC / 32), cnt,
                lane, [&](int row, int col, float v0, float v1) {
                    float *p = xs + row * SX + col;
                    if (first) {
                        const f32x2 b = ldg2f(bias + col);
                        v0 += b.x;
                        v1 += b.y;
                    }
                    p[0] += v0;
                    p[1] += v1;
                });
        }
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

// Two builds of the same body: ptxas's default register heuristic, and an explicit minimum of one
// CTA per SM, which lets ptxas use up to 255 registers (it then keeps more loads in flight; at
// C = 32 and 64 the occupancy stays what shared memory allows). fused_check times both; the
// instrumented kernel uses the second (with the default heuristic it spilled its count on sm_89).
template <int C, int HD, int TW, int NW, int kRes>
__global__ void __launch_bounds__(NW * 32) swin_block_kernel(const KernelArgs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    swin_fused::swin_block_tile<C, HD, TW, NW, kRes, false>(a, (int)blockIdx.x, (int)threadIdx.x, smem);
}

template <int C, int HD, int TW, int NW, int kRes, bool kCount>
__global__ void __launch_bounds__(NW * 32, 1) swin_block_kernel_1cta(const KernelArgs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    swin_fused::swin_block_tile<C, HD, TW, NW, kRes, kCount>(a, (int)blockIdx.x, (int)threadIdx.x, smem);
}

using KernelFn = void (*)(const KernelArgs);

enum Build { kDefaultRegs, kOneCta, kCounting, kBuilds };

struct Instance {
    int C, HD, TW, NW;
    KernelFn fn[kResModes][kBuilds];  // [residual stream formats][build]
    uint32_t smem;
};

#define SWIN_BUILDS(C, HD, TW, NW, R)                                                                        \
    swin_block_kernel<C, HD, TW, NW, R>, swin_block_kernel_1cta<C, HD, TW, NW, R, false>,                     \
        swin_block_kernel_1cta<C, HD, TW, NW, R, true>
#define SWIN_INSTANCE(C, HD, TW, NW)                                                                         \
    {C,                                                                                                      \
     HD,                                                                                                     \
     TW,                                                                                                     \
     NW,                                                                                                     \
     {{SWIN_BUILDS(C, HD, TW, NW, kResFp32)}, {SWIN_BUILDS(C, HD, TW, NW, kResBf16)},                         \
      {SWIN_BUILDS(C, HD, TW, NW, kResFp32ToBf16)}},                                                        \
     swin_tile(C, HD, TW, NW).smem},

const Instance g_instances[] = {SWIN_FUSED_TILES(SWIN_INSTANCE)};

std::string supported_list() {
    std::string s;
    for (const Instance &in : g_instances) {
        const std::string one = "C " + std::to_string(in.C) + " (head dim " + std::to_string(in.HD) + ")";
        if (s.find(one) == std::string::npos) s += (s.empty() ? "" : ", ") + one;
    }
    return s;
}

// The instance for (C, HD) and the tile asked for in p (0: any; the first listed is the default).
const Instance *find_instance(int C, int HD, const SwinFusedParams &p) {
    for (const Instance &i : g_instances)
        if (i.C == C && i.HD == HD && (p.tw == 0 || i.TW == p.tw) && (p.nw == 0 || i.NW == p.nw)) return &i;
    return nullptr;
}

}  // namespace

std::vector<SwinFusedTile> swin_fused_tiles(int C, int heads) {
    std::vector<SwinFusedTile> v;
    for (const Instance &in : g_instances)
        if (in.C == C && heads > 0 && C % heads == 0 && in.HD == C / heads) v.push_back({in.TW, in.NW, (int)in.smem});
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
    const int HD = C / heads;
    const Instance *in = find_instance(C, HD, p);
    DN_REQUIRE(in, "no fused kernel for C " + std::to_string(C) + " with " + std::to_string(heads) + " heads" +
                       (p.tw || p.nw ? " and tile " + std::to_string(p.tw) + " window(s) / " + std::to_string(p.nw) + " warps" : "") +
                       " (built: " + supported_list() + ")");
    const int64_t nwx = W / kSwinWindow, nwy = H / kSwinWindow, nwin = nwx * nwy;
    const int64_t ctas = (nwin + in->TW - 1) / in->TW;
    DN_REQUIRE(nwin <= 0x7fffffffLL && ctas <= 0x7fffffffLL && (int64_t)H * W <= (int64_t)1 << 40, "map too large");
    const int rb = p.bf16_out ? kResFp32ToBf16 : bf16_residual ? kResBf16 : kResFp32;
    const int ci = p.mma_count ? kCounting : p.one_cta_regs ? kOneCta : kDefaultRegs;
    KernelFn fn = in->fn[rb][ci];
    TRY(smem_kernel(ctx, (const void *)fn, "swin_block_kernel", in->NW * 32, in->smem));
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
    fn<<<(unsigned)ctas, in->NW * 32, in->smem, ctx.stream>>>(a);
    return launch_check(ctx, "swin_block_kernel");
}

int swin_block_fused_supported(int device, int C, int heads, std::string *why) {
    if (heads < 1 || C % heads) {
        *why = "C " + std::to_string(C) + " is not a multiple of heads " + std::to_string(heads);
        return DENOISE_EINVAL;
    }
    const Instance *in = find_instance(C, C / heads, SwinFusedParams{});
    if (!in) {
        *why = "no fused kernel for C " + std::to_string(C) + " with head dim " + std::to_string(C / heads) +
               " (built: " + supported_list() + ")";
        return DENOISE_EINVAL;
    }
    int optin = 0;
    const cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = std::string("cudaDeviceGetAttribute: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
        return DENOISE_EDEVICE;
    }
    if ((int)in->smem > optin) {
        *why = "the fused kernel for C " + std::to_string(C) + " needs " + std::to_string(in->smem) +
               " bytes of shared memory per block, device " + std::to_string(device) + " allows " + std::to_string(optin);
        return DENOISE_EINVAL;
    }
    why->clear();
    return 0;
}

int swin_block_fused_occupancy(Ctx &ctx, int C, int heads, bool bf16_residual, const SwinFusedParams *params,
                               int *ctas_per_sm) {
    const SwinFusedParams p = params ? *params : SwinFusedParams{};
    *ctas_per_sm = 0;
    DN_REQUIRE(heads >= 1 && C % heads == 0, "C " + std::to_string(C) + " is not a multiple of heads " + std::to_string(heads));
    const Instance *in = find_instance(C, C / heads, p);
    DN_REQUIRE(in, "no fused kernel for C " + std::to_string(C) + " with " + std::to_string(heads) + " heads");
    const void *fn = (const void *)in->fn[bf16_residual ? kResBf16 : kResFp32][p.mma_count ? kCounting : p.one_cta_regs ? kOneCta : kDefaultRegs];
    return smem_kernel(ctx, fn, "swin_block_kernel", in->NW * 32, in->smem, ctas_per_sm);
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
