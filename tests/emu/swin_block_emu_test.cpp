// The fused Swin block kernel (kernels/cuda/swin_block_fused.cu) run on the CPU through the warp
// emulator (tests/emu/warp_emu.h: the same kernel source, its mma/ldmatrix/shuffle/barrier as
// rendezvous of fibers) against the CPU reference block (kernels/cpu ops), and its mma count
// against the descriptor. No GPU needed: this is what `make check` can say about the kernel's
// index math (shifted-window loads and stores, the region mask, fragment layouts as written in
// warp_mma.h, the weight image order, the MLP chunks, tile tails).
//
// Each case: random weights scaled like trained ones and x ~ N(0, 1) (fresh per case), shared
// memory poisoned with 0xFF bytes (NaN) before every CTA, fp32 and bf16 residual stream in place
// and fp32 in with the output in a separate bf16 map (poisoned, the input checked untouched); pass:
// relative L2 of the output < 1e-2 and of the block's change < 3e-2, all finite; mma issued ==
// mma_per_cta x CTAs; no shared-memory hazard (warp_emu.h: two threads' accesses to a byte, one a
// write, without a barrier between that orders them, whichever ran first here). Then every tile
// plan of a width against that width's default plan on the same input: the output bit for bit the
// same (the plans differ in which warp computes what, where q passes and when loads are issued,
// never in an operation or its order). And every kernel that swin_block_fused.cu builds
// (SWIN_FUSED_KERNELS) once more on masked windows, for its hazards above all.
#define DENOISE_WARP_EMULATION 1
#include "warp_emu.h"

#include "cuda/swin_block_fused.cu"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "swin_ref.h"

using namespace denoise::cuda;

