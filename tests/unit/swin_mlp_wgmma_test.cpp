// The Hopper MLP probe's host logic (kernels/cuda/swin_mlp_wgmma_image.h, the plan and the
// packer), on the CPU, against the PTX ISA's definitions written out independently here:
//  - the plans of the kernels built: shared memory within sm_90's 227 KB, regions aligned, the
//    consumer registers within the SM's 64 K;
//  - the packer against the wgmma shared-memory descriptor (PTX ISA "Matrix Descriptor Format",
//    canonical K-major layout without swizzle): every fc1 / fc2 weight read back through the
//    descriptor the kernel builds, every chunk byte written once, fc1's K permutation a bijection;
//  - the shared-memory reads of the LayerNorm (float4) and of the epilogue (float2) free of bank
//    conflicts at the plan's row stride;
//  - the kernel's consumer dataflow emulated with wgmma's register fragments (A and D of
//    .m64nNk16 as the PTX ISA defines them) and the B operand read through the descriptors, on
//    random blocks scaled like trained ones, against the CPU fp32 reference of LN2 + fc1 + GELU
//    + fc2 + residual: C 64 / 128, every hidden chunk width built, both tanh forms, partial tiles;
//  - the producer / consumer mbarrier protocol (the kernel's loops transcribed as operation lists,
//    barriers with PTX phase semantics, copies completing after random delays, random
//    interleavings): no deadlock, every tile once, no stage overwritten while read, each consumer
//    reads the tile and the weight chunk it expects;
//  - refusals of the packer.
// The kernel itself (sm_90a) runs in tests/gpu/mlp_wgmma_check.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bf16.h"
#include "cpu/ops.h"
#include "cuda/swin_mlp_wgmma_image.h"
#include "denoise.h"
#include "swin_ref.h"

using namespace denoise::cuda;

namespace {

struct KernelCfg {
    int C, HC, NCW, TANH;
};
std::vector<KernelCfg> built() {
    std::vector<KernelCfg> v;
#define MLP_CFG(C, HC, NCW, TANH) v.push_back({C, HC, NCW, TANH});
    SWIN_MLP_WGMMA_KERNELS(MLP_CFG)
#undef MLP_CFG
    return v;
}
std::string name(const KernelCfg &k) {
    return "C " + std::to_string(k.C) + " HC " + std::to_string(k.HC) + " NCW " + std::to_string(k.NCW) + " tanh " +
           std::to_string(k.TANH);
}

// PTX ISA: B element (k, n), k < 16, of a K-major operand without swizzle at descriptor `desc`
// in shared memory `smem`: core matrices of 8 rows (n) x 16 bytes (8 k), rows 16 bytes apart;
// core matrix (k / 8, n / 8) at start + (k / 8) LBO + (n / 8) SBO.
float b_via_desc(const std::vector<uint8_t> &smem, uint64_t desc, int k, int n) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    EXPECT_EQ((desc >> 49) & 7, 0u) << "base offset";
    EXPECT_EQ(desc >> 62, 0u) << "swizzle mode";
    const uint32_t at = start + (uint32_t)(k / 8) * lbo + (uint32_t)(n / 8) * sbo + (uint32_t)(n % 8) * 16 + (uint32_t)(k % 8) * 2;
    EXPECT_LE(at + 2, smem.size());
    uint16_t h;
    std::memcpy(&h, smem.data() + at, 2);
    return bf16_host::to_float(h);
}

uint32_t pack2(float lo, float hi) { return bf16_host::from_float(lo) | ((uint32_t)bf16_host::from_float(hi) << 16); }
float lo16(uint32_t r) { return bf16_host::to_float((uint16_t)(r & 0xffff)); }
float hi16(uint32_t r) { return bf16_host::to_float((uint16_t)(r >> 16)); }

// thread th (0..127) of a warpgroup: warp w, g = lane / 4, t = lane % 4
struct Th {
    int w, g, t;
};
Th th_of(int th) { return {th / 32, (th % 32) / 4, th % 4}; }

using Regs4 = std::vector<std::array<uint32_t, 4>>;  // one k16 step's A fragment of the 128 threads

