// The fused Swin block's descriptor and weight image (kernels/cuda/swin_block_desc.h,
// swin_weight_image.h), on the CPU:
//  - for every tile plan built (SWIN_FUSED_KERNELS) and a few more: the descriptor's phase FLOPs
//    equal the block's FLOP count computed here from the module shapes, mma = FLOP / 4096, the
//    image sections tile the image exactly and the GEMM phases read each weight byte once
//    (swin_block_desc_check), the warp grids split every GEMM evenly over all warps;
//  - the packer against the PTX ISA's mma B-fragment and C-fragment definitions, written out
//    independently here: every weight element and every bias-table entry is found where a lane's
//    fragment register reads it;
//  - what cannot be built is refused (tile plans, packer shapes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/swin_block_desc.h"
#include "cuda/swin_weight_image.h"
#include "denoise.h"
#include "swin_ref.h"

using namespace denoise::cuda;

namespace {

using Cfg = swin_ref::FusedTile;

// FLOP of one block per token, from the module shapes (model.py SwinBlock): the four linears and,
// per head, q k^T (64 keys x hd) and P v (64 x hd), 2 FLOP per multiply-add.
int64_t flop_per_token(int C, int heads) {
    const int64_t hd = C / heads;
    const int64_t linears = 2 * ((int64_t)C * 3 * C + (int64_t)C * C + (int64_t)C * 4 * C + (int64_t)4 * C * C);
    const int64_t attn = heads * (2 * 64 * hd + 2 * 64 * hd);
    return linears + attn;
}

}  // namespace

TEST(SwinBlockDesc, InstantiatedTilesAreConsistent) {
    std::vector<Cfg> cfgs = swin_ref::instantiated_tiles();
    ASSERT_FALSE(cfgs.empty());
    // not built, but the plan is generic: these must be consistent too
    cfgs.push_back({16, 16, 1, 4});
    cfgs.push_back({48, 16, 1, 4});
    cfgs.push_back({160, 32, 1, 8});
    cfgs.push_back({224, 32, 1, 8});
    cfgs.push_back({64, 64, 2, 8});
    cfgs.push_back({48, 16, 1, 8, 1, 16});   // q in the attention phase: 12 items on 8 warps
    cfgs.push_back({48, 48, 1, 4, 1, 4});    // head dim 48, 4 accumulator tiles
    cfgs.push_back({256, 32, 1, 16, 1, 8});
    for (const Cfg &c : cfgs) {
        SCOPED_TRACE("C " + std::to_string(c.C) + " hd " + std::to_string(c.HD) + " tile " + std::to_string(c.TW) + "/" +
                     std::to_string(c.NW) + " qa " + std::to_string(c.QA) + " ma " + std::to_string(c.MA));
        const int heads = c.C / c.HD;
        const SwinBlockDesc d = swin_block_desc(c.C, heads, c.TW, c.NW, c.QA, c.MA);
        ASSERT_TRUE(d.tile.ok);
        std::string why;
        EXPECT_TRUE(swin_block_desc_check(d, &why)) << why;
        EXPECT_EQ(d.flop_per_cta, flop_per_token(c.C, heads) * 64 * c.TW);
        EXPECT_EQ(d.mma_per_cta * 4096, d.flop_per_cta);
        EXPECT_LE(d.tile.smem, kSwinSmemMax);
        EXPECT_EQ(d.tile.HC * d.tile.NCH, 4 * c.C);
        // every GEMM split evenly over all warps
        const int MTT = 4 * c.TW;
        const struct {
            SwinWarpGrid g;
            int NTT;
        } gemms[] = {{d.tile.qkv, (c.QA ? 2 : 3) * c.C / 8}, {d.tile.proj, c.C / 8}, {d.tile.fc1, d.tile.HC / 8}, {d.tile.fc2, c.C / 8}};
        for (const auto &x : gemms) {
            EXPECT_EQ(x.g.WM * x.g.WN, c.NW);
            EXPECT_EQ(x.g.MT * x.g.WM, MTT);
            EXPECT_EQ(x.g.NTW * x.g.WN, x.NTT);
            ASSERT_GT(x.g.NT, 0);
            EXPECT_EQ(x.g.NTW % x.g.NT, 0);
            EXPECT_LE(x.g.MT * x.g.NT, c.MA);
        }
        // shared memory: u holds q | k | v, or with qa k | v, or the MLP chunk, whichever is wider
        const int ucols = std::max((c.QA ? 2 : 3) * c.C, d.tile.HC);
        EXPECT_EQ(d.tile.smem, 64u * c.TW * (4u * (c.C + 8) + 2u * (c.C + 8) + 2u * (ucols + 8)));
    }
    std::printf("%s", swin_block_desc_text(swin_block_desc(32, 1, 2, 8)).c_str());
    std::printf("%s", swin_block_desc_text(swin_block_desc(64, 2, 1, 4, true, 8)).c_str());
}

