// The host side of the CUDA backend, which needs no GPU: where a native frame's colour bits are
// (kernels/cuda/frame_layout.*: row spans, bit masks, the compact copy and the masked copy back)
// and the memory plans (kernels/cuda/memory_plan.cpp: whole frames when they fit the cap, else
// tiles on a 64 px grid within the cap, a clean DENOISE_ENOMEM with the sizes when nothing fits;
// an aligned model's plans).
// Skipped in a build without the CUDA engine.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "denoise.h"
#include "model.h"
#include "engine_test_util.h"
#include "pixfmt_descriptors.h"
#ifdef DENOISE_HAVE_CUDA
#include "cuda/backend_cuda.h"
#include "cuda/frame_layout.h"
#include "cuda/network.h"
#endif

using namespace denoise;

namespace {

#ifdef DENOISE_HAVE_CUDA

using denoise_test::pixfmt_descriptor;

const DenoisePixelFormat kNv12 = pixfmt_descriptor("nv12").f;
const DenoisePixelFormat kP010 = pixfmt_descriptor("p010le").f;
const DenoisePixelFormat kBgra = pixfmt_descriptor("bgra").f;
const DenoisePixelFormat kYuyv = pixfmt_descriptor("yuyv422").f;
const DenoisePixelFormat kYuv420p = pixfmt_descriptor("yuv420p").f;

TEST(CudaFrameLayout, RowSpansBitsAndPitches) {
    cuda::FrameLayout L = cuda::frame_layout(kNv12, 7, 5);  // chroma 4 x 3
    ASSERT_TRUE(L.plane[0].used && L.plane[1].used && !L.plane[2].used && !L.plane[3].used);
    EXPECT_EQ(L.plane[0].row_bytes, 7);
    EXPECT_EQ(L.plane[0].rows, 5);
    EXPECT_EQ(L.plane[1].row_bytes, 8);  // 4 interleaved U V pairs
    EXPECT_EQ(L.plane[1].rows, 3);
    EXPECT_TRUE(L.plane[0].covered && L.plane[1].covered);
    EXPECT_EQ(L.partial_planes, 0u);
    EXPECT_EQ(L.plane[0].pitch % 256, 0);
    EXPECT_EQ(L.plane[1].offset, L.plane[0].pitch * 5);
    EXPECT_EQ(L.bytes, L.plane[0].pitch * 5 + L.plane[1].pitch * 3);

    L = cuda::frame_layout(kP010, 4, 2);  // 10 bits in the high bits of 16-bit words
    EXPECT_EQ(L.plane[0].row_bytes, 8);
    EXPECT_FALSE(L.plane[0].covered);
    EXPECT_EQ(L.plane[0].bits[0], 0xc0);
    EXPECT_EQ(L.plane[0].bits[1], 0xff);
    EXPECT_EQ(L.partial_planes, 3u);

    L = cuda::frame_layout(kBgra, 3, 1);  // alpha bytes at 3, 7, 11 are not colour
    EXPECT_EQ(L.plane[0].row_bytes, 11);  // the last colour byte is R of pixel 2 at 10
    EXPECT_FALSE(L.plane[0].covered);
    EXPECT_EQ(L.plane[0].bits[3], 0);
    EXPECT_EQ(L.plane[0].bits[2], 0xff);

    L = cuda::frame_layout(kYuyv, 3, 2);  // odd width: the last pair's second Y is not a sample
    EXPECT_EQ(L.plane[0].row_bytes, 8);
    EXPECT_FALSE(L.plane[0].covered);
    EXPECT_EQ(L.plane[0].bits[6], 0);
    EXPECT_EQ(L.plane[0].bits[7], 0xff);
}

// compact copy of frame A, then back into frame B: B's colour bits become A's, every other bit of
// B (alpha, p010's low bits, padding beyond the row) is kept.
void roundtrip(const DenoisePixelFormat &f, int W, int H, int nb_planes) {
    const cuda::FrameLayout L = cuda::frame_layout(f, W, H);
    std::mt19937 rng(7);
    std::vector<uint8_t> a[4], b[4];
    DenoiseImage ia{}, ib{};
    for (int i = 0; i < nb_planes; ++i) {
        const int64_t rb = L.plane[i].used ? L.plane[i].row_bytes : W;
        const int rows = L.plane[i].used ? L.plane[i].rows : H;
        const ptrdiff_t ls = rb + 13;
        a[i].resize((size_t)ls * rows);
        b[i].resize((size_t)ls * rows);
        for (auto &x : a[i]) x = (uint8_t)rng();
        for (auto &x : b[i]) x = (uint8_t)rng();
        ia.data[i] = a[i].data();
        ib.data[i] = b[i].data();
        ia.linesize[i] = ib.linesize[i] = ls;
    }
    const std::vector<uint8_t> b0[4] = {b[0], b[1], b[2], b[3]};
    std::vector<uint8_t> compact((size_t)L.bytes);
    cuda::copy_to_compact(L, ia, compact.data());
    cuda::copy_from_compact(L, compact.data(), ib);
    for (int i = 0; i < nb_planes; ++i) {
        const cuda::PlaneLayout &p = L.plane[i];
        for (size_t k = 0; k < b[i].size(); ++k) {
            const int64_t col = (int64_t)(k % (size_t)ia.linesize[i]);
            const uint8_t m = p.used && col < p.row_bytes ? p.bits[col] : 0;
            ASSERT_EQ(b[i][k], (uint8_t)((b0[i][k] & ~m) | (a[i][k] & m))) << "plane " << i << " byte " << k;
        }
    }
}

TEST(CudaFrameLayout, CompactRoundTripKeepsOtherBits) {
    roundtrip(kNv12, 33, 17, 2);
    roundtrip(kP010, 33, 17, 2);
    roundtrip(kBgra, 21, 9, 1);
    roundtrip(kYuyv, 21, 9, 1);
    roundtrip(kYuv420p, 9, 9, 4);  // with an alpha plane that is never touched
}

// Frames whose planes span many of the copies' row bands (256 KiB each, handed to the thread
// pool): every band lands at its own rows, the masked merge included.
TEST(CudaFrameLayout, CompactRoundTripInBands) {
    roundtrip(kNv12, 1920, 1080, 2);
    roundtrip(kP010, 1366, 770, 2);
    roundtrip(kBgra, 1031, 517, 1);
}

TEST(CudaFrameLayout, CheckImage) {
    const cuda::FrameLayout L = cuda::frame_layout(kNv12, 64, 32);
    std::vector<uint8_t> y(64 * 32), uv(64 * 16);
    DenoiseImage im{};
    im.data[0] = y.data();
    im.data[1] = uv.data();
    im.linesize[0] = im.linesize[1] = 64;
    EXPECT_EQ(cuda::check_image(L, im, false), "");
    im.linesize[1] = -64;
    EXPECT_NE(cuda::check_image(L, im, false), "");
    EXPECT_EQ(cuda::check_image(L, im, true), "");
    im.linesize[0] = 63;
    EXPECT_NE(cuda::check_image(L, im, true).find("shorter"), std::string::npos);
    im.linesize[0] = 64;
    im.data[1] = nullptr;
    EXPECT_NE(cuda::check_image(L, im, true).find("NULL"), std::string::npos);
}

const Model &model() {
    static Model m;
    static bool loaded = [] {
        std::string err;
        return load_model(denoise_test::data_dir() + "/golden_weights.safetensors", &m, &err);
    }();
    EXPECT_TRUE(loaded);
    return m;
}

StreamSpec spec_for(int W, int H, const DenoisePixelFormat &f, int64_t cap, int tile = 0) {
    StreamSpec s;
    s.width = W;
    s.height = H;
    s.hp = (H + 63) / 64 * 64;
    s.wp = (W + 63) / 64 * 64;
    s.cw = -((-W) >> f.log2_chroma_w);
    s.ch = -((-H) >> f.log2_chroma_h);
    s.format = f;
    s.gpu_memory = cap;
    s.tile = tile;
    return s;
}

TEST(CudaPlans, WholeFramesWhenTheyFitTilesOtherwise) {
    const Model &m = model();
    std::string err;
    int code = 0;
    CudaPlanInfo i;
    auto b = cuda_backend_new(m, spec_for(3840, 2160, kYuv420p, DENOISE_GPU_MEMORY_DEFAULT), &err, &code);
    ASSERT_TRUE(b && cuda_backend_plan(*b, &i)) << err;
    EXPECT_FALSE(i.tiled) << i.text;
    EXPECT_LE(i.planned_bytes, DENOISE_GPU_MEMORY_DEFAULT);
    EXPECT_EQ(b->pipeline_depth(), 1);  // memory HOST: two frames in flight

    const int64_t two = (int64_t)2 << 30;
    b = cuda_backend_new(m, spec_for(7680, 4320, kYuv420p, two), &err, &code);
    ASSERT_TRUE(b && cuda_backend_plan(*b, &i)) << err;
    EXPECT_TRUE(i.tiled) << i.text;
    EXPECT_EQ(i.tile % 64, 0);
    EXPECT_EQ(i.halo, 64);
    EXPECT_LE(i.planned_bytes, two);
    EXPECT_EQ(i.tiles, ((4320 + i.tile - 1) / i.tile) * ((7680 + i.tile - 1) / i.tile));

    b = cuda_backend_new(m, spec_for(1920, 1080, kNv12, DENOISE_GPU_MEMORY_DEFAULT, 300), &err, &code);
    ASSERT_TRUE(b && cuda_backend_plan(*b, &i)) << err;  // spec.tile forces tiles
    EXPECT_TRUE(i.tiled);
    EXPECT_LE(i.tile, 300);
    EXPECT_EQ(i.tile % 64, 0);

    StreamSpec s = spec_for(1920, 1080, kNv12, DENOISE_GPU_MEMORY_DEFAULT);
    s.memory = DENOISE_MEMORY_CUDA;
    b = cuda_backend_new(m, s, &err, &code);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->pipeline_depth(), 1);  // memory CUDA: output t+1 queued before t is copied out
}