// wgmma.m64nNk16 with A from registers (PTX ISA register fragments): thread (w, g, t) register i
// of A holds A[16 w + g + 8 (i % 2)][2 t + 8 (i / 2) + {0 (low half), 1}]; D register i is
// D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) + 2 t + i % 2]. d[th] has N / 2 floats.
void wgmma(std::vector<std::vector<float>> &d, const Regs4 &a, const std::vector<uint8_t> &smem, uint64_t desc, int N,
           bool acc) {
    float A[64][16];
    for (auto &r : A)
        for (float &v : r) v = NAN;
    for (int th = 0; th < 128; ++th) {
        const Th T = th_of(th);
        for (int i = 0; i < 4; ++i) {
            const int row = 16 * T.w + T.g + 8 * (i % 2), k = 2 * T.t + 8 * (i / 2);
            A[row][k] = lo16(a[th][i]);
            A[row][k + 1] = hi16(a[th][i]);
        }
    }
    std::vector<float> B((size_t)16 * N);
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < N; ++n) B[(size_t)k * N + n] = b_via_desc(smem, desc, k, n);
    for (int th = 0; th < 128; ++th) {
        const Th T = th_of(th);
        for (int i = 0; i < N / 2; ++i) {
            const int row = 16 * T.w + T.g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * T.t + i % 2;
            float s = 0.f;
            for (int k = 0; k < 16; ++k) s += A[row][k] * B[(size_t)k * N + col];
            d[th][i] = (acc ? d[th][i] : 0.f) + s;
        }
    }
}

float gelu_ref(float v, int tanh_form) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f * 0.7978845608028654f;
    const float u = v * (k0 + k1 * v * v), h = 0.5f * v;
    const float t = tanh_form ? bf16_host::round(std::tanh(bf16_host::round(u))) : std::tanh(u);
    return h + h * t;
}