namespace {

constexpr float kEps = 1e-5f;

// Where byte `off` of the tile plan T's shared memory lies: buffer, row and element column.
std::string smem_place(const SwinTile &T, size_t off) {
    struct Buf {
        const char *name;
        uint32_t at;
        int elem, stride;
    };
    const Buf bufs[] = {{"xs", T.off_xs, 4, T.sx},
                        {"an", T.off_an, 2, T.sa},
                        {T.qa ? "u (k | v)" : "u (q | k | v)", T.off_u, 2, T.sq}};
    for (int i = 2; i >= 0; --i)
        if (off >= bufs[i].at) {
            const size_t e = (off - bufs[i].at) / bufs[i].elem;
            return std::string(bufs[i].name) + " row " + std::to_string(e / bufs[i].stride) + " col " +
                   std::to_string(e % bufs[i].stride) + (i == 2 ? " (as hid: row " + std::to_string(e / T.sh) + " col " +
                                                                      std::to_string(e % T.sh) + ")"
                                                                : "");
        }
    return "?";
}

// No shared-memory hazard was logged since the last clear (the first ones printed, with where).
void expect_no_hazards(const SwinTile &T, const char *what) {
    const warp_emu::HazardLog &h = warp_emu::hazards();
    std::string list;
    for (const warp_emu::Hazard &z : h.first) list += "\n  " + warp_emu::hazard_text(z) + ": " + smem_place(T, z.offset);
    EXPECT_EQ(h.count, 0u) << what << ": shared-memory hazards (the first " << h.first.size() << "):" << list;
}

// out: x (in place) or, with kRes kResFp32ToBf16, the separate bf16 map
template <int C, int HD, int TW, int NW, int QA, int MA, int PF, int kRes>
unsigned long long emulate(const std::vector<uint8_t> &img, void *x, void *out, int H, int W, int shift) {
    constexpr SwinTile T = swin_tile(C, HD, TW, NW, QA, MA);
    swin_fused::KernelArgs a{};
    unsigned long long count = 0;
    a.x = x;
    a.out = out;
    a.img = img.data();
    a.H = H;
    a.W = W;
    a.nwx = W / 8;
    a.nwy = H / 8;
    a.nwin = a.nwx * a.nwy;
    a.shift = shift;
    a.qscale = (float)(1.4426950408889634 / std::sqrt((double)HD));
    a.eps = kEps;
    a.mma_count = &count;
    std::vector<warp::u32x4> smem(T.smem / 16);
    uint8_t *sm = reinterpret_cast<uint8_t *>(smem.data());
    const int ctas = (a.nwin + TW - 1) / TW;
    warp_emu::hazards().clear();
    for (int b = 0; b < ctas; ++b) {
        std::memset(sm, 0xFF, T.smem);
        warp_emu::run_cta(NW * 32, sm, T.smem, [&](int tid) {
            swin_fused::swin_block_tile<C, HD, TW, NW, QA != 0, MA, PF != 0, kRes, true>(a, b, tid, sm);
        });
    }
    const std::string what = "C " + std::to_string(C) + " hd " + std::to_string(HD) + " tile " + std::to_string(TW) + "/" +
                             std::to_string(NW) + (QA ? " qa" : "") + " ma " + std::to_string(MA) + (PF ? " pf" : "");
    expect_no_hazards(T, what.c_str());
    return count;
}

// res: swin_fused::ResMode (false / true: the fp32 / bf16 stream in place)
template <int C, int HD, int TW, int NW, int QA = 0, int MA = 16, int PF = 0>
void check(int H, int W, int shift, int res, uint32_t seed) {
    const bool bf16 = res == swin_fused::kResBf16;
    const int heads = C / HD;
    const size_t n = (size_t)H * W * C;
    swin_ref::RandomBlock rb(C, heads, shift, seed);
    std::vector<uint8_t> img;
    std::string err;
    ASSERT_EQ(swin_weight_image_pack(rb.w, C, heads, &img, &err), 0) << err;
    std::vector<float> x0 = swin_ref::random_map(n, seed + 1);
    if (bf16)
        for (float &v : x0) v = bf16_host::round(v);
    std::vector<float> ref = x0;
    swin_ref::reference_block(rb.w, C, heads, ref.data(), H, W, kEps);
    std::vector<float> out(n);
    unsigned long long cnt;
    if (bf16) {
        std::vector<uint16_t> xb(n);
        for (size_t i = 0; i < n; ++i) xb[i] = bf16_host::from_float(x0[i]);
        cnt = emulate<C, HD, TW, NW, QA, MA, PF, swin_fused::kResBf16>(img, xb.data(), xb.data(), H, W, shift);
        for (size_t i = 0; i < n; ++i) out[i] = bf16_host::to_float(xb[i]);
    } else if (res == swin_fused::kResFp32ToBf16) {
        // the input map must come back untouched, the output only in the bf16 map (poisoned first)
        std::vector<float> x = x0;
        std::vector<uint16_t> ob(n, 0xFFFF);
        cnt = emulate<C, HD, TW, NW, QA, MA, PF, swin_fused::kResFp32ToBf16>(img, x.data(), ob.data(), H, W, shift);
        EXPECT_EQ(std::memcmp(x.data(), x0.data(), n * sizeof(float)), 0) << "the fp32 input map was written";
        for (size_t i = 0; i < n; ++i) out[i] = bf16_host::to_float(ob[i]);
    } else {
        out = x0;
        cnt = emulate<C, HD, TW, NW, QA, MA, PF, swin_fused::kResFp32>(img, out.data(), out.data(), H, W, shift);
    }
    const swin_ref::Error e = swin_ref::compare(out.data(), ref.data(), x0.data(), (int64_t)n);
    const SwinBlockDesc d = swin_block_desc(C, heads, TW, NW, QA, MA);
    const int64_t ctas = ((int64_t)(H / 8) * (W / 8) + TW - 1) / TW;
    std::printf("C %3d hd %2d tile %d/%d%s ma %2d%s %3dx%-3d shift %d %s: rel L2 %.2e, change rel L2 %.2e, max abs %.2e, mma "
                "%llu\n",
                C, HD, TW, NW, QA ? " qa" : "", MA, PF ? " pf" : "", W, H, shift, bf16 ? "bf16" : res ? "fp32 -> bf16 out" : "fp32",
                e.rel_l2, e.delta_rel_l2, e.max_abs, cnt);
    EXPECT_EQ(e.nonfinite, 0) << "non-finite outputs, the first at element " << e.first_nonfinite << " (token "
                              << e.first_nonfinite / C << ")";
    EXPECT_EQ(e.ref_nonfinite, 0) << "non-finite reference values";
    EXPECT_LT(e.rel_l2, swin_ref::kRelL2);
    EXPECT_LT(e.delta_rel_l2, swin_ref::kDeltaRelL2);
    EXPECT_EQ((int64_t)cnt, d.mma_per_cta * ctas) << "mma issued vs descriptor x CTAs";
}

// The fp32 output of tile plan (TW, NW, QA, MA, PF) on block `rb` and map x0 (in place).
template <int C, int HD, int TW, int NW, int QA, int MA, int PF>
std::vector<float> plan_output(const std::vector<uint8_t> &img, const std::vector<float> &x0, int H, int W, int shift) {
    std::vector<float> out = x0;
    emulate<C, HD, TW, NW, QA, MA, PF, swin_fused::kResFp32>(img, out.data(), out.data(), H, W, shift);
    return out;
}

// Every plan in `outs` equals the first bit for bit (names: the plans, for the message).
void expect_bitwise(const std::vector<std::vector<float>> &outs, const std::vector<const char *> &names) {
    for (size_t i = 1; i < outs.size(); ++i) {
        size_t differ = 0, first = 0;
        for (size_t k = 0; k < outs[0].size(); ++k)
            if (std::memcmp(&outs[i][k], &outs[0][k], 4) != 0 && differ++ == 0) first = k;
        EXPECT_EQ(differ, 0u) << names[i] << " differs from " << names[0] << " in " << differ << " values, the first at "
                              << first;
        std::printf("  %-24s vs %-12s: %zu of %zu values differ\n", names[i], names[0], differ, outs[0].size());
    }
}

// A random block of width C and head dim HD packed into its weight image, and a random H x W map.
template <int C, int HD>
struct Block {
    swin_ref::RandomBlock rb;
    std::vector<uint8_t> img;
    std::vector<float> x0;
    Block(int H, int W, int shift, uint32_t seed)
        : rb(C, C / HD, shift, seed), x0(swin_ref::random_map((size_t)H * W * C, seed + 1)) {
        std::string err;
        EXPECT_EQ(swin_weight_image_pack(rb.w, C, C / HD, &img, &err), 0) << err;
    }
};

}  // namespace