// Model v2's alignment (the aligned golden model: align 8, align_tile 32, fusion radius 2): the
// CUDA backend opens it; the whole-frame plan counts 2r + 1 = 5 luma pyramids, the shift maps (2
// per feature ring buffer, 2r - 2 = 2 scratch) and, only where the two-pass head runs (no GPU
// here, DENOISE_CUDA_FUSED=0, or a device without the tensor-core head), the head's two moved
// feature maps on top of the same stream's unaligned plan (no moved frames: the fusion conv reads
// through the maps); under a cap just below that, whole frames with 2 pyramids (a
// pair at a time); tiles keep origins on the 64 px grid and grow the halo by the alignment's
// reach (64 + 8 px -> 128 px).
TEST(CudaPlans, AlignedModel) {
    Model a;
    std::string err;
    ASSERT_TRUE(load_model(denoise_test::data_dir() + "/golden_align_weights.safetensors", &a, &err)) << err;
    ASSERT_EQ(a.cfg.align, 8);
    int code = 0;
    CudaPlanInfo i, v1;
    const StreamSpec s = spec_for(1920, 1080, kYuv420p, DENOISE_GPU_MEMORY_DEFAULT);
    auto b = cuda_backend_new(a, s, &err, &code);
    ASSERT_TRUE(b && cuda_backend_plan(*b, &i)) << err;
    auto b1 = cuda_backend_new(model(), s, &err, &code);
    ASSERT_TRUE(b1 && cuda_backend_plan(*b1, &v1)) << err;
    EXPECT_FALSE(i.tiled) << i.text;
    const int64_t px = 1920 * 1088, tok = px / 4, pyr = px / 16 * 21 * 4, map = (1088 / 32) * (1920 / 32) * 8;
    const bool tc_head = cuda::Net::fused_from_env() && cuda::head_conv3d_tc_supported(s.device, 32, nullptr) == 0;
    EXPECT_EQ(i.planned_bytes - v1.planned_bytes, 5 * pyr + (tc_head ? 0 : 2 * tok * 32 * 2) + 8 * map) << i.text;
    EXPECT_EQ(i.align_pyramids, 5) << i.text;
    EXPECT_NE(i.text.find("5 luma pyramids"), std::string::npos) << i.text;
    EXPECT_EQ(v1.align_pyramids, 0) << v1.text;

    // caps just below each 5-pyramid whole-frame plan (chunks of 2^18, then 2^16 tokens)
    CudaPlanInfo j = i;
    for (int k = 0; k < 2 && !j.tiled && j.align_pyramids == 5; ++k) {
        const int64_t cap = j.planned_bytes - 1;
        b = cuda_backend_new(a, spec_for(1920, 1080, kYuv420p, cap), &err, &code);
        ASSERT_TRUE(b && cuda_backend_plan(*b, &j)) << err;
        EXPECT_LE(j.planned_bytes, cap);
    }
    EXPECT_FALSE(j.tiled) << j.text;
    EXPECT_EQ(j.align_pyramids, 2) << j.text;
    if (j.chunk == i.chunk) {
        EXPECT_EQ(i.planned_bytes - j.planned_bytes, 3 * pyr) << j.text;
    }

    const int64_t two = (int64_t)2 << 30;
    b = cuda_backend_new(a, spec_for(7680, 4320, kYuv420p, two), &err, &code);
    ASSERT_TRUE(b && cuda_backend_plan(*b, &i)) << err;
    EXPECT_TRUE(i.tiled) << i.text;
    EXPECT_EQ(i.tile % 64, 0);
    EXPECT_EQ(i.halo, 128);
    EXPECT_LE(i.planned_bytes, two);
    EXPECT_NE(i.text.find("128 px halo"), std::string::npos) << i.text;
    EXPECT_TRUE(i.align_pyramids == 5 || i.align_pyramids == 2) << i.text;
}

TEST(CudaPlans, CapTooSmallFailsWithTheSizes) {
    std::string err;
    int code = 0;
    auto b = cuda_backend_new(model(), spec_for(1920, 1080, kYuv420p, (int64_t)1 << 20), &err, &code);
    EXPECT_FALSE(b);
    EXPECT_EQ(code, DENOISE_ENOMEM);
    EXPECT_NE(err.find("cap"), std::string::npos) << err;
    EXPECT_NE(err.find("GiB"), std::string::npos) << err;
}

#else

TEST(CudaHost, NotBuilt) { GTEST_SKIP() << "built without the CUDA engine"; }

#endif

}  // namespace