// The kernel's consumer on x (n, C) in place, tile by tile, with the image copied into a
// shared-memory image the way the producer copies it (params once; chunk ch of a tile into stage
// ch, or q % WST when streamed). Rows past the map in the last tile hold NaN (stale data).
void emulate(const KernelCfg &k, const std::vector<uint8_t> &image, std::vector<float> &x, int64_t n, float eps) {
    const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.TANH);
    const int C = k.C, HC = k.HC, S1 = C / 16, S2 = HC / 16, XS = C + kMlpXPad;
    std::vector<uint8_t> smem(P.smem, 0xFF);
    std::memcpy(smem.data() + P.off_params, image.data(), P.params_bytes);
    const float *prm = reinterpret_cast<const float *>(smem.data() + P.off_params);
    const float *gam = prm, *bet = prm + C, *b1 = prm + 2 * C, *b2 = prm + 6 * C;
    std::vector<float> xs((size_t)kMlpRows * XS);
    int64_t q = 0;  // chunks streamed so far
    for (int64_t tile = 0; tile * kMlpRows < n; ++tile) {
        const int valid = (int)std::min<int64_t>(kMlpRows, n - tile * kMlpRows);
        for (int r = 0; r < kMlpRows; ++r)
            for (int c = 0; c < XS; ++c) xs[(size_t)r * XS + c] = r < valid && c < C ? x[(size_t)(tile * kMlpRows + r) * C + c] : NAN;
        // 1. LN2 -> fc1's A fragments
        std::vector<Regs4> a1(S1, Regs4(128));
        for (int th = 0; th < 128; ++th) {
            const Th T = th_of(th);
            const int rows[2] = {16 * T.w + T.g, 16 * T.w + T.g + 8};
            float mean[2], rstd[2];
            std::vector<float> v[2];
            for (int h = 0; h < 2; ++h) {
                v[h].resize(4 * S1);
                for (int s = 0; s < S1; ++s)
                    for (int e = 0; e < 4; ++e)
                        v[h][4 * s + e] = rows[h] < valid ? xs[(size_t)rows[h] * XS + 4 * swin_mlp_chunk_of(T.t, s) + e] : 0.f;
            }
            // the quad's sums (the kernel's shuffles: all C channels of the row)
            for (int h = 0; h < 2; ++h) {
                float s = 0.f;
                for (int tt = 0; tt < 4; ++tt)
                    for (int ss = 0; ss < S1; ++ss)
                        for (int e = 0; e < 4; ++e) {
                            const float val = rows[h] < valid ? xs[(size_t)rows[h] * XS + 4 * swin_mlp_chunk_of(tt, ss) + e] : 0.f;
                            s += val;
                        }
                mean[h] = s / C;
                float qq = 0.f;
                for (int tt = 0; tt < 4; ++tt)
                    for (int ss = 0; ss < S1; ++ss)
                        for (int e = 0; e < 4; ++e) {
                            const float val = rows[h] < valid ? xs[(size_t)rows[h] * XS + 4 * swin_mlp_chunk_of(tt, ss) + e] : 0.f;
                            qq += (val - mean[h]) * (val - mean[h]);
                        }
                rstd[h] = 1.0f / std::sqrt(qq / C + eps);
            }
            for (int s = 0; s < S1; ++s) {
                float y[2][4];
                for (int h = 0; h < 2; ++h)
                    for (int e = 0; e < 4; ++e) {
                        const int c = 4 * swin_mlp_chunk_of(T.t, s) + e;
                        y[h][e] = (v[h][4 * s + e] - mean[h]) * rstd[h] * gam[c] + bet[c];
                    }
                a1[s][th] = {pack2(y[0][0], y[0][1]), pack2(y[1][0], y[1][1]), pack2(y[0][2], y[0][3]), pack2(y[1][2], y[1][3])};
            }
        }
        // 2. per chunk: fc1, GELU -> fc2's A fragments, fc2
        std::vector<std::vector<float>> acc1(128, std::vector<float>(HC / 2)), acc2(128, std::vector<float>(C / 2));
        for (int ch = 0; ch < P.NCH; ++ch, ++q) {
            const int stage = P.resident ? ch : (int)(q % P.WST);
            const uint32_t w = P.off_w + (uint32_t)stage * P.chunk_bytes;
            std::memcpy(smem.data() + w, image.data() + swin_mlp_chunk_offset(P, ch), P.chunk_bytes);
            for (int s = 0; s < S1; ++s) wgmma(acc1, a1[s], smem, swin_mlp_desc(w + (uint32_t)s * swin_mlp_kstep_bytes(HC)), HC, s > 0);
            std::vector<Regs4> a2(S2, Regs4(128));
            for (int th = 0; th < 128; ++th) {
                const Th T = th_of(th);
                for (int s2 = 0; s2 < S2; ++s2)
                    for (int h = 0; h < 2; ++h) {
                        const int j = 2 * s2 + h, col = ch * HC + 8 * j + 2 * T.t;
                        const std::vector<float> &d = acc1[th];
                        a2[s2][th][2 * h] = pack2(gelu_ref(d[4 * j] + b1[col], k.TANH), gelu_ref(d[4 * j + 1] + b1[col + 1], k.TANH));
                        a2[s2][th][2 * h + 1] =
                            pack2(gelu_ref(d[4 * j + 2] + b1[col], k.TANH), gelu_ref(d[4 * j + 3] + b1[col + 1], k.TANH));
                    }
            }
            for (int s2 = 0; s2 < S2; ++s2)
                wgmma(acc2, a2[s2], smem, swin_mlp_desc(w + P.w1_bytes + (uint32_t)s2 * swin_mlp_kstep_bytes(C)), C,
                      !(ch == 0 && s2 == 0));
        }
        // 3. epilogue
        for (int th = 0; th < 128; ++th) {
            const Th T = th_of(th);
            for (int j = 0; j < C / 8; ++j)
                for (int h = 0; h < 2; ++h) {
                    const int row = 16 * T.w + T.g + 8 * h;
                    if (row >= valid) continue;
                    for (int e = 0; e < 2; ++e) {
                        const int col = 8 * j + 2 * T.t + e;
                        x[(size_t)(tile * kMlpRows + row) * C + col] = xs[(size_t)row * XS + col] + (acc2[th][4 * j + 2 * h + e] + b2[col]);
                    }
                }
        }
    }
}

// The CPU fp32 reference: x += fc2(GELU_tanh(fc1(LN2(x)))) + b2 (kernels/cpu ops, as unet.cpp).
void reference(const denoise::BlockW &B, int C, std::vector<float> &x, int64_t n, float eps) {
    using namespace denoise::cpu;
    std::vector<float> ln((size_t)n * C), hid((size_t)n * 4 * C);
    layernorm(x.data(), ln.data(), n, C, B.norm2.g, B.norm2.b, eps, x.data(), B.fc2.b);
    linear(ln.data(), n, C, C, B.fc1.w, C, nullptr, 4 * C, hid.data(), 0.f);
    gelu_tanh(hid.data(), n, 4 * C, B.fc1.b);
    linear(hid.data(), n, 4 * C, 4 * C, B.fc2.w, 4 * C, nullptr, C, x.data(), 1.f);
}

}  // namespace

