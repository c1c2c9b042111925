// denoise-cuda-bench: the shared helpers and this run's rows and ceilings (cuda_bench.h).
#include "cuda_bench.h"

namespace cuda_bench {

std::vector<Row> g_rows;
std::vector<PathRow> g_paths;
double g_gemm_tflops = 0, g_copy_gbs = 0;

double gflop_per_frame(const ModelConfig &c, int H, int W) {
    const int m = c.pad_multiple;
    H = (H + m - 1) / m * m;
    W = (W + m - 1) / m * m;
    const double c0 = c.channels[0], c1 = c.channels[1], c2 = c.channels[2];
    const double n0 = (double)(H / 2) * (W / 2), n1 = n0 / 4, n2 = n0 / 16, N = c.window * c.window, r = c.mlp_ratio;
    auto block = [&](double C, double n) { return n * (3 * C * C + C * C + 2 * r * C * C + 2 * N * C); };
    double macs = n0 * ((2 * c.fusion_radius + 1) * 12 + 1) * c0 * 9;
    macs += block(c0, n0) * (c.depth_enc0 + c.depth_dec0) + block(c1, n1) * (c.depth_enc1 + c.depth_dec1);
    macs += block(c2, n2) * c.depth_mid;
    macs += n1 * 4 * c0 * c1 + n2 * 4 * c1 * c2;
    macs += n2 * c2 * 4 * c1 + n1 * 2 * c1 * c1;  // expand1 (C -> 4C') + skip1
    macs += n1 * c1 * 4 * c0 + n0 * 2 * c0 * c0;  // expand0 + skip0
    macs += n0 * c0 * 27 * 12;
    return 2 * macs / 1e9;
}

DenoisePixelFormat yuv420p() {
    DenoisePixelFormat f{};
    f.nb_components = 3;
    for (int c = 0; c < 3; ++c) f.comp[c] = {c, 0, 1, 0, 8};
    f.log2_chroma_w = f.log2_chroma_h = 1;
    f.bytes = 1;
    return f;
}

DenoiseColor bt709() {
    DenoiseColor c{};
    c.repr.sys = PL_COLOR_SYSTEM_BT_709;
    c.repr.levels = PL_COLOR_LEVELS_LIMITED;
    c.chroma_xpos = 0;
    c.chroma_ypos = 128;
    return c;
}

// A yuv420p frame: gradients plus pseudo-random noise, moving with t.
void fill_frame(std::vector<uint8_t> *planes, int W, int H, int t) {
    const int cw = (W + 1) / 2, ch = (H + 1) / 2;
    planes[0].resize((size_t)W * H);
    planes[1].resize((size_t)cw * ch);
    planes[2].resize((size_t)cw * ch);
    uint32_t s = 2463534242u + t;
    auto rnd = [&]() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        return (int)(s % 41) - 20;
    };
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            planes[0][(size_t)y * W + x] = (uint8_t)std::min(235, std::max(16, 16 + ((x + 3 * t) * 219 / W + y * 50 / H) % 220 + rnd()));
    for (int p = 1; p < 3; ++p)
        for (int y = 0; y < ch; ++y)
            for (int x = 0; x < cw; ++x)
                planes[p][(size_t)y * cw + x] = (uint8_t)std::min(240, std::max(16, 128 + (p == 1 ? x - cw / 2 : y - ch / 2) * 60 / cw + rnd() / 2));
}

}  // namespace cuda_bench