TEST(SwinBlockDesc, FlopFormula) {
    // model v1 per token: C 32 -> 32768, C 64 -> 114688, C 128 -> 425984
    EXPECT_EQ(swin_block_flop(32, 1), 32768);
    EXPECT_EQ(swin_block_flop(64, 1), 114688);
    EXPECT_EQ(swin_block_flop(128, 1), 425984);
    for (int C : {16, 32, 48, 64, 96, 128, 192, 256}) EXPECT_EQ(swin_block_flop(C, 10), 10 * flop_per_token(C, C / 16));
}

TEST(SwinBlockDesc, RefusesWhatCannotBeBuilt) {
    EXPECT_FALSE(swin_tile(40, 8, 1, 4).ok);      // C not a multiple of 16
    EXPECT_FALSE(swin_tile(64, 24, 1, 4).ok);     // head dim not a multiple of 16
    EXPECT_FALSE(swin_tile(64, 32, 3, 4).ok);     // 3 windows per CTA
    EXPECT_FALSE(swin_tile(64, 32, 1, 6).ok);     // 6 warps
    EXPECT_FALSE(swin_tile(256, 32, 2, 8).ok);    // 400 KB of shared memory
    EXPECT_FALSE(swin_tile(272, 16, 1, 4).ok);    // C > 256
    EXPECT_FALSE(swin_block_desc(64, 3, 1, 4).tile.ok);  // 64 / 3 heads
    EXPECT_FALSE(swin_tile(64, 32, 1, 4, false, 6).ok);  // 6 accumulator tiles per warp
    EXPECT_FALSE(swin_tile(64, 32, 1, 4, false, 2).ok);  // MT 4 needs 4 at least
}