TEST(SwinMlpWgmma, PlansOfTheKernelsBuilt) {
    for (const KernelCfg &k : built()) {
        SCOPED_TRACE(name(k));
        const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.TANH);
        ASSERT_TRUE(P.ok);
        EXPECT_LE(P.smem, kMlpSmemMax);
        EXPECT_EQ(P.NCH * P.HC, 4 * P.C);
        EXPECT_EQ(P.resident, P.WST == P.NCH);
        EXPECT_GE(P.off_params, 8u * P.nbar);
        for (uint32_t off : {P.off_params, P.off_w, P.off_x, P.chunk_bytes, P.params_bytes, P.x_stage_bytes})
            EXPECT_EQ(off % 128, 0u) << off;
        EXPECT_EQ(P.x_stride % 16, 0u);
        EXPECT_EQ(P.params_bytes, swin_mlp_align128(28u * P.C));
        EXPECT_EQ(P.image_bytes, P.params_bytes + (uint32_t)P.NCH * P.chunk_bytes);
        // registers: the producer's and the consumers' setmaxnreg within 64 K, multiples of 8
        EXPECT_EQ(P.regs_consumer % 8, 0);
        EXPECT_LE(P.regs_consumer, 240);
        EXPECT_LE(128 * kMlpProducerRegs + 128 * P.NCW * P.regs_consumer, 65536);
        // the descriptor's 14-bit start field reaches every operand (addresses below 256 KB)
        EXPECT_LT(P.smem, 1u << 18);
    }
    EXPECT_FALSE(swin_mlp_plan(96, 64, 2, 0).ok);   // C / 16 odd: no K permutation
    EXPECT_FALSE(swin_mlp_plan(64, 96, 2, 0).ok);   // no wgmma N 96 written out
    EXPECT_FALSE(swin_mlp_plan(64, 128, 1, 0).ok);  // one consumer: not built
    EXPECT_TRUE(swin_mlp_plan(64, 128, 2, 0).resident);
    EXPECT_FALSE(swin_mlp_plan(128, 64, 2, 0).resident);  // 256 KB of weights: streamed
}

TEST(SwinMlpWgmma, Fc1PermutationIsABijection) {
    for (int C : {64, 128}) {
        std::set<int> seen;
        for (int k = 0; k < C; ++k) {
            const int c = swin_mlp_fc1_channel(k);
            EXPECT_GE(c, 0);
            EXPECT_LT(c, C);
            seen.insert(c);
        }
        EXPECT_EQ((int)seen.size(), C);
        // each lane's chunks over its k steps are C / 16 distinct chunks, the quad's cover the row
        std::set<int> chunks;
        for (int t = 0; t < 4; ++t)
            for (int s = 0; s < C / 16; ++s) chunks.insert(swin_mlp_chunk_of(t, s));
        EXPECT_EQ((int)chunks.size(), C / 4);
        EXPECT_EQ(*chunks.rbegin(), C / 4 - 1);
    }
}