// model v1's widths, both tiles, shifted maps where the last window row and column are masked
TEST(SwinBlockEmu, C32) {
    check<32, 32, 1, 4>(8, 8, 4, false, 11);  // one window: all four regions in it
    check<32, 32, 1, 4>(16, 24, 0, false, 12);
    check<32, 32, 1, 4>(16, 24, 4, true, 13);
    check<32, 32, 2, 8>(24, 16, 4, false, 14);
    check<32, 32, 2, 8>(8, 24, 4, true, 15);  // 3 windows: the last CTA has one
}
// The shapes of the first GPU run's failures (fused_check: all or most outputs NaN, because the
// harness uploaded the map on the legacy stream, which the non-blocking compute stream does not
// wait for): the kernel itself gives finite, correct outputs on them.
TEST(SwinBlockEmu, FirstGpuRunShapes) {
    check<32, 32, 2, 8>(16, 24, 0, false, 16);  // 24x16 shift 0 fp32, tile 2/8
    check<32, 32, 1, 4>(8, 24, 4, false, 17);   // 24x8 shift 4 fp32, one window row: every window masked
    check<48, 48, 1, 4>(8, 24, 4, false, 47);
    check<64, 32, 1, 4>(8, 24, 4, false, 23);
}
// the U-Net's last block: fp32 stream in, its output rounded into a separate bf16 map (the
// feature map), shifted and not, tile tails
TEST(SwinBlockEmu, Bf16Out) {
    check<32, 32, 1, 4>(16, 24, 4, swin_fused::kResFp32ToBf16, 51);
    check<32, 32, 2, 8>(8, 24, 0, swin_fused::kResFp32ToBf16, 52);
    check<64, 32, 1, 4>(16, 16, 4, swin_fused::kResFp32ToBf16, 53);
}
TEST(SwinBlockEmu, C64) {
    check<64, 32, 1, 4>(16, 16, 4, false, 21);
    check<64, 32, 2, 8>(16, 24, 4, true, 22);
}
TEST(SwinBlockEmu, C128) {
    check<128, 32, 1, 8>(16, 16, 4, false, 31);
    check<128, 32, 1, 4>(8, 16, 4, true, 32);
}
// the generic paths: head dim 16 and 48 (odd k steps, the half-used last k-pair), C = 16 (one
// k step), several heads, C = 96 / 192 / 256 (several MLP chunks)
TEST(SwinBlockEmu, OtherWidths) {
    check<16, 16, 1, 4>(16, 16, 4, false, 41);
    check<48, 16, 1, 4>(16, 8, 4, false, 42);
    check<48, 48, 1, 4>(16, 16, 4, true, 43);
    check<96, 32, 1, 4>(8, 16, 4, false, 44);
    check<192, 32, 1, 8>(8, 16, 4, false, 45);
    check<256, 32, 1, 8>(8, 16, 4, true, 46);
}