// What the occupancy variants rest on: shared memory per CTA and what it admits per SM.
TEST(SwinBlockDesc, OccupancyVariants) {
    EXPECT_EQ(swin_tile(64, 32, 1, 4).smem, 53248u);
    EXPECT_EQ(swin_tile(64, 32, 1, 4, true).smem, 45056u);   // k | v only: 5 CTAs fit sm_90, 2 sm_89
    EXPECT_EQ(swin_tile(128, 32, 1, 8).smem, 102400u);
    EXPECT_EQ(swin_tile(128, 32, 1, 8, true).smem, 86016u);  // within sm_89's 99 KB per block
    EXPECT_EQ(swin_tile(32, 32, 1, 4, true).smem, swin_tile(32, 32, 1, 4).smem);  // the MLP chunk is wider
    EXPECT_EQ(swin_min_ctas(4, 53248, 90), 4);
    EXPECT_EQ(swin_min_ctas(5, 53248, 90), 4);   // clamped to what shared memory admits
    EXPECT_EQ(swin_min_ctas(5, 45056, 90), 5);
    EXPECT_EQ(swin_min_ctas(4, 53248, 80), 3);
    EXPECT_EQ(swin_min_ctas(4, 53248, 89), 1);
    EXPECT_EQ(swin_min_ctas(5, 45056, 89), 2);
    EXPECT_EQ(swin_min_ctas(4, 53248, 0), 4);    // host pass: as given
    EXPECT_EQ(swin_min_ctas(0, 53248, 90), 0);   // no minimum
    // ma 8 halves the live accumulators of C 64's fc1 (4 m-tiles x 4 n-tiles -> chunks of 2)
    EXPECT_EQ(swin_tile(64, 32, 1, 4).fc1.MT * swin_tile(64, 32, 1, 4).fc1.NT, 16);
    EXPECT_EQ(swin_tile(64, 32, 1, 4, false, 8).fc1.MT * swin_tile(64, 32, 1, 4, false, 8).fc1.NT, 8);
    // every preference row names a kernel that is built
    int rows = 0, found = 0;
    const std::vector<swin_ref::FusedKernel> ks = swin_ref::instantiated_kernels();
#define PREF_ROW(SM_, C_, HD_, TW_, NW_, QA_, MA_, PF_, CTAS_)                                                        \
    ++rows;                                                                                                            \
    for (const swin_ref::FusedKernel &k : ks)                                                                          \
        if (k.t.C == C_ && k.t.HD == HD_ && k.t.TW == TW_ && k.t.NW == NW_ && k.t.QA == QA_ && k.t.MA == MA_ &&        \
            k.PF == PF_ && k.CTAS == CTAS_) {                                                                          \
            ++found;                                                                                                   \
            break;                                                                                                     \
        }
    SWIN_FUSED_PREFERENCE(PREF_ROW)
#undef PREF_ROW
    EXPECT_GT(rows, 0);
    EXPECT_EQ(found, rows) << "a SWIN_FUSED_PREFERENCE row names a kernel SWIN_FUSED_KERNELS does not build";
    for (const swin_ref::FusedKernel &k : ks) EXPECT_TRUE(swin_tile(k.t.C, k.t.HD, k.t.TW, k.t.NW, k.t.QA, k.t.MA).ok);
}