TEST(SwinMlpWgmma, PackerMatchesTheDescriptorLayout) {
    for (const KernelCfg &k : built()) {
        if (k.NCW != 2 || k.TANH) continue;  // the image depends on (C, HC) only
        SCOPED_TRACE(name(k));
        const int C = k.C, HC = k.HC, Ch = 4 * C;
        swin_ref::RandomBlock rb(C, C / 32, 0, 31 + C + HC);
        std::vector<uint8_t> img;
        std::string err;
        ASSERT_EQ(swin_mlp_image_pack(rb.w, C, HC, &img, &err), 0) << err;
        const SwinMlpPlan P = swin_mlp_plan(C, HC, 2, 0);
        ASSERT_EQ(img.size(), P.image_bytes);
        // params
        const float *prm = reinterpret_cast<const float *>(img.data());
        for (int c = 0; c < C; ++c) {
            EXPECT_EQ(prm[c], rb.n2g[c]);
            EXPECT_EQ(prm[C + c], rb.n2b[c]);
            EXPECT_EQ(prm[6 * C + c], rb.fc2b[c]);
        }
        for (int h = 0; h < Ch; ++h) EXPECT_EQ(prm[2 * C + h], rb.fc1b[h]);
        int64_t bad = 0;
        for (int ch = 0; ch < P.NCH; ++ch) {
            // the chunk as the kernel sees it in a weight stage at an arbitrary 128-byte address
            const uint32_t base = 4096;
            std::vector<uint8_t> smem(base + P.chunk_bytes, 0);
            std::memcpy(smem.data() + base, img.data() + swin_mlp_chunk_offset(P, ch), P.chunk_bytes);
            for (int s = 0; s < C / 16; ++s)
                for (int kk = 0; kk < 16; ++kk)
                    for (int n = 0; n < HC; ++n) {
                        const float want = bf16_host::round(rb.fc1w[(size_t)(ch * HC + n) * C + swin_mlp_fc1_channel(16 * s + kk)]);
                        bad += b_via_desc(smem, swin_mlp_desc(base + (uint32_t)s * swin_mlp_kstep_bytes(HC)), kk, n) != want;
                    }
            for (int s = 0; s < HC / 16; ++s)
                for (int kk = 0; kk < 16; ++kk)
                    for (int n = 0; n < C; ++n) {
                        const float want = bf16_host::round(rb.fc2w[(size_t)n * Ch + ch * HC + 16 * s + kk]);
                        bad += b_via_desc(smem, swin_mlp_desc(base + P.w1_bytes + (uint32_t)s * swin_mlp_kstep_bytes(C)), kk, n) != want;
                    }
        }
        EXPECT_EQ(bad, 0);
        // every byte of a chunk is some element's: the offsets tile the chunk
        std::vector<int> hits(P.chunk_bytes, 0);
        for (int kq = 0; kq < C; ++kq)
            for (int n = 0; n < HC; ++n)
                for (int b = 0; b < 2; ++b) ++hits[swin_mlp_b_offset(kq, n, HC) + b];
        for (int kq = 0; kq < HC; ++kq)
            for (int n = 0; n < C; ++n)
                for (int b = 0; b < 2; ++b) ++hits[P.w1_bytes + swin_mlp_b_offset(kq, n, C) + b];
        int64_t off = 0;
        for (int h : hits) off += h != 1;
        EXPECT_EQ(off, 0);
    }
}

TEST(SwinMlpWgmma, SharedMemoryReadsAreConflictFree) {
    for (int C : {64, 128}) {
        SCOPED_TRACE("C " + std::to_string(C));
        const int XS = C + kMlpXPad;
        for (int w = 0; w < 4; ++w)
            for (int h = 0; h < 2; ++h) {
                // LayerNorm: float4 per lane, served per quarter warp: 8 distinct 16-byte bank groups
                for (int s = 0; s < C / 16; ++s)
                    for (int qw = 0; qw < 4; ++qw) {
                        std::set<int> groups;
                        for (int l = 8 * qw; l < 8 * qw + 8; ++l) {
                            const int row = 16 * w + l / 4 + 8 * h, c = 4 * swin_mlp_chunk_of(l % 4, s);
                            groups.insert(((row * XS + c) / 4) % 8);
                        }
                        EXPECT_EQ(groups.size(), 8u) << "warp " << w << " row half " << h << " step " << s << " quarter " << qw;
                    }
                // epilogue: float2 per lane, served per half warp: 32 distinct 4-byte banks
                for (int j = 0; j < C / 8; ++j)
                    for (int hw = 0; hw < 2; ++hw) {
                        std::set<int> banks;
                        for (int l = 16 * hw; l < 16 * hw + 16; ++l) {
                            const int row = 16 * w + l / 4 + 8 * h, col = 8 * j + 2 * (l % 4);
                            banks.insert((row * XS + col) % 32);
                            banks.insert((row * XS + col + 1) % 32);
                        }
                        EXPECT_EQ(banks.size(), 32u) << "warp " << w << " j " << j;
                    }
            }
    }
}