// The occupancy variants' plans on their own: q in the attention phase (one and several items per
// warp, head dims 16 / 32 / 48, items not a multiple of the warps), 4 and 8 accumulator tiles,
// 8 warps on one window, the first weight fragments before the barriers
TEST(SwinBlockEmu, OccupancyPlans) {
    check<32, 32, 1, 4, 0, 8, 1>(8, 16, 4, false, 61);
    check<32, 32, 1, 8>(8, 24, 4, true, 62);
    check<64, 32, 1, 4, 0, 8, 1>(8, 24, 4, false, 63);
    check<64, 32, 1, 4, 1, 8>(16, 16, 4, false, 64);
    check<64, 32, 1, 4, 1, 8>(8, 24, 0, swin_fused::kResFp32ToBf16, 65);
    check<64, 32, 1, 8, 1>(8, 16, 4, true, 66);
    check<64, 32, 2, 8, 0, 8>(8, 24, 4, false, 67);
    check<128, 32, 1, 8, 1, 16, 0>(8, 8, 4, false, 68);
    check<128, 32, 1, 8, 0, 16, 1>(8, 8, 4, true, 69);
    check<48, 16, 1, 8, 1, 4>(16, 8, 4, false, 70);  // 12 items on 8 warps
    check<48, 48, 1, 4, 1>(8, 16, 4, false, 71);     // head dim 48: 3 k steps of q
    check<16, 16, 1, 4, 1, 4, 1>(8, 16, 4, false, 72);
}

// Every plan built for C 32 / 64 / 128 gives the default plan's output bit for bit (shifted maps,
// the last window column masked, a tile tail for the 2-window tile).
TEST(SwinBlockEmu, PlansAgreeBitwise) {
    {
        constexpr int H = 8, W = 24;
        Block<32, 32> b(H, W, 4, 81);
        expect_bitwise({plan_output<32, 32, 1, 4, 0, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<32, 32, 1, 4, 0, 16, 1>(b.img, b.x0, H, W, 4),
                        plan_output<32, 32, 1, 4, 0, 8, 0>(b.img, b.x0, H, W, 4),
                        plan_output<32, 32, 1, 8, 0, 16, 1>(b.img, b.x0, H, W, 4),
                        plan_output<32, 32, 2, 8, 0, 16, 0>(b.img, b.x0, H, W, 4)},
                       {"C 32 1/4", "1/4 pf", "1/4 ma8", "1/8 pf", "2/8"});
    }
    {
        constexpr int H = 8, W = 24;
        Block<64, 32> b(H, W, 4, 82);
        expect_bitwise({plan_output<64, 32, 1, 4, 0, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 1, 4, 0, 16, 1>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 1, 4, 0, 8, 1>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 1, 4, 1, 8, 0>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 1, 8, 0, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 1, 8, 1, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<64, 32, 2, 8, 0, 8, 0>(b.img, b.x0, H, W, 4)},
                       {"C 64 1/4", "1/4 pf", "1/4 ma8 pf", "1/4 qa ma8", "1/8", "1/8 qa", "2/8 ma8"});
    }
    {
        constexpr int H = 8, W = 8;  // one window: all four regions meet in it
        Block<128, 32> b(H, W, 4, 83);
        expect_bitwise({plan_output<128, 32, 1, 8, 0, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<128, 32, 1, 8, 0, 16, 1>(b.img, b.x0, H, W, 4),
                        plan_output<128, 32, 1, 4, 0, 16, 0>(b.img, b.x0, H, W, 4),
                        plan_output<128, 32, 1, 8, 1, 16, 0>(b.img, b.x0, H, W, 4)},
                       {"C 128 1/8", "1/8 pf", "1/4", "1/8 qa"});
    }
}

// Every kernel of SWIN_FUSED_KERNELS (its tile plan; CTAS is a register budget, not a change of
// the body), on a shifted map whose windows are all masked (one window row) with a tile tail
// for the 2-window tiles: against the reference, and above all without a shared-memory hazard
// (emulate). The first GPU racecheck of the qa kernels (C 64 1/4 qa ma 8) reported the one this
// would have found: q's ldmatrix reads and the attention output's stores over them, lanes of one
// warp with no warp barrier between.
TEST(SwinBlockEmu, EveryKernelHazardFree) {
    uint32_t seed = 90;
#define SWIN_EMU_KERNEL(C, HD, TW, NW, QA, MA, PF, CTAS) check<C, HD, TW, NW, QA, MA, PF>(8, 8 * (2 * TW - 1), 4, false, seed++);
    SWIN_FUSED_KERNELS(SWIN_EMU_KERNEL)
#undef SWIN_EMU_KERNEL
}