TEST(SwinWeightImage, FragmentOrderMatchesThePtxLayout) {
    for (const Cfg &c : {Cfg{32, 32, 1, 4}, Cfg{48, 48, 1, 4}, Cfg{64, 32, 1, 4}, Cfg{48, 16, 1, 4}}) {
        SCOPED_TRACE("C " + std::to_string(c.C));
        const int C = c.C, heads = C / c.HD, Ch = 4 * C;
        swin_ref::RandomBlock rb(C, heads, 4, 1000 + C);
        std::vector<uint8_t> img;
        std::string err;
        ASSERT_EQ(swin_weight_image_pack(rb.w, C, heads, &img, &err), 0) << err;
        const SwinImageLayout L = swin_image_layout(C, heads);
        ASSERT_EQ(img.size(), L.total());
        // B fragment (mma.m16n8k16 .col): lane 4 g + t, register b0 holds k = 2t, 2t+1 and b1
        // k = 2t+8, 2t+9 of column n = g; a unit holds k steps 2 kp (bytes 0..7 of the lane) and
        // 2 kp + 1 (bytes 8..15).
        auto check_gemm = [&](int sec, const float *W, int N, int K, bool kp_major) {
            const int NT = N / 8, KP = (K + 31) / 32;
            int bad = 0;
            for (int n = 0; n < N; ++n)
                for (int k = 0; k < KP * 32; ++k) {
                    const int kk = k % 32, step = kk / 16, reg = (kk % 16) / 8, t = (kk % 8) / 2, half = kk % 2;
                    const int lane = 4 * (n % 8) + t;
                    const uint32_t unit = kp_major ? (uint32_t)((k / 32) * NT + n / 8) : (uint32_t)((n / 8) * KP + k / 32);
                    const size_t at = L.off[sec] + 512u * unit + 16 * lane + 8 * step + 4 * reg + 2 * half;
                    uint16_t h;
                    std::memcpy(&h, img.data() + at, 2);
                    const uint16_t want = k < K ? swin_bf16_bits(W[(size_t)n * K + k]) : 0;
                    if (h != want && ++bad <= 3)
                        ADD_FAILURE() << swin_section_name(sec) << " W[" << n << "][" << k << "]: image has " << h
                                      << ", expected " << want;
                }
            EXPECT_EQ(bad, 0) << swin_section_name(sec);
        };
        check_gemm(kSecQkvW, rb.qkvw.data(), 3 * C, C, false);
        check_gemm(kSecProjW, rb.projw.data(), C, C, false);
        check_gemm(kSecFc1W, rb.fc1w.data(), Ch, C, false);
        check_gemm(kSecFc2W, rb.fc2w.data(), C, Ch, true);
        // bias table in C-fragment order: lane 4 g + t, register r of key n-tile j holds row
        // g + 8 (r / 2), column 8 j + 2 t + r % 2 of the query m-tile; times log2(e)
        int bad = 0;
        for (int h = 0; h < heads; ++h)
            for (int q = 0; q < 64; ++q)
                for (int k = 0; k < 64; ++k) {
                    const int mt = q / 16, g = q % 8, r = 2 * ((q % 16) / 8) + k % 2, j = k / 8, t = (k % 8) / 2;
                    float v;
                    std::memcpy(&v, img.data() + L.off[kSecRelB] + 4 * ((((size_t)h * 4 + mt) * 32 + 4 * g + t) * 32 + 4 * j + r), 4);
                    const float want = rb.w.rel_bias[((size_t)h * 64 + q) * 64 + k] * 1.4426950408889634f;
                    if (v != want && ++bad <= 3) ADD_FAILURE() << "relb h " << h << " q " << q << " k " << k;
                }
        EXPECT_EQ(bad, 0);
        // the fp32 vectors verbatim
        auto check_f32 = [&](int sec, const std::vector<float> &v) {
            ASSERT_EQ(L.bytes(sec), 4 * v.size());
            EXPECT_EQ(std::memcmp(img.data() + L.off[sec], v.data(), 4 * v.size()), 0) << swin_section_name(sec);
        };
        check_f32(kSecLn1G, rb.n1g);
        check_f32(kSecLn1B, rb.n1b);
        check_f32(kSecQkvB, rb.qkvb);
        check_f32(kSecProjB, rb.projb);
        check_f32(kSecLn2G, rb.n2g);
        check_f32(kSecLn2B, rb.n2b);
        check_f32(kSecFc1B, rb.fc1b);
        check_f32(kSecFc2B, rb.fc2b);
    }
}

TEST(SwinWeightImage, RefusesWrongShapes) {
    swin_ref::RandomBlock rb(64, 2, 0, 7);
    std::vector<uint8_t> img;
    std::string err;
    EXPECT_EQ(swin_weight_image_pack(rb.w, 40, 2, &img, &err), DENOISE_EINVAL);
    EXPECT_NE(err.find("multiple of 16"), std::string::npos) << err;
    EXPECT_EQ(swin_weight_image_pack(rb.w, 64, 3, &img, &err), DENOISE_EINVAL);
    EXPECT_EQ(swin_weight_image_pack(rb.w, 64, 4, &img, &err), DENOISE_EINVAL);  // bias table is for 2 heads
    EXPECT_NE(err.find("relative position bias"), std::string::npos) << err;
    denoise::BlockW w = rb.w;
    w.fc1.out = 128;
    EXPECT_EQ(swin_weight_image_pack(w, 64, 2, &img, &err), DENOISE_EINVAL);
    EXPECT_NE(err.find("fc1"), std::string::npos) << err;
    w = rb.w;
    w.norm2.b = nullptr;
    EXPECT_EQ(swin_weight_image_pack(w, 64, 2, &img, &err), DENOISE_EINVAL);
    EXPECT_EQ(swin_weight_image_pack(rb.w, 64, 2, &img, &err), 0) << err;
}