TEST(SwinMlpWgmma, EmulatedConsumerMatchesTheCpuReference) {
    const float eps = 1e-5f;
    uint32_t seed = 500;
    for (const KernelCfg &k : built()) {
        if (k.NCW != 2) continue;  // the consumer's math does not depend on NCW
        for (int64_t n : {int64_t(1), int64_t(64), int64_t(130)}) {
            SCOPED_TRACE(name(k) + " n " + std::to_string(n));
            const int C = k.C;
            swin_ref::RandomBlock rb(C, C / 32, 0, seed += 7);
            std::vector<uint8_t> img;
            std::string err;
            ASSERT_EQ(swin_mlp_image_pack(rb.w, C, k.HC, &img, &err), 0) << err;
            const std::vector<float> x0 = swin_ref::random_map((size_t)n * C, seed + 1);
            std::vector<float> got = x0, ref = x0;
            emulate(k, img, got, n, eps);
            reference(rb.w, C, ref, n, eps);
            const swin_ref::Error e = swin_ref::compare(got.data(), ref.data(), x0.data(), (int64_t)ref.size());
            std::printf("  emulated %s n %lld: rel L2 %.2e, change rel L2 %.2e, max abs %.2e\n", name(k).c_str(), (long long)n,
                        e.rel_l2, e.delta_rel_l2, e.max_abs);
            EXPECT_TRUE(swin_ref::passes(e)) << "rel L2 " << e.rel_l2 << " change rel L2 " << e.delta_rel_l2 << " non-finite "
                                             << e.nonfinite;
            // the bf16 roundings of the LN output and the hidden units only (about 3e-3 for the
            // fused kernel's block); a wrong layout gives O(1)
            EXPECT_LT(e.delta_rel_l2, 1e-2) << "change rel L2";
        }
    }
}

namespace {

// ---- the mbarrier protocol of one CTA, transcribed from the kernel's producer and consumer loops
enum OpKind { WAIT, ARRIVE, EXPECT_TX, COPY, CHECK_READ, END_READ };
struct Op {
    OpKind kind;
    int bar = 0;          // barrier index
    uint32_t arg = 0;     // parity (WAIT), count (ARRIVE), bytes (EXPECT_TX, COPY)
    int region = -1;      // COPY / CHECK_READ / END_READ: the shared-memory region (x stage or weight stage)
    int64_t content = 0;  // COPY: what lands there; CHECK_READ: what must be there
};

struct Barrier {
    uint32_t init = 0, pending = 0;
    int64_t tx = 0;
    uint32_t phase = 0;  // completed phases
    void maybe_complete() {
        if (pending == 0 && tx == 0) {
            ++phase;
            pending = init;
        }
    }
};

struct Protocol {
    SwinMlpPlan P;
    std::vector<uint32_t> init;              // barrier counts
    std::vector<std::vector<Op>> agents;     // 0: producer warp (lane 0's view), 1..NCW: consumers
    int x_region(int c, int j) const { return c * P.XST + j; }
    int w_region(int st) const { return P.NCW * P.XST + st; }
};

// cta of G CTAs, ntiles tiles. Weight contents: chunk q's id (q = r NCH + ch when streamed, ch
// when resident); x contents: the tile.
Protocol transcribe(const SwinMlpPlan &P, int cta, int G, int64_t ntiles) {
    Protocol pr;
    pr.P = P;
    const int NCW = P.NCW;
    auto bw_full = [&](int i) { return 1 + i; };
    auto bw_empty = [&](int i) { return 1 + P.WST + i; };
    auto bx_full = [&](int c, int j) { return 1 + 2 * P.WST + c * P.XST + j; };
    auto bx_empty = [&](int c, int j) { return 1 + 2 * P.WST + (NCW + c) * P.XST + j; };
    pr.init.assign(P.nbar, 1);
    for (int i = 0; i < P.WST; ++i) pr.init[bw_empty(i)] = 128 * NCW;
    for (int c = 0; c < NCW; ++c)
        for (int j = 0; j < P.XST; ++j) pr.init[bx_empty(c, j)] = 128;
    pr.agents.resize(NCW + 1);
    // producer
    std::vector<Op> &p = pr.agents[0];
    p.push_back({EXPECT_TX, 0, P.params_bytes});
    p.push_back({COPY, 0, P.params_bytes, -1, 0});
    if (P.resident)
        for (int ch = 0; ch < P.NCH; ++ch) {
            p.push_back({EXPECT_TX, bw_full(ch), P.chunk_bytes});
            p.push_back({COPY, bw_full(ch), P.chunk_bytes, pr.w_region(ch), ch});
        }
    for (int r = 0;; ++r) {
        const int64_t first = cta + (int64_t)r * NCW * G;
        if (first >= ntiles) break;
        const int xst = r % P.XST;
        for (int c = 0; c < NCW; ++c) {
            const int64_t tile = first + (int64_t)c * G;
            if (tile >= ntiles) break;
            p.push_back({WAIT, bx_empty(c, xst), (uint32_t)(((r / P.XST) & 1) ^ 1)});
            p.push_back({EXPECT_TX, bx_full(c, xst), 256});
            p.push_back({COPY, bx_full(c, xst), 256, pr.x_region(c, xst), tile});
        }
        if (!P.resident)
            for (int ch = 0; ch < P.NCH; ++ch) {
                const int q = r * P.NCH + ch, st = q % P.WST;
                p.push_back({WAIT, bw_empty(st), (uint32_t)(((q / P.WST) & 1) ^ 1)});
                p.push_back({EXPECT_TX, bw_full(st), P.chunk_bytes});
                p.push_back({COPY, bw_full(st), P.chunk_bytes, pr.w_region(st), q});
            }
    }
    // consumers (one agent per warpgroup: its 128 arrivals at once)
    for (int c = 0; c < NCW; ++c) {
        std::vector<Op> &o = pr.agents[1 + c];
        o.push_back({WAIT, 0, 0});
        if (P.resident)
            for (int ch = 0; ch < P.NCH; ++ch) o.push_back({WAIT, bw_full(ch), 0});
        for (int r = 0;; ++r) {
            const int64_t first = cta + (int64_t)r * NCW * G;
            if (first >= ntiles) break;
            const int64_t tile = first + (int64_t)c * G;
            auto chunk = [&](int ch) {  // the kernel's chunk(): wait (streamed), then it is read
                if (P.resident) {
                    o.push_back({CHECK_READ, 0, 0, pr.w_region(ch), ch});
                } else {
                    const int q = r * P.NCH + ch;
                    o.push_back({WAIT, bw_full(q % P.WST), (uint32_t)((q / P.WST) & 1)});
                    o.push_back({CHECK_READ, 0, 0, pr.w_region(q % P.WST), q});
                }
            };
            if (tile >= ntiles) {
                if (!P.resident)
                    for (int ch = 0; ch < P.NCH; ++ch) {
                        const int q = r * P.NCH + ch;
                        o.push_back({WAIT, bw_full(q % P.WST), (uint32_t)((q / P.WST) & 1)});
                        o.push_back({ARRIVE, bw_empty(q % P.WST), 128});
                    }
                continue;
            }
            const int xst = r % P.XST;
            o.push_back({WAIT, bx_full(c, xst), (uint32_t)((r / P.XST) & 1)});
            o.push_back({CHECK_READ, 0, 0, pr.x_region(c, xst), tile});
            chunk(0);
            for (int ch = 0; ch < P.NCH; ++ch) {
                if (ch + 1 < P.NCH) chunk(ch + 1);
                if (!P.resident) {
                    const int q = r * P.NCH + ch;
                    o.push_back({END_READ, 0, 0, pr.w_region(q % P.WST)});
                    o.push_back({ARRIVE, bw_empty(q % P.WST), 128});
                } else {
                    o.push_back({END_READ, 0, 0, pr.w_region(ch)});
                }
            }
            o.push_back({END_READ, 0, 0, pr.x_region(c, xst)});
            o.push_back({ARRIVE, bx_empty(c, xst), 128});
        }
    }
    return pr;
}

// Runs the agents in a random interleaving, copies landing after random delays. Returns "" or
// what went wrong; *tiles gets each tile a consumer read.
std::string simulate(const Protocol &pr, uint32_t seed, std::vector<int64_t> *tiles) {
    std::mt19937 rng(seed);
    std::vector<Barrier> bars(pr.init.size());
    for (size_t i = 0; i < bars.size(); ++i) bars[i].init = bars[i].pending = pr.init[i];
    const int nregion = pr.P.NCW * pr.P.XST + pr.P.WST;
    std::vector<int64_t> content(nregion, -1);
    std::vector<int> readers(nregion, 0);
    std::vector<size_t> pc(pr.agents.size(), 0);
    struct Flight {
        int bar, region;
        uint32_t bytes;
        int64_t content;
        int delay;
    };
    std::vector<Flight> flights;
    std::vector<std::set<int>> reading(pr.agents.size());
    for (long step = 0; step < 10000000; ++step) {
        bool done = flights.empty();
        for (size_t a = 0; a < pr.agents.size(); ++a) done = done && pc[a] == pr.agents[a].size();
        if (done) return "";
        // candidates: agents whose next op can run, and copies in flight
        std::vector<int> ready;
        for (size_t a = 0; a < pr.agents.size(); ++a) {
            if (pc[a] == pr.agents[a].size()) continue;
            const Op &op = pr.agents[a][pc[a]];
            if (op.kind == WAIT && (bars[op.bar].phase & 1) == op.arg) continue;  // phase of that parity not complete
            ready.push_back((int)a);
        }
        if (ready.empty() && flights.empty()) return "deadlock at step " + std::to_string(step);
        const bool land = !flights.empty() && (ready.empty() || rng() % 3 == 0);
        if (land) {
            const size_t i = rng() % flights.size();
            Flight f = flights[i];
            flights.erase(flights.begin() + (long)i);
            if (f.region >= 0) content[f.region] = f.content;
            bars[f.bar].tx -= f.bytes;
            bars[f.bar].maybe_complete();
            continue;
        }
        const int a = ready[rng() % ready.size()];
        const Op &op = pr.agents[a][pc[a]++];
        switch (op.kind) {
        case WAIT: break;
        case ARRIVE:
            if (bars[op.bar].pending < op.arg) return "over-arrival on barrier " + std::to_string(op.bar);
            bars[op.bar].pending -= op.arg;
            bars[op.bar].maybe_complete();
            break;
        case EXPECT_TX:
            bars[op.bar].tx += op.arg;
            if (bars[op.bar].pending == 0) return "expect_tx on a complete barrier";
            --bars[op.bar].pending;
            bars[op.bar].maybe_complete();
            break;
        case COPY:
            if (op.region >= 0 && readers[op.region]) return "copy into region " + std::to_string(op.region) + " while it is read";
            flights.push_back({op.bar, op.region, op.arg, op.content, 0});
            break;
        case CHECK_READ:
            if (content[op.region] != op.content)
                return "consumer " + std::to_string(a - 1) + " read " + std::to_string(content[op.region]) + " in region " +
                       std::to_string(op.region) + ", expected " + std::to_string(op.content);
            if (!reading[a].count(op.region)) {
                reading[a].insert(op.region);
                ++readers[op.region];
            }
            if (op.region < pr.P.NCW * pr.P.XST) tiles->push_back(op.content);
            break;
        case END_READ:
            if (reading[a].erase(op.region)) --readers[op.region];
            break;
        }
    }
    return "no end after 10^7 steps";
}

}  // namespace

TEST(SwinMlpWgmma, PipelineProtocolHasNoDeadlockOrRace) {
    for (const KernelCfg &k : built()) {
        const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.TANH);
        for (int G : {1, 3})
            for (int64_t ntiles : {int64_t(1), int64_t(2), int64_t(5), int64_t(13), int64_t(24)}) {
                std::vector<int64_t> all;
                for (int cta = 0; cta < G; ++cta) {
                    const Protocol pr = transcribe(P, cta, G, ntiles);
                    for (uint32_t seed = 1; seed <= 4; ++seed) {
                        std::vector<int64_t> tiles;
                        const std::string why = simulate(pr, seed * 7919 + cta, &tiles);
                        ASSERT_EQ(why, "") << name(k) << " G " << G << " tiles " << ntiles << " cta " << cta << " seed " << seed;
                        if (seed == 1) all.insert(all.end(), tiles.begin(), tiles.end());
                    }
                }
                std::sort(all.begin(), all.end());
                std::vector<int64_t> want(ntiles);
                for (int64_t i = 0; i < ntiles; ++i) want[i] = i;
                EXPECT_EQ(all, want) << name(k) << " G " << G << " tiles " << ntiles << ": every tile once";
            }
    }
}

TEST(SwinMlpWgmma, PackerRefusals) {
    swin_ref::RandomBlock rb(64, 2, 0, 3);
    std::vector<uint8_t> img;
    std::string err;
    EXPECT_EQ(swin_mlp_image_pack(rb.w, 96, 64, &img, &err), DENOISE_EINVAL);
    EXPECT_NE(err.find("no kernel plan"), std::string::npos) << err;
    EXPECT_EQ(swin_mlp_image_pack(rb.w, 128, 64, &img, &err), DENOISE_EINVAL);  // a C 64 block
    EXPECT_NE(err.find("expected 128"), std::string::npos) << err;
    denoise::BlockW b = rb.w;
    b.fc2.w = nullptr;
    EXPECT_EQ(swin_mlp_image_pack(b, 64, 64, &img, &err), DENOISE_EINVAL);
    b = rb.w;
    b.norm2.n = 32;
    EXPECT_EQ(swin_mlp_image_pack(b, 64, 128, &img, &err), DENOISE_EINVAL);
    EXPECT_EQ(swin_mlp_image_pack(rb.w, 64, 128, &img, &err), 0) << err;
}
